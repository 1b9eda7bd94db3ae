"""A bursty day replayed twice through the real planners, with and without billing-aware
scale-down: servers paid per started hour (Hetzner), several bursts an hour.

Each 30 s step: pending pods bind first-fit to Ready nodes with room (a stand-in scheduler),
plan_scale_up buys nodes for the rest (Ready 60 s later), plan_scale_down picks nodes to
remove (deleted at their scale_down_at; pods still on them go back to pending). A node costs
its type's hourly price per started hour of its life. The two runs differ only in the pool's
`billing` (period 1h vs 0). Prints cost, node-hours and servers created for each; the last
line is JSON. Usage: python -m bench.billing_day [--hours 24] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from scaling.kube.models import NodeInfo, PodInfo, Resources
from scaling.nodes.catalogue import catalogue_index
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, InFlightRequest, NodeGroup
from scaling.nodes.nodegroups import parse_node_group
from scaling.nodes.providers.kwok import kwok_catalogue
from scaling.nodes.scale_down.candidates import plan_scale_down
from scaling.nodes.scale_down.models import ScaleDownLoopSettings
from scaling.nodes.scale_up.planning import plan_scale_up

PROVIDER = "hetzner"
TYPE = "cx32"
STEP_S = 30.0
BOOT_S = 60.0
GI = 1024**3
START = 1_800_000_000.0  # an arbitrary epoch second: the day's midnight
CATALOGUE = catalogue_index(kwok_catalogue(PROVIDER))  # Hetzner's shapes and list prices


def node_group(billing_period: str | int) -> NodeGroup:
    pool = {"provider": PROVIDER, "serverType": [TYPE], "priority": 10, "billing": {"period": billing_period}}
    return parse_node_group({"metadata": {"name": "burst"}, "spec": {"pools": [pool]}}, {PROVIDER})


@dataclass
class Arrival:
    at: float
    lifetime_s: float
    cpu_m: int


def bursty_day(hours: int, seed: int) -> list[Arrival]:
    """3-5 bursts an hour at random minutes, 10-40 pods each, living 4-15 minutes."""
    rng = random.Random(seed)
    out: list[Arrival] = []
    for h in range(hours):
        for _ in range(rng.randint(3, 5)):
            at = START + h * 3600 + rng.uniform(0, 3600)
            out.extend(
                Arrival(at=at, lifetime_s=rng.uniform(240, 900), cpu_m=rng.choice((250, 500, 1000)))
                for _ in range(rng.randint(10, 40))
            )
    return sorted(out, key=lambda a: a.at)


@dataclass
class _Node:
    name: str
    created: float
    ready_at: float
    removing_at: float | None = None
    deleted: float | None = None


@dataclass
class _Pod:
    name: str
    cpu_m: int
    ends: float
    node: str | None = None


@dataclass
class RunResult:
    cost: float
    node_hours: float
    servers_created: int
    pod_wait_s_p50: float
    pod_wait_s_p95: float
    waits: list[float] = field(default_factory=list, repr=False)


def simulate(arrivals: list[Arrival], group: NodeGroup, hours: int) -> RunResult:
    price = CATALOGUE[(PROVIDER, TYPE)].price_hourly
    alloc = CATALOGUE[(PROVIDER, TYPE)].allocatable
    nodes: dict[str, _Node] = {}
    pods: dict[str, _Pod] = {}
    pending_since: dict[str, float] = {}
    waits: list[float] = []
    unneeded: dict[str, float] = {}
    last_up: float | None = None
    serial = 0
    nxt = 0
    end = START + hours * 3600
    now = START
    while now < end:
        # arrivals and completions
        while nxt < len(arrivals) and arrivals[nxt].at <= now:
            a = arrivals[nxt]
            name = f"p{nxt}"
            pods[name] = _Pod(name=name, cpu_m=a.cpu_m, ends=a.at + a.lifetime_s)
            pending_since[name] = now
            nxt += 1
        for name in [n for n, p in pods.items() if p.node is not None and p.ends <= now]:
            del pods[name]
        # removals that are due: pods still there go back to pending (evicted, recreated)
        for n in nodes.values():
            if n.deleted is None and n.removing_at is not None and n.removing_at <= now:
                n.deleted = now
                for p in pods.values():
                    if p.node == n.name:
                        p.node = None
                        pending_since[p.name] = now
        live = [n for n in nodes.values() if n.deleted is None]
        used = {n.name: 0 for n in live}
        for p in pods.values():
            if p.node is not None:
                used[p.node] += p.cpu_m
        # the scheduler: first fit on Ready nodes not being removed
        for p in sorted((p for p in pods.values() if p.node is None), key=lambda p: p.name):
            for n in sorted(live, key=lambda n: n.name):
                if n.ready_at <= now and n.removing_at is None and used[n.name] + p.cpu_m <= alloc.cpu_m:
                    p.node = n.name
                    used[n.name] += p.cpu_m
                    waits.append(now - pending_since.pop(p.name))
                    break
        infos = [
            NodeInfo(
                name=n.name,
                labels={LABEL_GROUP: group.name, LABEL_POOL: f"{PROVIDER}-{TYPE}"},
                allocatable=alloc,
                requested=Resources(cpu_m=used[n.name], memory=0, pods=0),
                ready=n.ready_at <= now,
                unschedulable=n.removing_at is not None,
                created_at=datetime.fromtimestamp(n.created, UTC),
            )
            for n in live
        ]
        pod_infos = [
            PodInfo(
                namespace="day",
                name=p.name,
                uid=p.name,
                node_name=p.node,
                phase="Running" if p.node else "Pending",
                requests=Resources(cpu_m=p.cpu_m, memory=GI // 4, pods=1),
                controller_kind="ReplicaSet",
            )
            for p in pods.values()
        ]
        booting = [
            InFlightRequest(
                id=n.name,
                group=group.name,
                pool=f"{PROVIDER}-{TYPE}",
                server_type=TYPE,
                provider=PROVIDER,
                requirements=Resources(),
            )
            for n in live
            if n.ready_at > now
        ]
        ready_infos = [i for i in infos if i.ready]
        plan = plan_scale_up([p for p in pod_infos if p.node_name is None], ready_infos, [group], CATALOGUE, booting)
        for _ in plan.new_nodes:
            serial += 1
            name = f"n{serial}"
            nodes[name] = _Node(name=name, created=now, ready_at=now + BOOT_S)
            last_up = now
        down = plan_scale_down(
            ready_infos,
            [p for p in pod_infos if p.node_name],
            [],
            [group],
            None,
            now,
            unneeded,
            last_up,
            set(),
            {n.name for n in live if n.removing_at is not None},
            ScaleDownLoopSettings(),
        )
        unneeded = dict(down.unneeded_since)
        for r in down.to_remove:
            nodes[r.name].removing_at = max(r.scale_down_at, now)
        now += STEP_S
    cost = 0.0
    node_s = 0.0
    for n in nodes.values():
        life = (n.deleted or end) - n.created
        node_s += life
        cost += math.ceil(life / 3600) * price
    waits.sort()

    def pct(q: float) -> float:
        return waits[int(q * (len(waits) - 1))] if waits else 0.0

    return RunResult(
        cost=cost,
        node_hours=node_s / 3600,
        servers_created=len(nodes),
        pod_wait_s_p50=pct(0.5),
        pod_wait_s_p95=pct(0.95),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    arrivals = bursty_day(args.hours, args.seed)
    t0 = time.monotonic()
    aware = simulate(arrivals, node_group("1h"), args.hours)
    plain = simulate(arrivals, node_group(0), args.hours)
    took = time.monotonic() - t0
    print(
        f"bursty day: {args.hours} h, {len(arrivals)} pods, {TYPE} at {CATALOGUE[(PROVIDER, TYPE)].price_hourly} EUR/h"
    )
    for label, r in (("billing-aware", aware), ("without", plain)):
        print(
            f"  {label:14} cost {r.cost:7.3f} EUR  node-hours {r.node_hours:7.1f}  "
            f"servers created {r.servers_created:4d}  pod wait p50 {r.pod_wait_s_p50:3.0f} s, p95 {r.pod_wait_s_p95:3.0f} s"
        )
    saving = (plain.cost - aware.cost) / plain.cost if plain.cost else 0.0
    print(f"  saving {saving:.1%}  (simulated in {took:.1f} s)")
    print(
        json.dumps(
            {
                "hours": args.hours,
                "pods": len(arrivals),
                "cost_billing_aware": round(aware.cost, 4),
                "cost_without": round(plain.cost, 4),
                "node_hours_billing_aware": round(aware.node_hours, 2),
                "node_hours_without": round(plain.node_hours, 2),
                "servers_created_billing_aware": aware.servers_created,
                "servers_created_without": plain.servers_created,
                "pod_wait_p50_s_billing_aware": aware.pod_wait_s_p50,
                "pod_wait_p50_s_without": plain.pod_wait_s_p50,
                "pod_wait_p95_s_billing_aware": aware.pod_wait_s_p95,
                "pod_wait_p95_s_without": plain.pod_wait_s_p95,
                "saving": round(saving, 4),
            }
        )
    )


if __name__ == "__main__":
    main()
