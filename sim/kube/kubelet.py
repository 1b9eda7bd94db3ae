"""What `kubeadm join` + kubelet do on a machine a (fake) cloud boots: join it as a Node.

A fake cloud stays a cloud API: when one of its servers has booted it hands the machine to a
`Kubelet`, which does what cloud-init would run on it:

1. read the join command and the kubelet flags from the user data (`kubeadm join ... --token
   T [--discovery-token-ca-cert-hash sha256:H]`, `--node-labels`, `--register-with-taints`);
2. discovery, as kubeadm's token discovery does: fetch the kube-public `cluster-info`
   ConfigMap without credentials and without trusting the server yet, take the CA from it, and
   check it against the pinned hash when the command has one;
3. the join token must be the cluster's (a real apiserver checks bootstrap tokens; a wrong one
   never gets a Node);
4. register the Node (HTTPS, verified against the discovered CA): capacity from the machine's
   hardware, allocatable after the kube/system reservation, labels and taints from the flags,
   plus the labels a cloud controller manager adds (instance type, region, zone).

`machine_deleted` plays the cloud controller manager's node lifecycle controller: the Node of
a machine that no longer exists is deleted (the kubelet cannot: it went with the machine).

Machines boot on no real network, so the kubelet reaches the cluster at the `api_url` it was
given; the endpoint in the join command is not dialled.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import yaml

from sim.kube.tls import ca_cert_hash

KWOK_ANNOTATION = "kwok.x-k8s.io/node"  # sim/kube/kwok.py makes annotated Nodes Ready
CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"


@dataclass(frozen=True)
class Machine:
    """A booted machine as its kubelet sees it (hardware, identity, cloud metadata)."""

    name: str
    provider_id: str
    user_data: str
    cpu_cores: int
    memory_bytes: int
    disk_gb: int
    arch: str = "amd64"  # Kubernetes' name: amd64 or arm64
    os_image: str = "ubuntu-24.04"
    serial: int = 0  # numbers the machine id, boot id and system UUID
    cloud_labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JoinConfig:
    token: str | None
    ca_cert_hash: str | None
    labels: dict[str, str]
    taints: list[dict[str, str]]


def _flag(text: str, flag: str) -> str | None:
    m = re.search(rf"{re.escape(flag)}[= ]+([^\s\"']+)", text)
    return m.group(1) if m else None


def parse_kubelet_user_data(user_data: str) -> tuple[str | None, dict[str, str], list[dict[str, str]]]:
    """(join token, node labels, taints) as kubeadm/kubelet would read them from cloud-init."""
    config = parse_join(user_data)
    return config.token, config.labels, config.taints


def parse_join(user_data: str) -> JoinConfig:
    token = ca_hash = None
    for line in user_data.splitlines():
        if "kubeadm" in line and "join" in line:
            words = shlex.split(line.strip().lstrip("-").strip().strip("[]").replace(",", " "))
            for i, word in enumerate(words[:-1]):
                if word == "--token":
                    token = words[i + 1]
                elif word == "--discovery-token-ca-cert-hash":
                    ca_hash = words[i + 1]
    token = token or _flag(user_data, "--token")
    labels: dict[str, str] = {}
    for pair in (_flag(user_data, "--node-labels") or "").split(","):
        if "=" in pair:
            key, value = pair.split("=", 1)
            labels[key] = value
    taints: list[dict[str, str]] = []
    for item in (_flag(user_data, "--register-with-taints") or "").split(","):
        if ":" not in item:
            continue
        kv, effect = item.rsplit(":", 1)
        key, _, value = kv.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    return JoinConfig(token, ca_hash, labels, taints)


class Kubelet:
    """Joins booted machines to one cluster. `join` answers "joined", "refused" or "retry"."""

    def __init__(
        self,
        api_url: str,
        token: str | None,
        *,
        join_token: str | None = None,
        ca_pem: bytes | None = None,
        reserved_cpu_m: int = 100,
        reserved_memory: int = 256 * 1024**2,
        max_pods: int = 110,
        timeout: float = 5.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token  # the node's credentials once joined
        self.join_token = join_token  # the cluster's bootstrap token; None accepts any
        self.ca_pem = ca_pem  # None: discover it from cluster-info, as kubeadm does
        self.reserved_cpu_m = reserved_cpu_m
        self.reserved_memory = reserved_memory
        self.max_pods = max_pods
        self.timeout = timeout
        self.refused: dict[str, str] = {}  # machine name -> why its join was refused

    # ---- join -----------------------------------------------------------------------------
    def join(self, machine: Machine) -> str:
        config = parse_join(machine.user_data)
        if self.join_token is not None and config.token != self.join_token:
            return self._refuse(machine, "the join token is not one of the cluster's bootstrap tokens")
        context = self._context(config)
        if isinstance(context, str):
            return context if context == "retry" else self._refuse(machine, context)
        status = self._request("POST", "/api/v1/nodes", self.node(machine, config), context)
        return "joined" if status in (200, 201, 409) else "retry"

    def _refuse(self, machine: Machine, why: str) -> str:
        self.refused[machine.name] = why
        return "refused"

    def _context(self, config: JoinConfig) -> ssl.SSLContext | None | str:
        """The TLS context for the cluster, or "retry"/a refusal reason."""
        if not self.api_url.startswith("https://"):
            return None
        if self.ca_pem is None:
            # Token discovery: the CA is not trusted yet, so this one read does not verify it;
            # the pinned hash (when given) is what makes the answer trustworthy.
            unverified = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle to load: it verifies nothing
            unverified.check_hostname = False
            unverified.verify_mode = ssl.CERT_NONE
            try:
                req = urllib.request.Request(self.api_url + CLUSTER_INFO, headers={"Accept": "application/json"})
                with urllib.request.urlopen(req, timeout=self.timeout, context=unverified) as resp:
                    info = yaml.safe_load(json.loads(resp.read())["data"]["kubeconfig"])
                self.ca_pem = base64.b64decode(info["clusters"][0]["cluster"]["certificate-authority-data"])
            except (OSError, KeyError, ValueError, TypeError, yaml.YAMLError):
                return "retry"
        if config.ca_cert_hash and config.ca_cert_hash != ca_cert_hash(self.ca_pem):
            return f"the cluster CA does not match --discovery-token-ca-cert-hash {config.ca_cert_hash}"
        return ssl.create_default_context(cadata=self.ca_pem.decode())

    def node(self, machine: Machine, config: JoinConfig) -> dict[str, Any]:
        """The Node a kubelet registers for this machine."""
        capacity = {
            "cpu": str(machine.cpu_cores),
            "memory": f"{machine.memory_bytes // 1024}Ki",
            "pods": str(self.max_pods),
            "ephemeral-storage": f"{machine.disk_gb}G",
        }
        allocatable = {
            **capacity,
            "cpu": f"{machine.cpu_cores * 1000 - self.reserved_cpu_m}m",
            "memory": f"{(machine.memory_bytes - self.reserved_memory) // 1024}Ki",
        }
        labels = {
            **config.labels,
            "kubernetes.io/hostname": machine.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": machine.arch,
            **machine.cloud_labels,
        }
        n = machine.serial
        return {
            "apiVersion": "v1",
            "kind": "Node",
            # The KWOK annotation lets sim/kube/kwok.py play the node's heartbeats and pods.
            "metadata": {"name": machine.name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
            "spec": {"providerID": machine.provider_id, "taints": config.taints},
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                # A kubelet reports every field; clients (kubernetes 37's models) require them.
                "nodeInfo": {
                    "architecture": machine.arch,
                    "bootID": f"boot-{n}",
                    "containerRuntimeVersion": "containerd://1.7.22",
                    "kernelVersion": "6.8.0-45-generic",
                    "kubeProxyVersion": "v1.31.0",
                    "kubeletVersion": "v1.31.0",
                    "machineID": f"{n:032x}",
                    "operatingSystem": "linux",
                    "osImage": machine.os_image,
                    "systemUUID": f"00000000-0000-0000-0000-{n:012x}",
                },
            },
        }

    # ---- the cloud controller manager's part ---------------------------------------------
    def machine_deleted(self, name: str) -> bool:
        """The machine is gone: delete its Node (True when it is gone from the cluster)."""
        context = self._context(JoinConfig(None, None, {}, []))
        if isinstance(context, str):
            return False
        return self._request("DELETE", f"/api/v1/nodes/{name}", None, context) in (200, 202, 404)

    def _request(self, method: str, path: str, body: dict[str, Any] | None, context: ssl.SSLContext | None) -> int:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=context) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except OSError:
            return 0
