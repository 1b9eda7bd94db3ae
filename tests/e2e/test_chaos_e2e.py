"""`make chaos` in small (bench/chaos.py): the node burst on the real stack (dev server on a
database file, simulated cluster, two workers) with one kill of each process kind, and a
Hetzner burst whose create answers are lost; the invariants checked after each. Timing is the
bench's business; this checks correctness only."""

from __future__ import annotations

from pathlib import Path

from bench.chaos_harness import FAULTS, check, node_burst, restart_api_server, restart_temporal, sim_keeps_state
from bench.chaos_hetzner import check_servers, lose_creates

# The worker dies while a node is awaited; the server and the API server go down right after,
# whatever is in progress then (each waiting for a moment of its own could outlast the burst).
SLICE = {
    "kill-worker-during-readiness": FAULTS["kill-worker-during-readiness"],
    "restart-temporal": restart_temporal(during=None),
    "restart-api-server": restart_api_server(during=None),
}


async def test_one_kill_of_each_process_loses_and_doubles_nothing(tmp_path: Path) -> None:
    outcome, stack, temporal = await node_burst(tmp_path, list(SLICE.items()), pods=8, timeout=300)
    try:
        # 8 pods of 500m on cx22 (3 per node): 3 nodes, as the fault-free run makes them.
        await check(stack, temporal, outcome, expected_nodes=3)
    finally:
        stack.stop()
    injected = {f.name: f for f in outcome.faults if not f.skipped}
    assert outcome.violations == [], outcome.line()
    expected = set(SLICE) if sim_keeps_state() else set(SLICE) - {"restart-api-server"}
    assert set(injected) == expected, outcome.line()
    assert all(f.recovery_s is not None for f in injected.values())


async def test_hetzner_create_answers_lost_find_their_servers(tmp_path: Path) -> None:
    # The first two creates are made at the fake Hetzner API and their connections closed
    # unanswered: the retries find the servers by their request labels, none is made twice.
    lost = ("hetzner-lost-create-dropped", lose_creates(2, "drop"))
    outcome, stack, temporal = await node_burst(tmp_path, [lost], pods=4, timeout=300, hetzner=True)
    try:
        await check(stack, temporal, outcome, expected_nodes=None)
        created = await check_servers(stack, outcome, expected_servers=None)
    finally:
        stack.stop()
    assert outcome.violations == [], outcome.line()
    assert created >= 2 and [f.name for f in outcome.faults if not f.skipped] == [lost[0]], outcome.line()
