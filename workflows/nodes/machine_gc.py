"""MachineGC `nodes/<cluster>/gc`: deletes machines the providers hold for the cluster that no
Node and no in-flight NodeRequest accounts for, once they are older than a grace period, and
reports pools whose server type a provider can no longer supply.

Every interval: list machines (every configured provider), Nodes' providerIDs, and the
autoscaler's in-flight requests → scaling.leaks.find_leaked_machines → `delete_node` per leak,
each reported (worker log, this workflow's status query, a Kubernetes Event on its group).
If the autoscaler cannot say which requests are in flight, nothing is deleted that round:
deleting is irreversible, waiting is cheap. Continue-as-new keeps the history bounded.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from scaling.nodes import contracts
    from scaling.nodes.contracts import CollectedMachine, DeleteNodeInput, ProviderMachine, UnusablePool
    from scaling.nodes.gc.leaks import find_leaked_machines
    from scaling.nodes.models import LABEL_GROUP, LABEL_REQUEST
    from scaling.nodes.summaries import machine_gc_details, machine_gc_summary
    from workflows.details import show
    from workflows.nodes.activity_options import NODE_ACTIVITIES

FACTS_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5
)
DELETE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=1), maximum_attempts=10
)
REPORT_RETRY = RetryPolicy(maximum_attempts=3)
COLLECTED_KEPT = 100
# workflow.patched id: a collector cancelled while an activity runs ends as cancelled. It caught
# the activity's cancellation as a provider failure and carried on collecting (deleting
# machines) every round. Runs cancelled before it replay carrying on. (Orchestration: added
# 2026-11, release 0.3.0.)
CANCEL_ENDS_MACHINE_GC = "cancel-ends-machine-gc"
# workflow.patched id: a collect_now that comes during a round starts the next round as that
# round ends. The wake was reset after the round, so it was forgotten and the next round waited
# a whole interval; runs that met such a wake before it replay waiting (their timer is in their
# history: histories/node_machine_gc_wake_forgotten.json). Asked only when a wake came during
# a round. (Orchestration: added 2026-11, release 0.3.0.)
WAKE_KEPT_DURING_ROUND = "wake-kept-during-round"


def machine_gc_id(cluster: str) -> str:
    return f"nodes/{cluster}/gc"


class MachineGCSettings(BaseModel):
    cluster: str
    interval_s: float = 60.0
    # Longer than a NodeRequest's readiness wait: a machine still booting for a request the
    # autoscaler has already forgotten is removed by that request, not by the collector.
    grace_s: float = 900.0
    autoscaler_workflow_id: str = ""  # default nodes/<cluster>
    report_unusable_pools: bool = True
    rounds_per_run: int = 200


class MachineGCState(BaseModel):
    rounds: int = 0
    skipped_rounds: int = 0  # rounds without a verdict (autoscaler silent, provider failing)
    runs: int = 1
    collected: list[CollectedMachine] = Field(default_factory=list)
    collected_total: int = 0
    delete_failures: int = 0
    machines_seen: int = 0
    unusable_pools: list[UnusablePool] = Field(default_factory=list)
    last_error: str = ""


class MachineGCInput(BaseModel):
    settings: MachineGCSettings
    state: MachineGCState | None = None


class MachineGCStatus(BaseModel):
    cluster: str
    state: MachineGCState


@workflow.defn(name="MachineGC")
class MachineGCWorkflow:
    @workflow.init
    def __init__(self, inp: MachineGCInput) -> None:
        self.settings = inp.settings
        self.state = inp.state or MachineGCState()
        self.wake = False
        self.stopped = ""  # why its loop asked it to end ("" = keep collecting)

    @workflow.query
    def status(self) -> MachineGCStatus:
        return MachineGCStatus(cluster=self.settings.cluster, state=self.state)

    @workflow.signal
    def collect_now(self) -> None:
        self.wake = True

    @workflow.signal
    def stop(self, reason: str) -> None:
        """Its loop ended for good (failed): collect no more. (A signal, not a cancel: the
        reason stays in its status, and runs started before a cancel ended it still serve.)"""
        self.stopped = reason or "stopped"
        self.wake = True

    @workflow.run
    async def run(self, inp: MachineGCInput) -> None:
        rounds_this_run = 0
        while True:
            if self.stopped:  # (histories before the stop signal never get here)
                self.state.last_error = f"ended: {self.stopped}"
                return
            self.wake = False  # this round answers the wakes so far; one that comes during it asks for another
            await self._round()
            rounds_this_run += 1
            st = self.state
            show(
                machine_gc_summary(self.settings.cluster, self.settings.interval_s),
                machine_gc_details(st.rounds, st.machines_seen, st.collected_total, st.last_error),
            )
            if workflow.info().is_continue_as_new_suggested() or rounds_this_run >= self.settings.rounds_per_run:
                await workflow.wait_condition(workflow.all_handlers_finished)
                self.state.runs += 1
                workflow.continue_as_new(MachineGCInput(settings=self.settings, state=self.state))
            if self.wake and workflow.patched(WAKE_KEPT_DURING_ROUND):
                continue
            self.wake = False
            try:
                await workflow.wait_condition(
                    lambda: self.wake or bool(self.stopped), timeout=timedelta(seconds=self.settings.interval_s)
                )
            except TimeoutError:
                pass

    async def _round(self) -> None:
        s = self.settings
        assert s is not None
        self.state.rounds += 1
        if s.report_unusable_pools:
            try:
                self.state.unusable_pools = await workflow.execute_activity(
                    contracts.REPORT_UNUSABLE_POOLS,
                    s.cluster,
                    result_type=list[UnusablePool],
                    **NODE_ACTIVITIES[contracts.REPORT_UNUSABLE_POOLS].timeouts(),
                    retry_policy=REPORT_RETRY,
                )
            except ActivityError as err:
                _end_if_cancelled(err)
                self.state.last_error = f"report_unusable_pools: {_cause(err)}"
        try:
            machines: list[ProviderMachine] = await workflow.execute_activity(
                contracts.LIST_PROVIDER_MACHINES,
                s.cluster,
                result_type=list[ProviderMachine],
                **NODE_ACTIVITIES[contracts.LIST_PROVIDER_MACHINES].timeouts(),
                retry_policy=FACTS_RETRY,
            )
            node_ids: list[str] = await workflow.execute_activity(
                contracts.LIST_NODE_PROVIDER_IDS,
                s.cluster,
                result_type=list[str],
                **NODE_ACTIVITIES[contracts.LIST_NODE_PROVIDER_IDS].timeouts(),
                retry_policy=FACTS_RETRY,
            )
            live: list[str] | None = await workflow.execute_activity(
                contracts.LIVE_NODE_REQUEST_IDS,
                s.autoscaler_workflow_id or f"nodes/{s.cluster}",
                result_type=list[str] | None,
                **NODE_ACTIVITIES[contracts.LIVE_NODE_REQUEST_IDS].timeouts(),
                retry_policy=FACTS_RETRY,
            )
        except ActivityError as err:
            _end_if_cancelled(err)
            self.state.skipped_rounds += 1
            self.state.last_error = _cause(err)
            return
        self.state.machines_seen = len(machines)
        if live is None:
            self.state.skipped_rounds += 1
            self.state.last_error = "autoscaler did not report its in-flight requests; nothing judged leaked"
            return
        now = workflow.now().timestamp()
        leaked = find_leaked_machines(machines, set(live), set(node_ids), now, s.grace_s)
        for m in leaked:
            await self._collect(m, now)

    async def _collect(self, m: ProviderMachine, now: float) -> None:
        s = self.settings
        assert s is not None
        try:
            await workflow.execute_activity(
                contracts.DELETE_NODE,
                DeleteNodeInput(cluster=s.cluster, provider=m.provider, node_name=m.name, provider_id=m.provider_id),
                **NODE_ACTIVITIES[contracts.DELETE_NODE].timeouts(),
                retry_policy=DELETE_RETRY,
            )
        except ActivityError as err:
            _end_if_cancelled(err)
            self.state.delete_failures += 1
            self.state.last_error = f"delete {m.provider_id}: {_cause(err)}"
            return  # found again next round
        age = now - (m.created_at or now)
        record = CollectedMachine(
            cluster=s.cluster,
            provider=m.provider,
            provider_id=m.provider_id,
            name=m.name,
            group=m.labels.get(LABEL_GROUP, ""),
            request=m.labels.get(LABEL_REQUEST, ""),
            age_s=round(age, 1),
            deleted_at=workflow.now(),
            reason=f"no Node and no in-flight NodeRequest after {age:.0f}s (grace {s.grace_s:.0f}s)",
        )
        workflow.logger.warning("deleted leaked machine %s (%s): %s", m.name, m.provider_id, record.reason)
        self.state.collected.append(record)
        del self.state.collected[:-COLLECTED_KEPT]
        self.state.collected_total += 1
        try:
            await workflow.execute_activity(
                contracts.REPORT_COLLECTED_MACHINE,
                record,
                **NODE_ACTIVITIES[contracts.REPORT_COLLECTED_MACHINE].timeouts(),
                retry_policy=REPORT_RETRY,
            )
        except ActivityError as err:
            _end_if_cancelled(err)
            self.state.last_error = f"event for {m.name}: {_cause(err)}"


def _end_if_cancelled(err: ActivityError) -> None:
    """The workflow was cancelled while this activity ran: end (as cancelled), collect no more."""
    if is_cancelled_exception(err) and workflow.patched(CANCEL_ENDS_MACHINE_GC):
        raise err


def _cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err)
