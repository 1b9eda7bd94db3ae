"""cloud-init user data that joins a new machine to the cluster as a kubeadm worker.

Labels and taints travel as kubelet flags so the Node registers already labelled and tainted:
no pod can land on it before growth's labels/taints are in place (no race with a later patch).
"""

from __future__ import annotations

import shlex

from scaling.kube.models import Taint

USER_DATA_LIMIT = 32 * 1024  # Hetzner's limit on user_data

_TEMPLATE = """#cloud-config
# Written by growth: joins this machine to the cluster {cluster} as node {node_name}.
hostname: {node_name}
preserve_hostname: false
write_files:
  - path: /etc/default/kubelet
    permissions: "0644"
    content: |
      KUBELET_EXTRA_ARGS="{kubelet_args}"
runcmd:
  - [systemctl, enable, --now, containerd]
  - {join_cmd}
"""


def kubelet_flags(labels: dict[str, str], taints: list[Taint]) -> list[str]:
    """--node-labels and --register-with-taints flags (sorted labels: stable user data)."""
    flags: list[str] = []
    if labels:
        flags.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    if taints:
        rendered = [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in taints]
        flags.append("--register-with-taints=" + ",".join(rendered))
    return flags


def render_user_data(
    *,
    cluster: str,
    node_name: str,
    join_endpoint: str,
    join_token: str,
    ca_cert_hash: str,
    labels: dict[str, str],
    taints: list[Taint],
) -> str:
    """The user data for one machine; raises ValueError if it exceeds Hetzner's 32 KiB."""
    join = [
        "kubeadm",
        "join",
        join_endpoint,
        "--token",
        join_token,
        "--node-name",
        node_name,
    ]
    if ca_cert_hash:
        join += ["--discovery-token-ca-cert-hash", ca_cert_hash]
    else:
        join += ["--discovery-token-unsafe-skip-ca-verification"]
    text = _TEMPLATE.format(
        cluster=cluster,
        node_name=node_name,
        kubelet_args=" ".join(kubelet_flags(labels, taints)),
        join_cmd=shlex.join(join),
    )
    if len(text.encode()) > USER_DATA_LIMIT:
        raise ValueError(f"user data is {len(text.encode())} bytes, over Hetzner's 32 KiB limit")
    return text
