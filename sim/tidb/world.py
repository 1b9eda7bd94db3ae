"""The TiDB world attached to a simulated cluster: operator, load model and HTTP fakes.

    with FakeCluster() as cluster, FakeTidb(cluster.store) as world:
        world.prometheus_url, world.pd_url("ns", "basic"), world.external_url
        world.load.set_demand("ns", "basic", "tikv", 3.0)

or from a shell, a whole simulated cluster with it:
`python -m sim.tidb.world --kubeconfig PATH [--info PATH]` (the info file gets the URLs as JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sim.http import serve_until_interrupted
from sim.kube.errors import ApiError
from sim.kube.store import Store
from sim.tidb.crds import tidb_crds
from sim.tidb.load import LoadModel
from sim.tidb.operator import TidbOperator
from sim.tidb.server import TidbServer


def install_crds(store: Store, status_subresource: bool = False) -> None:
    """Register the TidbCluster and TidbClusterAutoScaler CRDs (no-op when already there)."""
    crds = store.builtin("customresourcedefinitions", "apiextensions.k8s.io")
    for crd in tidb_crds(status_subresource):
        try:
            store.create(crds, "", crd)
        except ApiError as exc:
            if exc.code != 409:
                raise


class FakeTidb:
    def __init__(
        self,
        store: Store,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        install: bool = True,
        operator_interval: float = 0.1,
    ) -> None:
        self.store = store
        self.load = LoadModel()
        self.operator = TidbOperator(store, interval=operator_interval)
        self.server = TidbServer(store, self.load, host, port)
        self._install = install

    @property
    def prometheus_url(self) -> str:
        return self.server.prometheus_url

    @property
    def external_url(self) -> str:
        return self.server.external_url

    def pd_url(self, namespace: str, cluster: str) -> str:
        return self.server.pd_url(namespace, cluster)

    @property
    def pd_url_template(self) -> str:
        """With {namespace} and {cluster} placeholders, for settings."""
        return f"{self.server.url}/pd/{{namespace}}/{{cluster}}"

    def start(self) -> FakeTidb:
        if self._install:
            install_crds(self.store)
        self.server.start()
        self.operator.start()
        return self

    def stop(self) -> None:
        self.operator.stop()
        self.server.stop()

    def __enter__(self) -> FakeTidb:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def info(self) -> dict[str, str]:
        return {
            "prometheus_url": self.prometheus_url,
            "pd_url_template": self.pd_url_template,
            "external_url": self.external_url,
            "control_url": f"{self.server.url}/sim/v1",
        }


def main(argv: list[str] | None = None) -> int:
    from sim.cluster import FakeCluster

    parser = argparse.ArgumentParser(prog="growth-sim-tidb", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument("--info", default=None, help="where to write the fakes' URLs as JSON")
    parser.add_argument("--port", type=int, default=0, help="the TiDB fakes' port")
    parser.add_argument("--node-ready-delay", type=float, default=1.0)
    parser.add_argument(
        "--tikv-offline",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="a removed TiKV's store stays Offline this long before its pod is deleted",
    )
    parser.add_argument("--data-dir", default=None, help="keep the cluster's store here (see sim.cluster)")
    args = parser.parse_args(argv)

    @contextmanager
    def serving() -> Iterator[FakeTidb]:
        with (
            FakeCluster(node_ready_delay=args.node_ready_delay, data_dir=args.data_dir, fsync=False) as cluster,
            FakeTidb(cluster.store, port=args.port) as world,
        ):
            cluster.write_kubeconfig(args.kubeconfig)
            if args.info:
                Path(args.info).write_text(json.dumps(world.info(), indent=2))
            yield world

    return serve_until_interrupted(serving(), lambda world: f"sim tidb world ready: {json.dumps(world.info())}")


if __name__ == "__main__":
    sys.exit(main())
