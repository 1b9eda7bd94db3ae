"""The fleet demo scenario's driver on the dev server, with the stub OCM: a refusal reaches the
user, the demo region's size, and when the region counts as settled. The burst itself is run
twice elsewhere: with exact counts by the loop's own test (test_autoscaler.py, the burst test)
and through the real worker by the demo (tests/e2e/test_fleet_e2e.py)."""

from __future__ import annotations

import uuid

import pytest
from temporalio.testing import WorkflowEnvironment

from scaling.fleet import contracts
from scaling.fleet.config import load_fleet_config_text
from scaling.fleet.evaluation import TypeEvaluation
from scaling.fleet.models import ClusterPhase, ClusterRecord
from scaling.fleet.region import FleetAutoscalerInput, FleetAutoscalerSettings, RegionStatus
from scaling.fleet.scale_down import RemovalDecision, RemovalReason
from scaling.fleet.scale_up import ScaleUpDecision, ScaleUpReason
from starters.scenarios.fleet import SteadyState, demo_fleet_config, demo_region_limit, run_fleet_burst
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_autoscaler import _terminate_all
from tests.workflows.workers import new_worker
from workflows.fleet.autoscaler import FleetAutoscalerWorkflow


async def test_burst_over_the_region_limit_says_why(dev_env: WorkflowEnvironment) -> None:
    """The refusal's reason reaches the user (it used to end in a bare "Workflow update failed")."""
    client = dev_env.client
    region = f"scenario-{uuid.uuid4().hex[:6]}"
    tq = f"fleet-scn-{uuid.uuid4().hex[:6]}"
    settings = FleetAutoscalerSettings(provider="aws", region=region, scan_interval_s=1.0)
    config = load_fleet_config_text(demo_fleet_config(region=region, limit=3))
    async with new_worker(client, tq, activities=FleetWorld().activities()):
        handle = await client.start_workflow(
            FleetAutoscalerWorkflow.run,
            FleetAutoscalerInput(settings=settings, config=config),
            id=contracts.autoscaler_workflow_id("aws", region),
            task_queue=tq,
        )

        async def live() -> int:
            return 0

        try:
            with pytest.raises(RuntimeError, match="burst-3 refused: instance_type: the region's standard limit of 3"):
                await run_fleet_burst(client, "aws", region, instances=5, ocm_live_clusters=live, say=lambda _: None)
        finally:
            await _terminate_all(client, handle)


def test_demo_region_is_sized_from_the_burst() -> None:
    assert demo_region_limit(30) == 100  # the demo's default stays
    assert demo_region_limit(1000) == 2000  # room for 1,000 of the biggest (2-unit) size
    cfg = load_fleet_config_text(demo_fleet_config(limit=demo_region_limit(1000)))
    region = cfg.region("aws", "us-east-1")
    assert region is not None and region.supported_instance_type["standard"].limit == 2000


def _status(evaluations: int, *phases: ClusterPhase, remove: str = "", deleted: int = 0) -> RegionStatus:
    clusters = [ClusterRecord(id=f"c{i}", instance_type="standard", phase=p) for i, p in enumerate(phases)]
    removal = RemovalDecision(cluster_id=remove, removable=True, reason=RemovalReason.REMOVABLE) if remove else None
    up = ScaleUpDecision(needed=False, reason=ScaleUpReason.ENOUGH_CAPACITY)
    return RegionStatus(
        provider="aws", region="r", paused=False, clusters=clusters, instances_placed=0, instances_waiting=0,
        awaiting_approval=[], last_evaluation=[TypeEvaluation(instance_type="standard", scale_up=up, remove=removal)],
        events=[], rounds=evaluations, evaluations=evaluations, clusters_created=len(phases) + deleted,
        clusters_deleted=deleted, clusters_failed=0, flaps=0, runs=0,
    )  # fmt: skip


def test_steady_state_needs_fresh_unchanged_evaluations() -> None:
    """The scenario's end: evaluations made before the burst was deleted never count (the demo
    once ended on such a stale one, before any removal), and every change starts over."""
    ready = ClusterPhase.READY
    steady = SteadyState(after_evaluation=10, evaluations=3)
    assert not any(steady.check(_status(n, ready, ready)) for n in range(5, 11))  # stale: quiet-looking
    assert not steady.check(_status(11, ready, ready, remove="c1"))
    assert not steady.check(_status(12, ready, ClusterPhase.DEPROVISIONING))
    assert not steady.check(_status(14, ready, deleted=1))  # the stretch starts here
    assert not steady.check(_status(15, ready, deleted=1))
    assert not steady.check(_status(16, ready, ready, deleted=1))  # a cluster came back: start over
    assert not steady.check(_status(18, ready, deleted=1))
    assert steady.check(_status(21, ready, deleted=1))
