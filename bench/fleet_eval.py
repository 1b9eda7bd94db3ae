"""Benchmark of the fleet loop's region evaluation (scale-up and scale-down rules per type).

python -m bench.fleet_eval   (last line is JSON for 1,000 clusters per type x 3 types)
"""

from __future__ import annotations

import json
import random
import statistics
import time

from scaling.fleet.capacity import TypeRules
from scaling.fleet.evaluation import evaluate_region
from scaling.fleet.models import ClusterPhase, ClusterRecord

TYPES = ("standard", "developer", "enterprise")
AIM_MS = 100.0


def fleet(clusters_per_type: int, seed: int = 7) -> list[ClusterRecord]:
    """A busy region: mostly ready clusters, a third of them empty (every one a scale-down
    candidate, the dry run's worst case), some not yet reported, a few in other phases."""
    rnd = random.Random(seed)
    phases = (
        [ClusterPhase.READY] * 90
        + [ClusterPhase.DEPROVISIONING] * 4
        + [ClusterPhase.FAILED] * 3
        + [ClusterPhase.CLEANUP] * 3
    )
    out: list[ClusterRecord] = []
    for itype in TYPES:
        for i in range(clusters_per_type):
            max_units = rnd.choice([None, 10, 20, 40]) if rnd.random() < 0.1 else rnd.choice([10, 20, 40])
            consumed = 0 if rnd.random() < 0.33 else rnd.randint(1, max_units or 10)
            out.append(
                ClusterRecord(
                    id=f"{itype}-{i}",
                    instance_type=itype,
                    phase=rnd.choice(phases),
                    max_units=max_units,
                    consumed_units=consumed,
                    instances=(consumed + 1) // 2,
                )
            )
    return out


RULES = {t: TypeRules(instance_type=t, limit=None, slack=50, biggest_units=10, expected_units=20) for t in TYPES}


def run(clusters_per_type: int, repeats: int = 30) -> dict[str, float | int]:
    clusters = fleet(clusters_per_type)
    evaluate_region(clusters, RULES)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ev = evaluate_region(clusters, RULES)
        times.append((time.perf_counter() - t0) * 1000)
    candidates = sum(1 for c in clusters if c.phase == ClusterPhase.READY and c.instances == 0)
    return {
        "clusters": len(clusters),
        "instance_types": len(TYPES),
        "empty_ready_candidates": candidates,
        "scale_up_types": len(ev.scale_up_types()),
        "removals": len(ev.removals()),
        "p50_ms": round(statistics.median(times), 3),
        "max_ms": round(max(times), 3),
        "aim_ms": AIM_MS,
        "ratio_to_aim": round(statistics.median(times) / AIM_MS, 4),
    }


def main() -> None:
    for per_type in (334, 1_000):  # ~1,000 clusters in all, then 1,000 per type
        print(json.dumps(run(per_type)))


if __name__ == "__main__":
    main()
