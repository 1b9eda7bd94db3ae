"""ComponentAutoscaler `components/<namespace>/<name>`: one TidbClusterAutoScaler (seed 002: its
TiKV and TiDB scaled out on CPU or storage use, heterogeneous instances scaled in on low CPU).

Each round: read the object and its base TidbCluster, parse/default/validate the spec (a bad
component gets its field error on the object's status and an Event; the other component keeps
working; the loop retries next round), then per component: list its heterogeneous clusters
(the truth: groups are adopted by label, so a create whose record was lost is never repeated),
delete groups drained to zero, gather metrics from the configured source, plan, apply the
operator's overrides, and let through only the changes whose interval has passed. Deferred
changes set a durable timer: the loop wakes when the earliest one may go.

A metrics failure, or PD answering null, plans nothing: it never scales in, never deletes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from scaling.approvals import AWAITING_APPROVAL, decision_refused
    from scaling.components import contracts
    from scaling.components.approvals import create_verdict, decided, next_deadline
    from scaling.components.decisions import (
        GroupDecision,
        GroupFigures,
        PlanDecision,
        PlanFigures,
    )
    from scaling.components.groups import Reconciled, capacity_shapes, metric_clusters, pd_strategy
    from scaling.components.overrides import PINNED
    from scaling.components.plan import Change, PlanInput
    from scaling.components.spec import COMPONENTS, ComponentSpec, SpecError, base_cluster_ref, parse_spec
    from scaling.components.state import (
        MAX_CREATED_NAMES,
        AutoscalerReport,
        BlockScaleInRequest,
        ComponentAutoscalerInput,
        ComponentAutoscalerState,
        ComponentState,
        DecisionRequest,
        GroupRecord,
        PinRequest,
        status_body,
    )
    from scaling.components.summaries import components_details, components_summary
    from scaling.components.timing import allowed_at, next_tick, record
    from scaling.kube.quantity import cpu_millis, memory_bytes
    from workflows.approvals import ApprovalUpdates
    from workflows.components import metrics
    from workflows.components.activity_options import COMPONENT_ACTIVITIES, LOCAL_READS, LOCAL_REPORTS
    from workflows.details import show
    from workflows.search import components_attributes

WORKFLOW_NAME = "ComponentAutoscaler"
# Patch id of release 0.2.0 whose marker its runs carry where they first decided (they took its
# new branch, the only one left): deprecated there, so they replay; removed in the release after.
DECISIONS_RECORDED = "components-decisions-recorded"
# workflow.patched id: an operator's change (pause, pin, approval ...) made during a round starts
# the next round as that round ends. The wake was reset after the round, so it was forgotten and
# the change waited for the next scan; runs that met such a change before it replay waiting
# (their timer is in their history: histories/components_ComponentAutoscaler_wake_forgotten.json).
# Asked only when a change came during a round. (Orchestration: added 2026-11, release 0.3.0.)
WAKE_KEPT_DURING_ROUND = "wake-kept-during-round"
# workflow.patched id: a round's reports (its Events and the status write) run as local
# activities inside the workflow task that made the change, instead of an activity and a
# workflow task each: a round that changes replicas once was four workflow tasks and is two.
# Runs from before it (0.2.0's recording among them) write their reports as activities. Asked
# at a run's first report. (Orchestration: added 2026-11, release 0.3.0.)
LOCAL_REPORTS_PATCH = "round-reports-local"
# Longest a decision may take: pure work in the worker.
DECISION_TIMEOUT = timedelta(seconds=30)
UNAVAILABLE = [
    contracts.METRICS_UNAVAILABLE,
    contracts.PD_UNAVAILABLE,
    contracts.RECOMMENDER_UNAVAILABLE,
    contracts.UNKNOWN_CLUSTER,
]
READ_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=UNAVAILABLE,
)
WRITE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
    non_retryable_error_types=[contracts.UNKNOWN_CLUSTER],
)


def workflow_id(namespace: str, name: str) -> str:
    return f"components/{namespace}/{name}"


# Outside the sandbox, as NodeRequest: the sandbox runs each activation, and each payload's
# serialization context, through exec() of source text in the workflow's namespace; with 200
# autoscalers on one worker that was 15 % of the worker's CPU (bench-components: 0.040 CPU-s a
# round sandboxed, 0.036 not). Everything it imports passes through the sandbox anyway (scaling/
# and the helpers in workflows/sandbox.py), it reads time only through workflow.now(), and the
# replay tests keep it deterministic.
@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
class ComponentAutoscalerWorkflow(ApprovalUpdates):
    @workflow.init
    def __init__(self, inp: ComponentAutoscalerInput) -> None:
        self.settings = inp.settings
        self.state = inp.state or ComponentAutoscalerState()
        self.wake = False
        self.done = False
        self._last_failure: tuple[str, str] = ("", "")
        self._attributes: tuple[str, str] = ("", "")  # last upserted (cluster, phase)
        self._marked = False  # workflow.deprecate_patch(DECISIONS_RECORDED) said in this run
        # The last decisions per component (memory only): an unchanged question is not asked again.
        self._last_groups: dict[str, GroupDecision] = {}
        self._last_plans: dict[str, PlanDecision] = {}
        # The workflow's time when the last activity answered: when a change's write landed.
        self._landed = workflow.now()
        # The round's time, as a replay reads it too: when it began (after a timer, an update or
        # the start), or when an update during the round before asked for it.
        self._round_at = self._woken_at = workflow.now()

    def _wake(self) -> None:
        """An operator's change asks for a round now (an update's time replays the same)."""
        self.wake = True
        self._woken_at = workflow.now()

    # -- queries and overrides ---------------------------------------------------------------
    @workflow.query
    def status(self) -> AutoscalerReport:
        s, st = self.settings, self.state
        return AutoscalerReport(
            namespace=s.namespace,
            name=s.name,
            base_cluster=st.base_cluster,
            planner=s.planner,
            paused=st.overrides.paused,
            overrides=st.overrides,
            components=st.components,
            errors=[*st.object_errors, *(e for cs in st.components.values() for e in cs.errors)],
            counters=st.counters,
            rounds=st.rounds,
            runs=st.runs,
            messages=st.messages,
        )

    @workflow.update
    def pause(self) -> bool:
        self.state.overrides.paused = True
        self.state.remember("paused by an operator")
        self._wake()
        return True

    @workflow.update
    def resume(self) -> bool:
        self.state.overrides.paused = False
        self.state.remember("resumed by an operator")
        self._wake()
        return True

    @workflow.update
    def pin_replicas(self, req: PinRequest) -> dict[str, int]:
        key = f"{req.component}/{req.cluster or self.state.base_cluster}"
        if req.replicas is None:
            self.state.overrides.pins.pop(key, None)
        else:
            self.state.overrides.pins[key] = req.replicas
        self.state.remember(f"pin {key} = {req.replicas}")
        self._wake()
        return dict(self.state.overrides.pins)

    @pin_replicas.validator
    def _validate_pin(self, req: PinRequest) -> None:
        if req.replicas is not None and req.replicas < 0:
            raise ValueError(f"replicas: must be >= 0, got {req.replicas}")
        if not self.state.base_cluster:
            raise ValueError("cluster: the autoscaler has not read its base TidbCluster yet; try again")
        if req.cluster and req.cluster != self.state.base_cluster:
            cs = self.state.components.get(req.component)
            if cs is None or req.cluster not in cs.groups:
                raise ValueError(f"cluster: {req.cluster!r} is not a {req.component} group of this autoscaler")

    @workflow.update
    def block_scale_in(self, req: BlockScaleInRequest) -> list[str]:
        blocked = [x for x in self.state.overrides.block_scale_in if x != req.component]
        self.state.overrides.block_scale_in = [*blocked, req.component] if req.blocked else blocked
        self.state.remember(f"scale-in {'blocked' if req.blocked else 'unblocked'} for {req.component}")
        self._wake()
        return list(self.state.overrides.block_scale_in)

    @block_scale_in.validator
    def _validate_block(self, req: BlockScaleInRequest) -> None:
        if req.component not in ("*", *COMPONENTS):
            raise ValueError(f"component: one of tikv, tidb or *, got {req.component!r}")

    # approve/deny (workflows.approvals): approve creates the heterogeneous group that awaits
    # approval; deny does not, and a plan may ask again after approval_timeout_s.
    def _waiting(self, group: str) -> ComponentState | None:
        return next((cs for cs in self.state.components.values() if group in cs.approvals), None)

    def _decision_refused(self, arg: Any) -> str:
        try:
            req = DecisionRequest.model_validate(arg)
        except ValidationError as err:
            return f"id: {err.errors()[0]['msg']}"
        cs = self._waiting(req.id)
        if cs is None:
            return f"id: no heterogeneous group {req.id!r} awaits approval"
        return decision_refused(True, cs.approvals[req.id], req.id, req.note)

    def _decided(self, approve: bool, arg: Any) -> str:
        req = DecisionRequest.model_validate(arg)
        cs = self._waiting(req.id)
        assert cs is not None
        s, now = self.settings, workflow.now()
        entry = decided(cs.approvals[req.id], approve, "operator", req.note, now, s.approval_timeout_s)
        cs.approvals[req.id] = entry
        self.state.remember(f"group {req.id}: creation {entry.decision} by an operator")
        self._wake()
        return f"{req.id}: {entry.decision}"

    # -- the loop ----------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: ComponentAutoscalerInput) -> str:
        s = self.settings
        iterations = 0
        continued = False
        while True:
            self.state.rounds += 1
            started = workflow.now()
            # Continued at once, this round begins right after a local activity of the last: its
            # time then is not the same on replay (see _written_at), the update's is.
            self._round_at = self._woken_at if continued else started
            continued = False
            self.wake = False  # this round answers the changes so far; one made during it asks for another
            await self._round()
            metrics.round_done(self._cluster(), started)
            if self.done:
                self.state.remember("the TidbClusterAutoScaler is gone; groups are left as they are")
                self._search_attributes("gone")
                return f"{s.namespace}/{s.name} deleted"
            self._search_attributes(self._phase())
            show(components_summary(s), components_details(self.status(), self._phase()))  # not in history
            iterations += 1
            if workflow.info().is_continue_as_new_suggested() or iterations >= s.iterations_per_run:
                await workflow.wait_condition(workflow.all_handlers_finished)
                self.state.runs += 1
                workflow.continue_as_new(ComponentAutoscalerInput(settings=s, state=self.state))
            if self.wake and workflow.patched(WAKE_KEPT_DURING_ROUND):
                continued = True
                continue
            self.wake = False
            try:
                await workflow.wait_condition(lambda: self.wake, timeout=self._sleep(started))
            except TimeoutError:
                pass

    def _sleep(self, started: datetime) -> timedelta:
        """Until the next scan, or sooner when a deferred change's interval ends (durable timer)."""
        now = workflow.now()
        wait = next_tick(started, now, self.settings.scan_interval_s, workflow.info().workflow_id) - now
        for cs in self.state.components.values():
            if cs.deferred_until is not None:
                wait = min(wait, max(timedelta(seconds=1), cs.deferred_until - now))
            approval_due = next_deadline(cs.approvals)  # an open approval's default applies then
            if approval_due is not None:
                wait = min(wait, max(timedelta(seconds=1), approval_due - now))
        return wait

    def _phase(self) -> str:
        if self.state.overrides.paused:
            return "paused"
        if self.state.object_errors or any(cs.errors for cs in self.state.components.values()):
            return "invalid"
        if any(next_deadline(cs.approvals) for cs in self.state.components.values()):
            return AWAITING_APPROVAL
        return "running"

    def _cluster(self) -> str:
        """`<namespace>/<TidbCluster>`: the metrics' and search attributes' cluster."""
        return f"{self.settings.namespace}/{self.state.base_cluster or self.settings.name}"

    def _search_attributes(self, phase: str) -> None:
        """Upsert only on change: every upsert is a history event, and the loop runs for months."""
        if not self.settings.use_search_attributes:
            return
        cluster = self._cluster()
        if (cluster, phase) != self._attributes:
            workflow.upsert_search_attributes(components_attributes(cluster, phase))
            self._attributes = (cluster, phase)

    async def _act(
        self, name: str, arg: Any, result_type: type | None, retry: RetryPolicy = READ_RETRY, cause: bool = True
    ) -> Any:
        """Run an activity (a read or a report as a local one); None when it failed (remembered,
        and with `cause` kept as what a failed round reports), so a round degrades, never fails."""
        limit = timedelta(seconds=self.settings.activity_timeout_s)
        local = LOCAL_READS.get(name)
        if local is None and name in LOCAL_REPORTS and workflow.patched(LOCAL_REPORTS_PATCH):
            local = LOCAL_REPORTS[name]
        try:
            if local is not None:
                return await workflow.execute_local_activity(
                    name,
                    arg,
                    result_type=result_type,
                    start_to_close_timeout=min(local, limit),
                    retry_policy=retry,
                )
            try:
                return await workflow.execute_activity(
                    name,
                    arg,
                    result_type=result_type,
                    **COMPONENT_ACTIVITIES[name].timeouts(limit),
                    retry_policy=retry,
                )
            finally:
                self._landed = workflow.now()
        except FailureError as exc:  # an ActivityError, or a local activity's own failure
            if isinstance(exc, CancelledError):
                raise
            # A local activity's failure arrives as its cause itself (ApplicationError, timeout).
            err = exc.cause if isinstance(exc, ActivityError) else exc
            kind = err.type if isinstance(err, ApplicationError) else type(err).__name__
            message = err.message if isinstance(err, ApplicationError) else str(err)
            self.state.remember(f"{name} failed: {kind}: {message}"[:300])
            if cause:
                self._last_failure = (kind or "", message)
            return None

    def _ref(self) -> dict[str, str]:
        s = self.settings
        return {"kube_cluster": s.kube_cluster, "namespace": s.namespace}

    async def _event(self, reason: str, message: str, warning: bool = False) -> None:
        s = self.settings
        await self._act(
            contracts.EMIT_AUTOSCALER_EVENT,
            contracts.AutoscalerEvent(
                **self._ref(),
                name=s.name,
                uid=self.state.uid,
                reason=reason,
                message=message[:1000],
                type="Warning" if warning else "Normal",
                key=workflow.uuid4().hex[:16],
            ),
            None,
            WRITE_RETRY,
        )

    async def _round(self) -> None:
        s, st = self.settings, self.state
        obj: contracts.AutoscalerObject | None = await self._act(
            contracts.GET_AUTOSCALER, contracts.AutoscalerRef(**self._ref(), name=s.name), contracts.AutoscalerObject
        )
        if obj is None:
            return
        if not obj.found:
            st.missing_rounds += 1
            self.done = st.missing_rounds >= s.gone_rounds
            return
        st.missing_rounds = 0
        st.uid, st.generation = obj.uid, obj.generation
        if obj.deleting:
            return
        ref = base_cluster_ref(obj.spec, s.namespace)
        if isinstance(ref, SpecError):
            await self._report_errors([ref], {})
            await self._write_status()
            return
        st.base_cluster = ref[0]
        base_read = self._act(
            contracts.GET_TIDB_CLUSTER, contracts.GetClusterInput(**self._ref(), name=ref[0]), contracts.TidbClusterView
        )
        # The groups' listings need only the object: they run beside the base cluster's read,
        # so the round's workflow task (and its slot) is held for fewer reads in a row.
        wanted = [k for k in COMPONENTS if isinstance(obj.spec.get(k), dict)]
        base, *listed = await asyncio.gather(base_read, *(self._list_groups(k) for k in wanted))
        listings = dict(zip(wanted, listed, strict=True))
        if base is None:
            return
        if not base.found:
            missing = SpecError(field="spec.cluster.name", message=f"TidbCluster {s.namespace}/{ref[0]} not found")
            await self._report_errors([missing], {})
            await self._write_status()
            return
        spec, errors = parse_spec(obj.spec, s.namespace, base.components)
        await self._report_errors(errors.get("", []), errors)
        if spec is not None and not st.overrides.paused:
            pd_answer = await self._ask_pd(spec) if s.planner == "pd" else None
            for _, cspec in sorted(spec.components.items()):
                await self._component(cspec, base, pd_answer, listings)
        await self._write_status()

    async def _report_errors(self, object_errors: list[SpecError], errors: dict[str, list[SpecError]]) -> None:
        st = self.state
        st.object_errors = object_errors
        for component in COMPONENTS:
            if component in errors:
                st.components.setdefault(component, ComponentState()).errors = errors[component]
            elif component in st.components:
                st.components[component].errors = []
        text = "; ".join(str(e) for e in [*object_errors, *(e for k in sorted(errors) if k for e in errors[k])])
        if text and text != st.reported_errors:
            st.counters.invalid_specs_reported += 1
            st.remember(f"invalid spec: {text}"[:300])
            await self._event("InvalidSpec", text, warning=True)
        st.reported_errors = text

    async def _write_status(self) -> None:
        body = status_body(self.state)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        if digest == self.state.status_digest:
            return
        s = self.settings
        res = await self._act(
            contracts.WRITE_AUTOSCALER_STATUS,
            contracts.WriteStatusInput(**self._ref(), name=s.name, status=body),
            contracts.WriteStatusResult,
            WRITE_RETRY,
        )
        if res is not None:
            self.state.status_digest = digest

    async def _ask_pd(self, spec) -> contracts.PdAnswer | None:
        strategy = pd_strategy(spec)
        if not strategy.rules:
            return None
        return await self._act(
            contracts.ASK_PD_AUTOSCALING,
            contracts.AskPdInput(namespace=self.settings.namespace, cluster=spec.cluster_name, strategy=strategy),
            contracts.PdAnswer,
        )

    # -- one component -----------------------------------------------------------------------
    async def _list_groups(self, component: str) -> contracts.AutoClusterList | None:
        return await self._act(
            contracts.LIST_AUTO_CLUSTERS,
            contracts.ListAutoClustersInput(**self._ref(), autoscaler=self.settings.name, component=component),
            contracts.AutoClusterList,
        )

    async def _component(
        self,
        spec: ComponentSpec,
        base: contracts.TidbClusterView,
        pd_answer: contracts.PdAnswer | None,
        listings: dict[str, contracts.AutoClusterList | None],
    ) -> None:
        s, st = self.settings, self.state
        component = spec.component
        cs = st.components.setdefault(component, ComponentState())
        view = base.components.get(component) or contracts.ComponentView()
        cs.homogeneous_replicas = view.replicas
        listed = listings[component] if component in listings else await self._list_groups(component)
        if listed is None:
            cs.notes = ["could not list the heterogeneous clusters: nothing decided"]
            return
        rec = await self._reconcile(component, GroupFigures(records=cs.groups, found=listed.items))
        cs.groups = rec.records
        # Per-group timestamps only for groups that still exist (the component-wide last change
        # stays in timing.last_change_at), so state does not grow with groups ever made.
        keep = {base.name, *cs.groups, *(g.name for g in rec.drained)}
        cs.timing = cs.timing.model_copy(update={"groups": {k: v for k, v in cs.timing.groups.items() if k in keep}})
        for name in rec.adopted:
            st.remember(f"{component}: adopted group {name}")
        for gone in rec.drained:
            done = await self._act(
                contracts.DELETE_AUTO_CLUSTER,
                contracts.DeleteAutoClusterInput(**self._ref(), name=gone.name, uid=gone.uid),
                contracts.DeleteAutoClusterResult,
                WRITE_RETRY,
            )
            if done is None:
                cs.groups[gone.name] = gone  # try again next round
                continue
            st.counters.groups_deleted += 1
            st.remember(f"{component}: group {gone.name} drained and deleted")
            await self._event("GroupDeleted", f"{component} group {gone.name} ({gone.group}) drained and deleted")

        shape = contracts.Shape(
            cpu_milli=cpu_millis(view.cpu) if view.cpu else 0,
            memory_bytes=memory_bytes(view.memory) if view.memory else 0,
        )
        inp = PlanInput(
            namespace=s.namespace,
            autoscaler=s.name,
            base_cluster=base.name,
            spec=spec,
            homogeneous_replicas=view.replicas,
            homogeneous_shape=shape,
            base_cpu=view.cpu,
            base_memory=view.memory,
            base_storage=view.storage,
            groups=rec.groups,
        )
        figures = await self._plan_figures(spec, inp, pd_answer, cs)
        if figures is None:
            return
        decision = await self._decide_plan(component, figures)
        plan = decision.plan
        cs.notes = plan.notes[-5:]
        if plan.headroom != cs.headroom and plan.headroom:
            need = ", ".join(f"{h.count} x {h.resource_type or 'homogeneous'}" for h in plan.headroom)
            await self._event("NeedNodes", f"{component}: the nodes cannot hold {need}", warning=True)
        cs.headroom = plan.headroom
        now = self._round_at  # after local activities: the workflow's own time may not replay
        cs.deferred, cs.deferred_until = decision.deferred, decision.retry_at
        changes = decision.allowed
        if self.settings.approve_group_create:
            changes = await self._through_approval(component, cs, changes, base.name, now)
        applied = []
        for change in changes:
            if not await self._apply(component, change, cs, base.name, now):
                break
            applied.append(change)
            due = allowed_at(cs.timing, spec, change.direction)  # the timing before this round's changes
            early = change.reason != PINNED and due is not None and now < due
            metrics.changed(self._cluster(), component, change, base.name, early)
        if applied:
            cs.timing = record(cs.timing, applied, self._written_at())
        replicas = cs.homogeneous_replicas + sum(g.replicas for g in cs.groups.values())
        metrics.sized(self._cluster(), component, len(cs.groups), replicas)

    async def _through_approval(
        self, component: str, cs: ComponentState, changes: list[Change], base: str, now: datetime
    ) -> list[Change]:
        """The changes that go ahead this round: a new group only once approved (the others at once)."""
        s = self.settings
        creates = {ch.cluster for ch in changes if ch.cluster != base and ch.cluster not in cs.groups}
        # A wait the plan no longer wants goes; a denial stays until the plan may ask again.
        cs.approvals = {
            k: a for k, a in cs.approvals.items() if k in creates or (a.decision == "denied" and now < a.deadline)
        }
        out = []
        for ch in changes:
            if ch.cluster not in creates:
                out.append(ch)
                continue
            reason = (
                f"create {component} group {ch.cluster} ({ch.group or ch.resource_type}), {ch.to_replicas} replicas"
            )
            before = cs.approvals.get(ch.cluster)
            verdict, entry, new = create_verdict(before, reason, now, s.approval_timeout_s, s.approval_default)
            if before is not None and not before.decision and entry.decision:
                self.state.remember(f"group {ch.cluster}: creation {entry.decision} by timeout")
            cs.approvals[ch.cluster] = entry
            if new:
                self.state.remember(f"{component}: group {ch.cluster} awaits approval")
                await self._event(
                    "GroupCreateAwaitingApproval",
                    f"{reason}: awaits approval until {entry.deadline.isoformat()} (then {entry.default}); "
                    f"growth components approve|deny {ch.cluster}",
                )
            if verdict == "go":
                out.append(ch)
        return out

    def _mark_decisions(self) -> None:
        """Where a 0.2.0 run asked patch components-decisions-recorded (once per run)."""
        if not self._marked:
            self._marked = True
            workflow.deprecate_patch(DECISIONS_RECORDED)

    async def _reconcile(self, component: str, figures: GroupFigures) -> Reconciled:
        """The groups' bookkeeping: a recorded decision unless the question is the last one's."""
        self._mark_decisions()
        last = self._last_groups.get(component)
        if last is None or last.figures != figures:
            last = await workflow.execute_local_activity(
                contracts.DECIDE_GROUPS, figures, result_type=GroupDecision, start_to_close_timeout=DECISION_TIMEOUT
            )
            self._last_groups[component] = last
        return last.reconciled

    async def _decide_plan(self, component: str, figures: PlanFigures) -> PlanDecision:
        """The plan as a recorded decision. When it reads what the last one read (its clock
        aside) and that one changed nothing and deferred nothing, it stands: not asked again."""
        last = self._last_plans.get(component)
        same = last is not None and figures.model_copy(update={"now": last.figures.now}) == last.figures
        if last is None or not same or last.allowed or last.deferred:
            last = await workflow.execute_local_activity(
                contracts.DECIDE_PLAN, figures, result_type=PlanDecision, start_to_close_timeout=DECISION_TIMEOUT
            )
            self._last_plans[component] = last
        return last

    async def _plan_figures(
        self, spec: ComponentSpec, inp: PlanInput, pd_answer: contracts.PdAnswer | None, cs: ComponentState
    ) -> PlanFigures | None:
        """What the component's plan reads, its source's answer included; None when the source
        gave none (nothing is decided this round)."""
        s = self.settings
        self._last_failure = ("", "")
        figures = PlanFigures(
            source="growth",
            plan=inp,
            overrides=self.state.overrides,
            groups=cs.groups,
            timing=cs.timing,
            now=self._round_at,
        )
        if spec.external is not None:
            answer: contracts.ExternalAnswer | None = await self._act(
                contracts.ASK_EXTERNAL_ENDPOINT,
                contracts.AskExternalInput(
                    kube_cluster=s.kube_cluster,
                    namespace=s.namespace,
                    cluster=inp.base_cluster,
                    component=spec.component,
                    endpoint=spec.external.endpoint,
                ),
                contracts.ExternalAnswer,
            )
            if not await self._metrics_outcome(cs, answer is not None, spec.component, "external"):
                return None
            assert answer is not None
            return figures.model_copy(update={"source": "external", "recommended": answer.recommended_replicas})
        if s.planner == "pd":
            if pd_answer is None or not pd_answer.answered:
                cs.notes = ["PD gave no plan (null or unreachable): nothing decided"]
                if pd_answer is None:
                    await self._metrics_outcome(cs, False, spec.component, "pd")
                return None
            await self._metrics_outcome(cs, True, spec.component, "pd")
            return figures.model_copy(update={"source": "pd", "pd_plans": pd_answer.plans})
        cpu = spec.rules.get("cpu")
        # Both at once; a failed capacity read is not what the round reports as its failure.
        found, capacity = await asyncio.gather(
            self._act(
                contracts.QUERY_METRICS,
                contracts.MetricsInput(
                    **self._ref(),
                    base_cluster=inp.base_cluster,
                    component=spec.component,
                    clusters=metric_clusters(inp.base_cluster, cs.groups),
                    hot_threshold=cpu.max_threshold if cpu else None,
                    storage="storage" in spec.rules,
                ),
                contracts.ComponentMetrics,
            ),
            self._act(
                contracts.OBSERVE_CAPACITY,
                contracts.CapacityInput(
                    kube_cluster=s.kube_cluster, shapes=capacity_shapes(spec, inp.homogeneous_shape)
                ),
                contracts.CapacityAnswer,
                cause=False,
            ),
        )
        if not await self._metrics_outcome(cs, found is not None, spec.component, "prometheus"):
            return None
        update: dict[str, Any] = {"metrics": found}
        if capacity is not None:
            update.update(fits=capacity.fits, growth_manages_nodes=capacity.growth_manages_nodes)
        return figures.model_copy(update={"plan": inp.model_copy(update=update)})

    async def _metrics_outcome(self, cs: ComponentState, answered: bool, component: str, source: str) -> bool:
        """A failed source plans nothing; the first failure after a success raises an Event, and
        every failed round is counted in the metric."""
        metrics.metrics_failed(self._cluster(), component, source, failed=not answered)
        if answered:
            cs.metrics_error = ""
            return True
        kind, message = self._last_failure
        text = f"{kind}: {message}"[:300] if kind else "metrics source unavailable"
        if not cs.metrics_error:
            self.state.counters.metrics_failures += 1
            await self._event("MetricsUnavailable", f"{text}; no scaling this round", warning=True)
        cs.metrics_error = text
        return False

    def _written_at(self) -> datetime:
        """When a change is done (issue 20): when its last write's answer reached the workflow.

        Not the workflow's time after the change's Events: they are local activities (patch
        round-reports-local), and after a local activity that time is not always the same on
        replay. When a workflow task ends between the activity's end and the workflow seeing it,
        the first run reads the next task's start, a replay the activity's recorded end. This
        time is kept in the group records and the timing, which come back through the recorded
        decisions: a replay then saw another status and wrote it, a non-determinism error (1 in
        60 recordings on the time-skipping server). An activity's answer starts a workflow task,
        whose time replays the same. (Before that patch the Events were activities: this is the
        time after them, as it was.)"""
        return self._landed

    async def _apply(self, component: str, ch: Change, cs: ComponentState, base: str, now: datetime) -> bool:
        """One change; False when it could not be made (the rest of the round's changes wait)."""
        s, st = self.settings, self.state
        if ch.cluster == base:
            res = await self._act(
                contracts.PATCH_REPLICAS,
                contracts.PatchReplicasInput(**self._ref(), cluster=base, component=component, replicas=ch.to_replicas),
                contracts.PatchReplicasResult,
                WRITE_RETRY,
            )
            if res is None or not res.found:
                return False
            cs.homogeneous_replicas = ch.to_replicas
            if ch.direction == "out":
                if ch.reason.startswith("storage"):
                    st.counters.storage_scale_outs += 1
                else:
                    st.counters.homogeneous_scale_outs += 1
            else:
                st.counters.scale_ins += 1
            await self._event(
                "ScaledOut" if ch.direction == "out" else "ScaledIn",
                f"{component} {base}: replicas {ch.from_replicas} -> {ch.to_replicas} ({ch.reason})",
            )
            return True
        rec = cs.groups.get(ch.cluster)
        if rec is None:
            created: contracts.CreateAutoClusterResult | None = await self._act(
                contracts.CREATE_AUTO_CLUSTER,
                contracts.CreateAutoClusterInput(
                    **self._ref(),
                    base_cluster=base,
                    name=ch.cluster,
                    autoscaler=s.name,
                    component=component,
                    group=ch.group,
                    replicas=ch.to_replicas,
                    cpu=ch.cpu,
                    memory=ch.memory,
                    storage=ch.storage,
                    labels=ch.labels,
                ),
                contracts.CreateAutoClusterResult,
                WRITE_RETRY,
            )
            if created is None:
                return False
            rec = GroupRecord(
                name=ch.cluster,
                uid=created.uid,
                group=ch.group,
                resource_type=ch.resource_type,
                replicas=created.replicas,
            )
            cs.groups[ch.cluster] = rec
            cs.approvals.pop(ch.cluster, None)  # created: its approval is used up
            # Counted when first recorded: a create whose answer was lost is found (created=False)
            # on the retry, and is still this autoscaler's new group.
            names = [*st.counters.heterogeneous_created, ch.cluster]
            st.counters.heterogeneous_created = names[-MAX_CREATED_NAMES:]
            how = "created" if created.created else "found existing (an earlier attempt made it)"
            await self._event("GroupCreated", f"{component} group {ch.cluster} ({ch.group}) {how}, {ch.to_replicas}")
        if rec.replicas != ch.to_replicas:
            res = await self._act(
                contracts.PATCH_REPLICAS,
                contracts.PatchReplicasInput(
                    **self._ref(), cluster=ch.cluster, component=component, replicas=ch.to_replicas
                ),
                contracts.PatchReplicasResult,
                WRITE_RETRY,
            )
            if res is None or not res.found:
                return False
        draining, written = ch.to_replicas == 0, self._written_at()
        cs.groups[ch.cluster] = rec.model_copy(
            update={
                "replicas": ch.to_replicas,
                "last_change_at": written,
                "phase": "draining" if draining else "active",
                "draining_since": (rec.draining_since or written) if draining else None,
            }
        )
        if ch.direction == "out":
            st.counters.heterogeneous_scale_outs += 1
        else:
            st.counters.scale_ins += 1
        await self._event(
            "ScaledOut" if ch.direction == "out" else "ScaledIn",
            f"{component} group {ch.cluster}: replicas {ch.from_replicas} -> {ch.to_replicas} ({ch.reason})",
        )
        return True
