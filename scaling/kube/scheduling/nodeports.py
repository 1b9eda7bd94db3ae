"""NodePorts: a host port is free unless a pod on the node binds the same protocol and port on
the same IP, or either side binds 0.0.0.0 (every IP)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scaling.kube.models import NodeInfo
from scaling.kube.scheduling.refusal import Refusal
from scaling.kube.scheduling.terms import HostPort

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"


def conflicts(a: HostPort, b: HostPort) -> bool:
    return a.port == b.port and a.protocol == b.protocol and (a.ip == b.ip or ANY_IP in (a.ip, b.ip))


def any_conflict(wanted: Sequence[HostPort], used: Iterable[HostPort]) -> bool:
    used = list(used)
    return any(conflicts(w, u) for w in wanted for u in used)


def filter(wanted: Sequence[HostPort], node: NodeInfo) -> Refusal | None:
    if wanted and any_conflict(wanted, node.host_ports):
        return Refusal(NAME, REASON)
    return None
