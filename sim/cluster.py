"""A whole simulated cluster in one process: API server, KWOK, scheduler, controllers (the
workload controllers and the node lifecycle controller's condition taints).

    with FakeCluster(node_ready_delay=0.2) as cluster:
        cluster.write_kubeconfig(path)   # then kubernetes.config.load_kube_config(path), or kubectl

or from a shell: `python -m sim.cluster --port 0 --kubeconfig PATH --node-ready-delay 2`.

The API server speaks HTTPS only, with a CA generated at start: the kubeconfig carries it
(certificate-authority-data) and a bearer token, so kubectl and the official client verify
the server and send the token. In-process callers use `ssl_context()` or `ca_file`.

With `data_dir` (`--data-dir`) the cluster lives on disk: the store (sim/kube/journal.py), the
CA and serving certificate, the token and the port, so a killed and restarted process is the
same cluster at the same address, and clients keep their kubeconfig.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import ssl
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from sim.http import serve_until_interrupted
from sim.kube import tls
from sim.kube.apiserver import ApiServer
from sim.kube.control import SCORING, FakeControl
from sim.kube.controllers import Controllers
from sim.kube.journal import write_atomically
from sim.kube.kwok import Kwok
from sim.kube.nodelifecycle import NodeLifecycle
from sim.kube.scheduler import Scheduler
from sim.kube.store import Store


class FakeCluster:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        node_ready_delay: float = 1.0,
        node_taint_lag: float = 0.0,
        pod_start_delay: float = 0.2,
        scheduler_interval: float = 0.25,
        scoring: str = "least-allocated",
        never_ready_nodes: list[str] | None = None,
        run_scheduler: bool = True,
        run_kwok: bool = True,
        run_controllers: bool = True,
        data_dir: str | Path | None = None,
        fsync: bool = True,
        name: str | None = None,
    ) -> None:
        if scoring not in SCORING:
            raise ValueError(f"scoring must be one of {SCORING}")
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self._name = name
        self.token = self._kept("token", lambda: (token or secrets.token_hex(16)).encode(), token).decode()
        self.certs = self._kept_certs()
        if self.data_dir is not None and port == 0 and (self.data_dir / "port").exists():
            port = int((self.data_dir / "port").read_text())  # the same address after a restart
        self._ca_dir: str | None = None
        self.store = Store(data_dir=self.data_dir, fsync=fsync)
        self.control = FakeControl(
            node_ready_delay=node_ready_delay,
            node_taint_lag=node_taint_lag,
            pod_start_delay=pod_start_delay,
            scheduler_interval=scheduler_interval,
            scoring=scoring,
            never_ready_nodes=list(never_ready_nodes or []),
        )
        self.apiserver = ApiServer(self.store, self.control, self.token, host, port, self.certs)
        self.kwok = Kwok(self.store, self.control)
        self.scheduler = Scheduler(self.store, self.control)
        self.controllers = Controllers(self.store)
        # kube-controller-manager's node lifecycle controller: runs with the other controllers.
        self.node_lifecycle = NodeLifecycle(self.store, self.control)
        self._actors = [
            a
            for a, on in (
                (self.kwok, run_kwok),
                (self.scheduler, run_scheduler),
                (self.controllers, run_controllers),
                (self.node_lifecycle, run_controllers),
            )
            if on
        ]
        self._started = False

    def _kept(self, name: str, make: Any, given: str | None = None) -> bytes:
        """A secret kept in the data directory across restarts (made once; `given` replaces it)."""
        if self.data_dir is None:
            return make()
        path = self.data_dir / name
        if path.exists() and given is None:
            return path.read_bytes()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        value = make()
        write_atomically(path, value, 0o600)
        return value

    def _kept_certs(self) -> tls.ServingCerts:
        if self.data_dir is None:
            return tls.generate()
        pki = self.data_dir / "pki"
        files = {"ca_pem": pki / "ca.crt", "cert_pem": pki / "apiserver.crt", "key_pem": pki / "apiserver.key"}
        if all(f.exists() for f in files.values()):
            return tls.ServingCerts(**{k: f.read_bytes() for k, f in files.items()})
        certs = tls.generate()
        pki.mkdir(parents=True, exist_ok=True)
        for key, f in files.items():
            write_atomically(f, getattr(certs, key), 0o600)
        return certs

    @property
    def url(self) -> str:
        return self.apiserver.url

    def start(self) -> FakeCluster:
        self._publish_cluster_info()
        if self.data_dir is not None:
            write_atomically(self.data_dir / "port", str(self.apiserver.httpd.server_address[1]).encode())
        self.apiserver.start()
        for actor in self._actors:
            actor.start()
        self._started = True
        return self

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for actor in self._actors:
            actor.stop()
        self.apiserver.stop()
        self.store.close()
        if self._ca_dir is not None:
            shutil.rmtree(self._ca_dir, ignore_errors=True)
            self._ca_dir = None

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _publish_cluster_info(self) -> None:
        # What `kubeadm init` publishes for joining machines: the endpoint and the CA, readable
        # without credentials (sim/kube/kubelet.py reads it the way `kubeadm join` does).
        info = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "users": None,
            "contexts": None,
            "clusters": [
                {"name": "", "cluster": {"server": self.url, "certificate-authority-data": self.certs.ca_data}}
            ],
        }
        if self.store.find(self.store.builtin("configmaps"), "kube-public", "cluster-info") is not None:
            return  # restarted on its data directory: published when first started
        self.store.create(
            self.store.builtin("configmaps"),
            "kube-public",
            {"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": yaml.safe_dump(info, sort_keys=False)}},
        )

    @property
    def ca_file(self) -> str:
        """The CA as a PEM file (the official client's Configuration.ssl_ca_cert takes a path)."""
        if self._ca_dir is None:
            self._ca_dir = tempfile.mkdtemp(prefix="sim-cluster-ca-")
            Path(self._ca_dir, "ca.crt").write_bytes(self.certs.ca_pem)
        return str(Path(self._ca_dir, "ca.crt"))

    def ssl_context(self) -> ssl.SSLContext:
        """A client SSL context that trusts this cluster's CA (urllib, httpx)."""
        return self.certs.client_context()

    @property
    def name(self) -> str:
        """The cluster's name in its kubeconfig (context, cluster and user): given, or
        sim-<port>, so the kubeconfigs of two clusters merge (KUBECONFIG=a:b) without a clash."""
        return self._name or f"sim-{self.url.rsplit(':', 1)[1]}"

    def kubeconfig(self) -> dict[str, Any]:
        n = self.name
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [
                {"name": n, "cluster": {"server": self.url, "certificate-authority-data": self.certs.ca_data}}
            ],
            "users": [{"name": n, "user": {"token": self.token}}],
            "contexts": [{"name": n, "context": {"cluster": n, "user": n, "namespace": "default"}}],
            "current-context": n,
        }

    def write_kubeconfig(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        target.chmod(0o600)
        return target

    def api_client(self) -> Any:
        """An official-client ApiClient for this cluster (imports kubernetes lazily)."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = self.ca_file
        configuration.api_key = {"BearerToken": self.token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return client.ApiClient(configuration)

    def control_request(self, method: str, path: str, body: Any = None) -> Any:
        """Call a /sim/v1 control endpoint, e.g. ("POST", "/sim/v1/faults", {...})."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10, context=self.ssl_context()) as response:
            return json.loads(response.read())

    def set_faults(self, never_ready_nodes: list[str]) -> None:
        self.control.set_faults({"never_ready_nodes": never_ready_nodes})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="growth-sim-cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument("--token", default=None, help="bearer token (random when omitted)")
    parser.add_argument("--name", default=None, help="the kubeconfig's context, cluster and user (default sim-<port>)")
    parser.add_argument("--node-ready-delay", type=float, default=1.0)
    parser.add_argument(
        "--node-taint-lag",
        type=float,
        default=0.0,
        help="seconds a node that turned Ready keeps its not-ready taint (default: the next pass)",
    )
    parser.add_argument("--pod-start-delay", type=float, default=0.2)
    parser.add_argument("--scheduler-interval", type=float, default=0.25)
    parser.add_argument("--scoring", choices=SCORING, default="least-allocated")
    parser.add_argument(
        "--never-ready",
        action="append",
        default=[],
        metavar="GLOB",
        help="node names matching this glob never become Ready (repeatable)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="keep the store, CA, token and port here; a restart on it is the same cluster",
    )
    parser.add_argument(
        "--no-fsync",
        dest="fsync",
        action="store_false",
        help="with --data-dir: do not fsync before answering a write (a kill still loses nothing)",
    )
    args = parser.parse_args(argv)
    cluster = FakeCluster(
        host=args.host,
        port=args.port,
        token=args.token,
        node_ready_delay=args.node_ready_delay,
        node_taint_lag=args.node_taint_lag,
        pod_start_delay=args.pod_start_delay,
        scheduler_interval=args.scheduler_interval,
        scoring=args.scoring,
        never_ready_nodes=args.never_ready,
        data_dir=args.data_dir,
        fsync=args.fsync,
        name=args.name,
    )

    def ready(started: FakeCluster) -> str:
        started.write_kubeconfig(args.kubeconfig)
        return f"sim cluster ready: {started.url}"

    return serve_until_interrupted(cluster, ready)


if __name__ == "__main__":
    sys.exit(main())
