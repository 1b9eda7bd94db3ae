"""NodePorts: a container's hostPort may not be taken on the node for its protocol and IP.

As nodeports/node_ports.go and HostPortInfo.CheckConflict read them: only the containers'
ports with a hostPort above 0; protocol defaults to TCP, an empty hostIP is 0.0.0.0, and
0.0.0.0 conflicts with every IP on the same port and protocol.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
Port = tuple[str, str, int]  # (hostIP, protocol, hostPort)
REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"


def host_ports(pod: Obj) -> list[Port]:
    ports = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if int(p.get("hostPort") or 0) > 0:
                ports.append((p.get("hostIP") or ANY_IP, p.get("protocol") or "TCP", int(p["hostPort"])))
    return ports


def conflicts(wanted: list[Port], used: list[Port]) -> bool:
    return any(
        port == uport and protocol == uprotocol and (ip == uip or ANY_IP in (ip, uip))
        for ip, protocol, port in wanted
        for uip, uprotocol, uport in used
    )
