"""NodeAutoscaler `nodes/<cluster>`: the loop of seed 004 (steps 1-4).

Every scan interval: observe (unschedulable pods, nodes, node groups) → decide (scaling/'s planner
in a local activity, whose result, input included, the history records) → start a
NodeRequestBatch per run of identical planned nodes (through activities). Requests report back
with a signal; the state needed to resume (in-flight requests, never-satisfiable pods,
backoffs) is carried through continue-as-new, so the history of one run stays bounded.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.nodes import contracts, explain
    from scaling.nodes.catalogue import KeptCatalogue, catalogue_still_fresh
    from scaling.nodes.contracts import ClusterObservation, GroupStatusInput, ObserveInput, PodEvent, PodEventsInput
    from scaling.nodes.explain import (
        ExplainNodeInput,
        ExplainPodInput,
        NodeExplanation,
        PodExplanation,
        last_demand_of,
        problems_by_shape,
    )
    from scaling.nodes.headroom import is_headroom
    from scaling.nodes.loop import (
        apply_attempt_backoff,
        fresh_problems,
        may_scale_down,
        newly_reported_attempt,
        prune_never_satisfiable,
        unavailable_pools,
    )
    from scaling.nodes.models import (
        AttemptResult,
        InFlightRequest,
        NodeGroup,
        PlannedNode,
        PodProblem,
        RequestPhase,
        ServerType,
    )
    from scaling.nodes.observation import event_batches, never_satisfiable_events
    from scaling.nodes.scale_down.removals import ScaleDownStatus
    from scaling.nodes.scale_up.approvals import ApprovalGate, scale_up_event
    from scaling.nodes.scale_up.batches import batch_indexes, start_chunks
    from scaling.nodes.scale_up.capacity import remember_insufficient_capacity
    from scaling.nodes.scale_up.decision import (
        ScaleUpDecision,
        ScaleUpInput,
        empty_decision,
        in_flight_runs,
        nothing_to_decide,
    )
    from scaling.nodes.scale_up.requests import (
        START_BATCH,
        CancelMembers,
        NodeRequestBatchInput,
        NodeRequestStatus,
        StartRequestsInput,
        batch_input,
        in_flight_record,
        member_id,
        split_request_id,
    )
    from scaling.nodes.state import (
        REPORTED_PODS_KEPT,
        AutoscalerInput,
        LoopSummary,
        NodeAutoscalerState,
        counted_once,
        groups_fingerprint,
        in_flight_for_planner,
        record_request_update,
        record_scale_down_update,
        still_landing,
        successors_in_flight,
        with_held_landing,
        with_landing_requests,
    )
    from scaling.nodes.status import AutoscalerStatus, status_of
    from scaling.nodes.summaries import autoscaler_details, autoscaler_summary, machine_gc_summary
    from scaling.text import too_long
    from workflows.children import start_abandoned
    from workflows.details import show
    from workflows.nodes import metrics, scale_down_step
    from workflows.nodes.activity_options import NODE_ACTIVITIES
    from workflows.nodes.machine_gc import MachineGCInput, MachineGCSettings, MachineGCWorkflow, machine_gc_id
    from workflows.nodes.request import NodeRequestWorkflow
    from workflows.nodes.request_batch import NodeRequestBatchWorkflow

OBSERVE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
EVENTS_RETRY = RetryPolicy(maximum_attempts=3)
# Starting requests: retried for minutes (the server may be briefly away); a batch that never
# starts leaves the in-flight state, so the next loop plans its pods again.
START_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=10
)
ORPHAN_CHECK_EVERY = 10  # loops
# Deprecated patch (docs/development.md, "How a patch retires"): release 0.2.0 asked
# workflow.patched for it where the loop decides (runs started by 0.1.0 planned in the workflow),
# so its runs carry the marker; every run since records each scale-up decision as the local
# activity PLAN_SCALE_UP. Remove the deprecate_patch call in the release after 0.3.0.
DECISIONS_RECORDED = "decisions-recorded"
# A planner that raises is a bug: the loop retries it (as an observation) until a fixed worker
# runs, rather than failing the loop.
PLAN_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
PLAN_TIMEOUT = timedelta(seconds=60)  # 30,000 pending pods plan in a few seconds on a loaded core
# workflow.patched id: a loop whose iteration fails for good (its cluster is not served, say)
# stops the MachineGC it started, which would otherwise run on alone, failing every round.
# Failed runs recorded before it replay without the signal. (Orchestration: added 2026-11.)
FAILED_LOOP_ENDS_GC = "failed-loop-ends-machine-gc"
# workflow.patched id (as MachineGC's and ComponentAutoscaler's): a wake that comes during an
# iteration (scan_now, resume, unprotect, unban, a request's or scale-down's final report) starts
# the next iteration as this one ends. It was reset after the iteration, so it was forgotten and
# the loop waited a scan interval; runs that met such a wake before it replay waiting (their
# timer is in their history: histories/node_autoscaler_wake_forgotten.json). Asked only when a
# wake came during an iteration. (Orchestration: added 2026-11, release 0.3.0.)
WAKE_KEPT_DURING_ROUND = "wake-kept-during-round"
# workflow.patched id: every ORPHAN_CHECK_EVERY loops, the removals the loop holds nodes for are looked
# up, and the nodes of those whose workflow closed without a final report (terminated, failed) are
# let go (scale_down_step.release_ended_removals); before, they were held, and counted against their
# group's budget, for good. Asked only when a removal is held then. (Orchestration: added 2026-11-30.)
REMOVALS_RECONCILED = "removals-reconciled"


def autoscaler_id(cluster: str) -> str:
    return f"nodes/{cluster}"


@workflow.defn(name="NodeAutoscaler")
class NodeAutoscalerWorkflow:
    @workflow.init
    def __init__(self, inp: AutoscalerInput) -> None:
        # State from the input here, not in run(): a signal or update delivered in the first
        # activation (e.g. a request_changed right after continue-as-new) mutates the real state.
        self.inp = inp
        self.state = inp.state or NodeAutoscalerState()
        self.wake = False
        # Set by the worker when pods became unschedulable after this loop's last observation
        # (activities/nodes/wake.py); unlike `wake`, one that comes mid-loop is kept, so the
        # next observation follows at once instead of a scan interval later.
        self.pods_pending = False
        # Updates that await (protect_node, remove_node) and the loop's scale-down step both
        # read and change scale_downs/protected_nodes: one at a time.
        self.scale_down_lock = asyncio.Lock()
        self.background: set[asyncio.Task[None]] = set()  # pod events and child starts in progress
        self.ready_since_observed: set[str] = set()  # requests Ready since this loop's observation began
        self.catalogue = KeptCatalogue()  # the last one fetched in this run

    # -- queries, signals, updates (operator overrides) ------------------------------------
    @workflow.query
    def status(self) -> AutoscalerStatus:
        return status_of(self.inp.settings, self.state)

    @workflow.query
    def explain_pod(self, inp: ExplainPodInput) -> PodExplanation:
        """Which NodeRequest a pending pod waits for, or why none (`growth nodes explain pod`)."""
        return explain.explain_pod(self.inp.settings, self.state, inp)

    @workflow.query
    def explain_node(self, inp: ExplainNodeInput) -> NodeExplanation:
        """Why a node is kept, or when its removal comes (`growth nodes explain node`)."""
        return explain.explain_node(self.inp.settings, self.state, inp)

    @workflow.signal
    def pause(self) -> None:
        self.state.paused = True

    @workflow.signal
    def resume(self) -> None:
        self.state.paused = False
        self.wake = True

    @workflow.signal
    def scan_now(self) -> None:
        self.wake = True

    @workflow.signal(name=contracts.PODS_PENDING)
    def on_pods_pending(self) -> None:
        self.pods_pending = True

    @workflow.signal
    def request_changed(self, update: NodeRequestStatus) -> None:
        self._fold_request_update(update)

    @workflow.signal(name=contracts.REQUESTS_CHANGED)
    def requests_changed(self, updates: list[NodeRequestStatus]) -> None:
        """A NodeRequestBatch's members' reports, in the order they changed."""
        for update in updates:
            self._fold_request_update(update)

    def _fold_request_update(self, update: NodeRequestStatus) -> None:
        attempt = newly_reported_attempt(self.state.in_flight.get(update.id), update)
        record_request_update(self.state, update)
        if update.phase == RequestPhase.READY:
            self.ready_since_observed.add(update.id)
        if update.final:
            self.wake = True  # capacity changed: plan again without waiting a whole interval
        now = workflow.now().timestamp()
        if attempt is not None:
            apply_attempt_backoff(self.state.backoff_failures, self.state.backoff_until, update.group, attempt, now)
            if attempt.result == AttemptResult.INSUFFICIENT_CAPACITY:
                self.state.capacity_unavailable_until = remember_insufficient_capacity(
                    self.state.capacity_unavailable_until,
                    update.provider,
                    update.server_type,
                    now,
                    self.inp.settings.capacity_memory_s,
                )
            if attempt.result == AttemptResult.READY:
                self.state.last_scale_up_at = now

    @workflow.signal
    def scale_down_changed(self, update: ScaleDownStatus) -> None:
        record_scale_down_update(self.state, update, workflow.now().timestamp())
        if update.final:
            self.wake = True

    # -- scale-down overrides ----------------------------------------------------------------
    @workflow.update
    async def protect_node(self, node: str) -> list[str]:
        """Never scale this node down (cancels a removal still waiting on its timer)."""
        async with self.scale_down_lock:
            return await scale_down_step.protect(self.state, node)

    @protect_node.validator
    def _validate_protect(self, node: str) -> None:
        _validate_node(node)

    @workflow.update
    def unprotect_node(self, node: str) -> list[str]:
        self.wake = True
        return scale_down_step.unprotect(self.state, node)

    @unprotect_node.validator
    def _validate_unprotect(self, node: str) -> None:
        _validate_node(node)
        if node not in self.state.protected_nodes:
            raise ValueError(f"node: {node!r} is not protected")

    @workflow.update
    async def remove_node(self, node: str) -> str:
        """Remove a growth node now; refused with the reason when that would lose data."""
        async with self.scale_down_lock:
            return await scale_down_step.remove_now(self.inp.settings, self.state, node)

    @remove_node.validator
    def _validate_remove(self, node: str) -> None:
        _validate_node(node)
        sd = self.state.scale_downs.get(node)
        if sd is not None and sd.phase.value not in ("Marked",):
            raise ValueError(f"node: {node!r} is already being removed ({sd.phase.value})")

    @workflow.update
    async def cancel_request(self, request_id: str) -> str:
        """Cancel a NodeRequest, a batch member (`<batch id>#<index>`) or a whole batch."""
        workflow_id, index = split_request_id(request_id)
        handle = workflow.get_external_workflow_handle(workflow_id)
        if index is None and request_id in self.state.in_flight:  # a NodeRequest of its own
            await handle.signal(NodeRequestWorkflow.cancel, "cancelled by operator")
        else:
            await handle.signal(NodeRequestBatchWorkflow.cancel, CancelMembers(index=index))
        return f"cancel sent to {request_id}"

    @cancel_request.validator
    def _validate_cancel(self, request_id: str) -> None:
        if too_long("request_id", request_id):
            raise ValueError(too_long("request_id", request_id))
        if request_id in self.state.in_flight:
            return
        if not any(split_request_id(r)[0] == request_id for r in self.state.in_flight):
            raise ValueError(
                f"request_id: {request_id!r} is not an in-flight NodeRequest, batch or batch member of this cluster"
            )

    @workflow.update
    def ban_pool(self, group_pool: str) -> list[str]:
        """Stop planning onto a pool ("group/pool") until unbanned."""
        if group_pool not in self.state.banned_pools:
            self.state.banned_pools.append(group_pool)
        return self.state.banned_pools

    @ban_pool.validator
    def _validate_ban(self, group_pool: str) -> None:
        _validate_group_pool(group_pool)

    @workflow.update
    def unban_pool(self, group_pool: str) -> list[str]:
        if group_pool in self.state.banned_pools:
            self.state.banned_pools.remove(group_pool)
        self.wake = True
        return self.state.banned_pools

    @unban_pool.validator
    def _validate_unban(self, group_pool: str) -> None:
        _validate_group_pool(group_pool)

    # -- the loop ---------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: AutoscalerInput) -> None:
        settings = inp.settings
        # A run after continue-as-new shows the carried state at once, not blank until its first loop ends.
        show(autoscaler_summary(settings), autoscaler_details(self.state))
        if settings.machine_gc:
            await self._start_machine_gc()
        iterations_this_run = 0
        while True:
            self.pods_pending = False  # this iteration's observation sees them
            self.wake = False  # this iteration answers the wakes so far; one that comes during it asks for another
            if not self.state.paused:
                try:
                    await self._iterate()
                except ActivityError as err:
                    if settings.machine_gc and workflow.patched(FAILED_LOOP_ENDS_GC):
                        await self._end_machine_gc(f"its loop failed: {err.cause or err}")
                    raise
                iterations_this_run += 1
            show(autoscaler_summary(settings), autoscaler_details(self.state))  # no command: not in history
            if workflow.info().is_continue_as_new_suggested() or iterations_this_run >= settings.iterations_per_run:
                await workflow.wait_condition(workflow.all_handlers_finished)
                await asyncio.gather(*self.background)
                self.state.runs += 1
                workflow.continue_as_new(AutoscalerInput(settings=settings, state=self.state))
            if self.pods_pending:
                continue
            if self.wake and workflow.patched(WAKE_KEPT_DURING_ROUND):
                continue
            self.wake = False
            try:
                await workflow.wait_condition(
                    lambda: self.wake or self.pods_pending, timeout=timedelta(seconds=settings.scan_interval_s)
                )
            except TimeoutError:
                pass

    async def _iterate(self) -> None:
        settings = self.inp.settings
        self.state.iterations += 1
        started = workflow.now()
        in_flight_before = in_flight_for_planner(self.state.in_flight)
        self.ready_since_observed.clear()
        # The landing requests too: the observation says whether it shows their nodes Ready.
        watched = [*self.state.in_flight.values(), *self.state.landing.values()]
        # The replacements' successors too: one whose node is Ready has its room counted there.
        successors = successors_in_flight(self.state, workflow.now().timestamp())
        obs: ClusterObservation = await workflow.execute_activity(
            contracts.OBSERVE_CLUSTER,
            ObserveInput(
                cluster=settings.cluster,
                requests={r.id: r.node_name for r in watched} | {r.id: "" for r in successors},
                fresh=self.state.resource_versions,
            ),
            result_type=ClusterObservation,
            **NODE_ACTIVITIES[contracts.OBSERVE_CLUSTER].timeouts(),
            retry_policy=OBSERVE_RETRY,
        )
        self.state.resource_versions = obs.resource_versions or self.state.resource_versions
        await self._report_invalid_groups(obs)
        demand = obs.demand
        fingerprint = groups_fingerprint(obs.groups)
        self.state.never_satisfiable = prune_never_satisfiable(
            self.state.never_satisfiable,
            pending={s.key for s in demand.shapes},
            groups_changed=fingerprint != self.state.groups_fingerprint,
        )
        self.state.groups_fingerprint = fingerprint
        shapes = [s for s in demand.shapes if s.key not in self.state.never_satisfiable]

        catalogue: list[ServerType] = []  # also the prices approval gates compare
        providers = sorted({pool.provider for g in obs.groups for pool in g.pools})
        if shapes and providers:
            if catalogue_still_fresh(self.catalogue, providers, workflow.now().timestamp()):
                catalogue = self.catalogue.types
            else:
                catalogue = await workflow.execute_activity(
                    contracts.GET_CATALOGUE,
                    providers,
                    result_type=list[ServerType],
                    **NODE_ACTIVITIES[contracts.GET_CATALOGUE].timeouts(),
                    retry_policy=OBSERVE_RETRY,
                )
                self.catalogue = KeptCatalogue(catalogue, workflow.now().timestamp(), providers)
        in_flight = with_landing_requests(
            in_flight_for_planner(self.state.in_flight), in_flight_before, self.ready_since_observed
        )
        # Whether to plan at all (orchestration: a recorded decision or none) is asked as before
        # the landing requests were counted, so the runs recorded before replay the same; they
        # only ever take nodes out of a plan.
        deciding = counted_once(in_flight, obs.requests_with_ready_node)
        self.state.landing = still_landing(self.state.landing, obs.requests_with_ready_node, workflow.now().timestamp())
        # Their nodes are in the observation, with their room.
        in_flight = counted_once(with_held_landing(in_flight, self.state.landing), obs.requests_with_ready_node)
        # The successors' spare room takes pending pods (not in `deciding`: whether to plan at all is
        # orchestration, and a successor alone gives the planner nothing to do).
        in_flight += counted_once(successors, obs.requests_with_ready_node)
        demand = demand.model_copy(update={"shapes": shapes})
        # The loop's time until its next activity answers: read before the decision, a local
        # activity, after which a replay may see another time than the first run did (when a
        # workflow task ended between the activity's end and the workflow seeing it). Batches'
        # start times, the last scale-up and the scale-down step's clock are kept or compared.
        clock = workflow.now()
        decision = await self._decide(
            ScaleUpInput(
                demand=demand,
                groups=obs.groups,
                catalogue=catalogue,
                in_flight=in_flight_runs(in_flight),
                unavailable=sorted(
                    unavailable_pools(
                        self.state.banned_pools,
                        self.state.backoff_until,
                        clock.timestamp(),
                        self.state.capacity_unavailable_until,
                    )
                ),
                max_nodes_total=settings.max_nodes_total,
                max_price_per_hour_total=settings.max_price_per_hour_total,
                enforce_min_nodes=settings.enforce_min_nodes,
                # A landing request is in flight for the limit too: with it, the two tables the
                # state carries stay within max_requests_in_flight rows together.
                requests_in_flight=len(self.state.in_flight) + len(self.state.landing),
                max_requests_in_flight=settings.max_requests_in_flight,
            ),
            deciding,
        )
        plan = decision.plan
        new_nodes, gates = decision.planned()
        self.state.never_satisfiable.update(decision.never_satisfiable)

        groups = {g.name: g for g in obs.groups}
        named = {p.uid: p for s in shapes for p in s.pods}
        events: list[PodEvent] = self._new_problem_events(plan.problems)
        # Ids and state first (in plan order, so replays decide the same), then the batches
        # start in the background.
        announced = self._start_batches(new_nodes, groups, gates, clock) if new_nodes else []
        for request_id, planned, gate in announced:
            reason, message = scale_up_event(request_id, planned, gate)
            events.extend(
                PodEvent(namespace=p.namespace, pod_name=p.name, pod_uid=p.uid, reason=reason, message=message)
                for p in (named[u] for u in planned.pod_uids if u in named and not is_headroom(u))
            )
        if new_nodes:
            self.state.last_scale_up_at = clock.timestamp()
        if may_scale_down(
            plan.model_copy(update={"new_nodes": new_nodes}),
            settings.scale_down_enabled,
            demand.nodes,
            removals_running=bool(self.state.scale_downs),
        ):
            # (An update holding the lock waits on activities: after one, the workflow's time is.)
            now = None if self.scale_down_lock.locked() else clock.timestamp()
            async with self.scale_down_lock:
                await scale_down_step.step(settings, self.state, obs.scale_down_view, now)
            if self.state.iterations % ORPHAN_CHECK_EVERY == 1:
                await scale_down_step.check_orphans(settings, self.state, providers)
                if self.state.scale_downs and workflow.patched(REMOVALS_RECONCILED):
                    async with self.scale_down_lock:
                        await scale_down_step.release_ended_removals(settings, self.state)
        self.state.last_loop = LoopSummary(
            at=workflow.now(),
            unschedulable=demand.unschedulable,
            fits_existing=plan.pods_fit_existing,
            covered_in_flight=plan.pods_covered,
            planned_nodes=len(new_nodes),
            problems=sum(p.count for p in plan.problems),
            nodes=demand.nodes.total,
            pods_total=obs.pods_total,
            pods_running=obs.pods_running,
            headroom_problems=decision.headroom_problems,
        )
        self.state.last_demand = last_demand_of((s.key, s.count) for s in obs.demand.shapes if not is_headroom(s.key))
        self.state.last_problems = problems_by_shape(plan.problems)
        metrics.loop_done(settings.cluster, started)
        for batch in event_batches(events):
            # Events are a report, not a step: the next loop does not wait for them.
            self.background.add(asyncio.create_task(self._emit_pod_events(batch)))

    async def _decide(self, inp: ScaleUpInput, in_flight: list[InFlightRequest]) -> ScaleUpDecision:
        """The scale-up decision: none when there is nothing to decide (an idle loop records
        nothing), else the planner's, recorded as a local activity."""
        settings = self.inp.settings
        if nothing_to_decide(inp.demand, inp.groups, in_flight, settings.enforce_min_nodes):
            return empty_decision(inp.demand)
        workflow.deprecate_patch(DECISIONS_RECORDED)
        return await workflow.execute_local_activity(
            contracts.PLAN_SCALE_UP,
            inp,
            result_type=ScaleUpDecision,
            start_to_close_timeout=PLAN_TIMEOUT,
            retry_policy=PLAN_RETRY,
        )

    async def _emit_pod_events(self, events: list[PodEvent]) -> None:
        try:
            await workflow.execute_activity(
                contracts.EMIT_POD_EVENTS,
                PodEventsInput(cluster=self.inp.settings.cluster, events=events),
                **NODE_ACTIVITIES[contracts.EMIT_POD_EVENTS].timeouts(),
                retry_policy=EVENTS_RETRY,
            )
        except ActivityError as err:
            workflow.logger.warning("pod events not emitted: %s", err)
        finally:
            self.background.discard(asyncio.current_task())  # type: ignore[arg-type]

    def _start_batches(
        self,
        planned: list[PlannedNode],
        groups: dict[str, NodeGroup],
        gates: list[ApprovalGate | None],
        now: datetime,
    ) -> list[tuple[str, PlannedNode, ApprovalGate | None]]:
        """Identical planned nodes share a NodeRequestBatch (a 30,000-pod burst as ~970
        NodeRequests waited 18-20 s (p99) for their first tasks); every member is in flight (as
        `<batch id>#<index>`) before the batches start, in the background, through activities of
        about START_BATCH members each."""
        batches: list[NodeRequestBatchInput] = []
        announced: list[tuple[str, PlannedNode, ApprovalGate | None]] = []
        for indexes in batch_indexes(planned, gates):
            members = [planned[i] for i in indexes]
            gate = gates[indexes[0]]
            batch = self._record_batch(members, groups[members[0].group], gate, now)
            batches.append(batch)
            announced.extend((member_id(batch.id, k), p, gate) for k, p in enumerate(members))
        for chunk in start_chunks([len(b.members) for b in batches], START_BATCH):
            self.background.add(asyncio.create_task(self._start_requests([batches[i] for i in chunk])))
        return announced

    def _next_request_id(self) -> str:
        self.state.seq += 1
        # Deterministic (replay-safe) yet unique across restarts of the autoscaler.
        return f"{autoscaler_id(self.inp.settings.cluster)}/request/{self.state.seq:06d}-{str(workflow.uuid4())[:4]}"

    def _record_batch(
        self, planned: list[PlannedNode], group: NodeGroup, approval: ApprovalGate | None, now: datetime
    ) -> NodeRequestBatchInput:
        """A batch's id and input, each member recorded as in flight (since `now`) before it starts."""
        batch_id = self._next_request_id()
        for i, node in enumerate(planned):
            request_id = member_id(batch_id, i)
            self.state.in_flight[request_id] = in_flight_record(request_id, node, now)
        return batch_input(batch_id, planned, group, self.inp.settings, workflow.info().workflow_id, approval)

    async def _start_requests(self, batches: list[NodeRequestBatchInput]) -> None:
        settings = self.inp.settings
        try:
            await workflow.execute_activity(
                contracts.START_NODE_REQUESTS,
                StartRequestsInput(
                    cluster=settings.cluster,
                    requests=[],
                    use_search_attributes=settings.use_search_attributes,
                    batches=batches,
                ),
                result_type=int,
                **NODE_ACTIVITIES[contracts.START_NODE_REQUESTS].timeouts(),
                retry_policy=START_RETRY,
            )
        except ActivityError as err:
            ids = [member_id(b.id, i) for b in batches for i in range(len(b.members))]
            for request_id in ids:
                self.state.in_flight.pop(request_id, None)
            workflow.logger.warning("%d NodeRequests did not start (%s); their pods are planned again", len(ids), err)
        finally:
            self.background.discard(asyncio.current_task())  # type: ignore[arg-type]

    def _new_problem_events(self, problems: list[PodProblem]) -> list[PodEvent]:
        fresh, self.state.reported_pods = fresh_problems(problems, self.state.reported_pods, REPORTED_PODS_KEPT)
        return never_satisfiable_events(fresh)

    async def _start_machine_gc(self) -> None:
        """MachineGC beside the loop, so every `growth nodes start` gets it. Started once
        per run; after a continue-as-new it is usually still running, which is fine."""
        settings = self.inp.settings
        gc = MachineGCSettings(
            cluster=settings.cluster,
            interval_s=settings.machine_gc_interval_s,
            grace_s=settings.machine_gc_grace_s,
            autoscaler_workflow_id=workflow.info().workflow_id,
        )
        # It outlives a continue-as-new or a restart of the loop, like the requests; the collector
        # from an earlier run may still be at work.
        await start_abandoned(
            MachineGCWorkflow.run,
            MachineGCInput(settings=gc),
            id=machine_gc_id(settings.cluster),
            static_summary=machine_gc_summary(settings.cluster, gc.interval_s),
        )

    async def _end_machine_gc(self, reason: str) -> None:
        gc = workflow.get_external_workflow_handle(machine_gc_id(self.inp.settings.cluster))
        try:
            await gc.signal(MachineGCWorkflow.stop, reason[:500])
        except FailureError:
            pass  # it was never started, or has ended: nothing runs on alone

    async def _report_invalid_groups(self, obs: ClusterObservation) -> None:
        if obs.invalid_groups == self.state.invalid_groups:
            return
        self.state.invalid_groups = obs.invalid_groups
        await workflow.execute_activity(
            contracts.REPORT_NODE_GROUP_STATUS,
            GroupStatusInput(cluster=self.inp.settings.cluster, problems=obs.invalid_groups),
            **NODE_ACTIVITIES[contracts.REPORT_NODE_GROUP_STATUS].timeouts(),
            retry_policy=EVENTS_RETRY,
        )


def _validate_node(node: str) -> None:
    if len(node) > 253:  # a DNS subdomain, as every Node's name
        raise ValueError(too_long("node", node, 253))
    if not node or "/" in node:
        raise ValueError(f"node: expected a node name, got {node!r}")


def _validate_group_pool(group_pool: str) -> None:
    if too_long("group_pool", group_pool, 512):
        raise ValueError(too_long("group_pool", group_pool, 512))
    group, _, pool = group_pool.partition("/")
    if not group or not pool:
        raise ValueError(f"group_pool: expected '<group>/<pool>', got {group_pool!r}")
