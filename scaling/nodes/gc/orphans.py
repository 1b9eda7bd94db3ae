"""Orphans: Nodes whose machine is gone and machines without a Node, reported after a grace period."""

from __future__ import annotations

from pydantic import BaseModel, Field

from scaling.nodes.contracts import OrphanObservation

# What one search returns at most, the longest seen first: every node and machine stays in the
# worker, and only orphans cross the loop's history (a leak of thousands keeps this many timers).
MAX_ORPHANS = 200


class Orphan(BaseModel):
    kind: str  # "NodeWithoutMachine" | "MachineWithoutNode"
    name: str
    provider: str = ""
    provider_id: str = ""
    since: float = 0.0
    reported: bool = False  # seen for longer than the grace period


class OrphanSearchInput(BaseModel):
    """find_orphans' input: the loop's orphans so far (their timers) and what it knows, never
    the cluster's nodes or the providers' machines."""

    cluster: str
    providers: list[str]
    now: float  # workflow time
    grace_s: float
    previous: list[Orphan] = Field(default_factory=list)
    removing: list[str] = Field(default_factory=list)  # nodes being removed lose their machine first
    fresh: dict[str, str] = Field(default_factory=dict)  # as ObserveInput.fresh


# A Node's spec.providerID scheme names its provider, but not always by growth's provider name.
PROVIDER_ID_SCHEMES = {"hcloud": "hetzner", "kwok": "kwok"}


def provider_of(provider_id: str) -> str:
    scheme = provider_id.split("://", 1)[0] if "://" in provider_id else ""
    return PROVIDER_ID_SCHEMES.get(scheme, scheme)


def orphans_from(obs: OrphanObservation, previous: list[Orphan], now: float, grace_s: float) -> list[Orphan]:
    """Nodes pointing at a machine the provider no longer has, machines without a Node.

    Each is reported once it has been seen for longer than the grace period (a machine boots
    before its Node registers; a Node lingers a moment after its machine is deleted)."""
    seen = {(o.kind, o.name): o.since for o in previous}
    by_provider_id = {m["provider_id"]: m for m in obs.machines if m.get("provider_id")}
    node_ids = set(obs.nodes.values())
    out: list[Orphan] = []
    for node, pid in sorted(obs.nodes.items()):
        provider = provider_of(pid)
        if provider in obs.checked and pid not in by_provider_id:
            out.append(
                Orphan(
                    kind="NodeWithoutMachine",
                    name=node,
                    provider=provider,
                    provider_id=pid,
                    since=seen.get(("NodeWithoutMachine", node), now),
                )
            )
    for m in obs.machines:
        if m.get("provider_id") not in node_ids:
            out.append(
                Orphan(
                    kind="MachineWithoutNode",
                    name=m.get("name", ""),
                    provider=m.get("provider", ""),
                    provider_id=m.get("provider_id", ""),
                    since=seen.get(("MachineWithoutNode", m.get("name", "")), now),
                )
            )
    return out


def mark_reported(orphans: list[Orphan], now: float, grace_s: float) -> list[Orphan]:
    return [o.model_copy(update={"reported": now - o.since >= grace_s}) for o in orphans]


def find_orphans(obs: OrphanObservation, inp: OrphanSearchInput) -> list[Orphan]:
    """One look at every node and machine, folded into the loop's orphans: nodes being removed
    left out, each reported once seen for the grace period, at most MAX_ORPHANS."""
    removing = set(inp.removing)
    mine = obs.model_copy(update={"nodes": {k: v for k, v in obs.nodes.items() if k not in removing}})
    found = mark_reported(orphans_from(mine, inp.previous, inp.now, inp.grace_s), inp.now, inp.grace_s)
    return sorted(found, key=lambda o: (o.since, o.kind, o.name))[:MAX_ORPHANS]
