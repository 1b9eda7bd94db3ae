"""`python -m sim.tidb.world` runs a simulated cluster with the TiDB world: it writes the
kubeconfig and the fakes' URLs, serves both, and stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from kubernetes import client, config

from tests.polling import eventually

REPO = Path(__file__).resolve().parents[3]


def test_world_process_serves_kube_and_fakes(tmp_path: Path) -> None:
    kubeconfig, info = tmp_path / "kubeconfig", tmp_path / "info.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.tidb.world", "--kubeconfig", str(kubeconfig), "--info", str(info)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        eventually(lambda: info.exists() and info.read_text(), timeout=30, message="info file written")
        urls = json.loads(info.read_text())
        api = config.new_client_from_config(str(kubeconfig))
        crds = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
        assert {c.metadata.name for c in crds} >= {"tidbclusters.pingcap.com", "tidbclusterautoscalers.pingcap.com"}
        resp = httpx.get(urls["prometheus_url"] + "/api/v1/query", params={"query": "tikv_server_cpu_cores_quota"})
        assert resp.json() == {"status": "success", "data": {"resultType": "vector", "result": []}}
        pd = urls["pd_url_template"].format(namespace="default", cluster="none")
        assert httpx.get(pd + "/pd/api/v1/stores").status_code == 404  # no such TidbCluster
        api.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
