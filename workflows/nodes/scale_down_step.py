"""The NodeAutoscaler's scale-down half, called once per loop (workflow code, no I/O).

evaluate_scale_down (the activity lists the cluster and runs plan_from_input from scaling/ beside
it, with this workflow's timers: the decision, input and result, is recorded in the history as
that activity's) → start NodeScaleDown children for the nodes to remove; cancel
waiting children of empty nodes that pods landed on. Only the bounded evaluation crosses the
history, never the cluster's nodes and pods. The state it needs across loops (unneeded_since,
candidates, running children) lives in NodeAutoscalerState, so it is carried through
continue-as-new with the rest.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from scaling.nodes import contracts
    from scaling.nodes.contracts import (
        DisruptedTaintInput,
        NodeEventsInput,
        NodeRemovalCheck,
        NodeRemovalCheckInput,
        RemovalTarget,
        ScaleDownEvaluation,
        ScaleDownEvaluationInput,
        SoftTaintInput,
        UnmarkNodeInput,
    )
    from scaling.nodes.disruption.events import newly_blocked
    from scaling.nodes.disruption.orchestration import NodeReplacementInput, command_nodes, replacement_id
    from scaling.nodes.disruption.refusals import forget
    from scaling.nodes.gc.orphans import Orphan, OrphanSearchInput, provider_of
    from scaling.nodes.models import LABEL_GROUP
    from scaling.nodes.scale_down.evaluation import apply_unneeded, reuse_key, reuse_of, stands
    from scaling.nodes.scale_down.methods import method_for
    from scaling.nodes.scale_down.methods.empty import CANCELLED_BY_PODS
    from scaling.nodes.scale_down.methods.manual import MANUAL, data_loss_blockers
    from scaling.nodes.scale_down.models import NodeRemoval, NodeState, ScaleDownLoopSettings
    from scaling.nodes.scale_down.removals import (
        NODE_GONE,
        CandidateState,
        NodeScaleDownInput,
        ScaleDownPhase,
        ScaleDownStatus,
    )
    from scaling.nodes.settings import AutoscalerSettings
    from scaling.nodes.state import (
        NodeAutoscalerState,
        commands_in_flight,
        release_ended,
        release_unstarted,
        removals_to_check,
    )
    from scaling.nodes.summaries import replacement_summary, scale_down_summary
    from workflows.children import start_abandoned
    from workflows.nodes.activity_options import NODE_ACTIVITIES
    from workflows.nodes.replacement import NodeReplacementWorkflow
    from workflows.nodes.scale_down import NodeScaleDownWorkflow, scale_down_id
    from workflows.search import initial_attributes

OBSERVE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


def loop_settings(settings: AutoscalerSettings) -> ScaleDownLoopSettings:
    return ScaleDownLoopSettings(
        max_removals_per_loop=settings.max_scale_down_per_loop,
        unready_time_s=settings.scale_down_unready_time_s,
        max_bulk_soft_taint_count=settings.max_bulk_soft_taint_count,
        deletion_candidate_ttl_s=settings.node_deletion_candidate_ttl_s,
    )


async def evaluate(inp: ScaleDownEvaluationInput) -> ScaleDownEvaluation:
    return await workflow.execute_activity(
        contracts.EVALUATE_SCALE_DOWN,
        inp,
        result_type=ScaleDownEvaluation,
        **NODE_ACTIVITIES[contracts.EVALUATE_SCALE_DOWN].timeouts(),
        retry_policy=OBSERVE_RETRY,
    )


def node_provider(provider_id: str) -> str:
    # A node without a providerID can only be one growth made through KWOK.
    return provider_of(provider_id) or "kwok"


def record_candidates(
    state: NodeAutoscalerState, candidates: list[CandidateState] | None, by_state: dict[str, int]
) -> None:
    """None: the evaluation found the candidates the state holds (only the overrides below are
    made again: a child's phase moves on without the candidates changing)."""
    if candidates is not None:
        state.candidates = {c.node: c for c in candidates}
    state.candidates_by_state = dict(by_state)
    for name, sd in state.scale_downs.items():  # a running child's phase says more than "Removing"
        if name in state.candidates:
            state.candidates[name].reason = sd.phase.value
            state.candidates[name].message = sd.last_error or sd.message


async def _best_effort(name: str, arg: object, attempts: int, failed: str) -> None:
    """An activity whose failure the loop only logs (its result unread): the next evaluation names
    what is still to do."""
    try:
        await workflow.execute_activity(
            name, arg, **NODE_ACTIVITIES[name].timeouts(), retry_policy=RetryPolicy(maximum_attempts=attempts)
        )
    except ActivityError:
        workflow.logger.warning(failed)


def _waiting_empty(sd: ScaleDownStatus) -> bool:
    return sd.phase == ScaleDownPhase.MARKED and method_for(sd.kind).require_empty


async def step(
    settings: AutoscalerSettings, state: NodeAutoscalerState, view: str = "", now: float | None = None
) -> ScaleDownEvaluation | None:
    """One scale-down evaluation; returns what it acted on (None: the last one still stands, as
    ``view``, the observation's token of what it would read, says, and none is recorded). ``now``:
    the loop's clock when the workflow's own would differ on replay (right after a local activity)."""
    now = workflow.now().timestamp() if now is None else now
    inp = ScaleDownEvaluationInput(
        cluster=settings.cluster,
        now=now,
        unneeded_since=state.unneeded_since,
        last_scale_up_at=state.last_scale_up_at,
        protected=state.protected_nodes,
        in_progress=sorted(state.scale_downs),
        watch_empty=sorted(name for name, sd in state.scale_downs.items() if _waiting_empty(sd)),
        settings=loop_settings(settings),
        fresh=state.resource_versions,
        candidates_digest=state.candidates_digest,
        refused=state.refused_consolidations,
        replacing=commands_in_flight(state),
        first_evaluation=state.scale_down_evaluated_at is None,
    )
    key = reuse_key(inp)
    if stands(state.scale_down_reuse, view, key, now):
        state.scale_down_evaluated_at = now  # it would have said the same now
        record_candidates(state, None, state.candidates_by_state)  # children's phases move on
        return None
    ev = await evaluate(inp)
    state.scale_down_reuse = reuse_of(ev, key)
    state.unneeded_since = apply_unneeded(state.unneeded_since, ev, now)
    state.refused_consolidations = forget(state.refused_consolidations, ev.refusals_ended)
    state.scale_down_evaluated_at = now
    before = dict(state.candidates)
    record_candidates(state, None if ev.candidates_unchanged else ev.candidates, ev.candidates_by_state)
    state.candidates_digest = ev.candidates_digest
    # Histories recorded before do-not-disrupt hold no such candidate: they replay without this call.
    if events := newly_blocked(before, state.candidates):
        await _best_effort(
            contracts.EMIT_NODE_EVENTS,
            NodeEventsInput(cluster=settings.cluster, events=events),
            3,
            "could not write DisruptionBlocked events",
        )

    # A command's taint or a deletion mark left on a node no removal holds (its run ended from outside,
    # or a Cluster Autoscaler stopped for growth left it) is lifted before anything starts, as Karpenter
    # lifts its taint (untracked_disrupted). Only evaluations since the taint name such nodes: histories
    # recorded before replay without this call. The state is read again after the evaluation: a node
    # a removal took meanwhile keeps its taint.
    if left := [n for n in ev.disrupted_untracked if n not in state.scale_downs]:
        await _best_effort(
            contracts.TAINT_DISRUPTED,
            DisruptedTaintInput(cluster=settings.cluster, nodes=left, present=False, marks=True),
            3,
            f"could not lift the marks of {', '.join(left)}",
        )

    # Cluster Autoscaler's soft taint on the unneeded nodes, lifted from nodes needed again (named only
    # by an evaluation that starts nothing, as CA's loop; evaluations recorded before name none: those
    # histories replay without this call). A failure waits for the next evaluation, as in CA.
    if ev.soft_taint or ev.soft_untaint:
        await _best_effort(
            contracts.UPDATE_SOFT_TAINTS,
            SoftTaintInput(
                cluster=settings.cluster,
                taint=ev.soft_taint,
                untaint=ev.soft_untaint,
                time_budget_s=settings.max_bulk_soft_taint_time_s,
            ),
            1,
            f"could not update the soft taints of {', '.join(ev.soft_taint + ev.soft_untaint)}",
        )

    # Seed 004: a pod landing on a marked empty node cancels its scale-down. So does the node going
    # (another command deleted it): else its removal waited out its timer, up to the 20 min of an
    # unready node (the consolidation bench, seed 3: a successor its command deleted unused, never
    # settled). Only evaluations since name gone nodes: histories from before replay unchanged.
    landed, gone = set(ev.not_empty), set(ev.gone)
    for name, sd in list(state.scale_downs.items()):
        if name in landed and _waiting_empty(sd):
            await _signal_cancel(sd, CANCELLED_BY_PODS, f"pods were scheduled on node {name} while it waited")
        elif name in gone and _waiting_empty(sd):
            await _signal_cancel(sd, NODE_GONE, f"node {name} no longer exists")

    for target in ev.to_remove:
        inp = removal_input(settings, state, target, target.provider_id)
        if method_for(inp.kind).replaces:  # drift, expiry: only evaluations since disruption name these
            await start_replacement(settings, state, inp)
        else:
            await start_child(settings, state, inp)
    if ev.consolidate:  # a multi-node consolidation: only evaluations since multi-node name one
        first, *others = (removal_input(settings, state, t, t.provider_id) for t in ev.consolidate)
        await start_replacement(settings, state, first, others, ev.consolidate_allowed)
    return ev


def removal_input(
    settings: AutoscalerSettings,
    state: NodeAutoscalerState,
    removal: NodeRemoval | RemovalTarget,
    provider_id: str,
) -> NodeScaleDownInput:
    return NodeScaleDownInput(
        cluster=settings.cluster,
        node=removal.name,
        group=removal.group,
        pool=removal.pool,
        provider=node_provider(provider_id),
        provider_id=provider_id,
        kind=removal.kind.value,
        scale_down_at=removal.scale_down_at,
        parent_workflow_id=workflow.info().workflow_id,
        use_search_attributes=settings.use_search_attributes,
        pdb_retry_s=settings.pdb_retry_s,
        eviction_retry_s=settings.eviction_retry_s,
        drain_timeout_s=settings.drain_timeout_s,
        protected=list(state.protected_nodes),
        settings=loop_settings(settings),
    )


async def start_child(settings: AutoscalerSettings, state: NodeAutoscalerState, inp: NodeScaleDownInput) -> str:
    wid = scale_down_id(settings.cluster, inp.node)
    before = {inp.node: state.scale_downs.get(inp.node)}
    state.scale_downs[inp.node] = ScaleDownStatus(
        node=inp.node, workflow_id=wid, kind=inp.kind, scale_down_at=inp.scale_down_at
    )
    # A child from an earlier run of the loop may still be at work on this node: it reports in (a run
    # that is closing does not: release_unstarted).
    if not await start_abandoned(
        NodeScaleDownWorkflow.run,
        inp,
        id=wid,
        search_attributes=_marked(settings),
        static_summary=scale_down_summary(inp),
    ):
        release_unstarted(state, wid, inp.node, before)
    return wid


async def start_replacement(
    settings: AutoscalerSettings,
    state: NodeAutoscalerState,
    inp: NodeScaleDownInput,
    others: list[NodeScaleDownInput] | None = None,
    allowed: int = 1,
) -> str:
    """A NodeReplacement for the node: it reports as a removal of the node (so it counts in flight,
    against the budgets and for explain) until its NodeScaleDown child takes over the reports. A
    multi-node consolidation's (``others``, ``allowed``) holds its first ``allowed`` nodes so."""
    wid = replacement_id(settings.cluster, inp.node)
    replacement = NodeReplacementInput(
        removal=inp,
        readiness_timeout_s=settings.readiness_timeout_s,
        readiness_poll_s=settings.readiness_poll_s,
        max_attempts=settings.max_attempts,
        use_search_attributes=settings.use_search_attributes,
        others=others or [],
        allowed=allowed,
    )
    held = command_nodes(replacement)
    replacement.leaving = sorted(n for n in state.scale_downs if n not in held)
    before = {n: state.scale_downs.get(n) for n in held}
    for node in held:
        state.scale_downs[node] = ScaleDownStatus(
            node=node, workflow_id=wid, kind=inp.kind, scale_down_at=inp.scale_down_at
        )
    # One from an earlier run of the loop may be at work on this node: it reports in (a run that is
    # closing does not: release_unstarted).
    if not await start_abandoned(
        NodeReplacementWorkflow.run,
        replacement,
        id=wid,
        search_attributes=_marked(settings),
        static_summary=replacement_summary(inp, len(replacement.others)),
    ):
        # That run, still closing, may have had its NodeScaleDown child give the final word on the node (a
        # single node's replacement says nothing itself): the node is let go. Held for good before, it
        # waited for a report from a run that had closed (the consolidation bench: never settled).
        release_unstarted(state, wid, inp.node, before, [scale_down_id(settings.cluster, n) for n in held])
    return wid


def _marked(settings: AutoscalerSettings) -> TypedSearchAttributes | None:
    """A removal child's search attributes as it starts (when the loop sets them)."""
    return initial_attributes(settings.cluster, ScaleDownPhase.MARKED.value) if settings.use_search_attributes else None


async def _signal_cancel(sd: ScaleDownStatus, code: str, message: str) -> None:
    try:
        await workflow.get_external_workflow_handle(sd.workflow_id).signal(
            NodeScaleDownWorkflow.cancel, args=[code, message]
        )
    except Exception:  # noqa: BLE001 - the child finished in between; its final report arrives
        workflow.logger.warning("could not cancel %s", sd.workflow_id)


# -- operator overrides (called from the NodeAutoscaler's updates) ---------------------------


async def protect(state: NodeAutoscalerState, node: str) -> list[str]:
    if node not in state.protected_nodes:
        state.protected_nodes.append(node)
    sd = state.scale_downs.get(node)
    if sd is not None and sd.phase == ScaleDownPhase.MARKED:
        await _signal_cancel(sd, "ProtectedByOperator", f"node {node} protected by an operator")
    return state.protected_nodes


def unprotect(state: NodeAutoscalerState, node: str) -> list[str]:
    if node in state.protected_nodes:
        state.protected_nodes.remove(node)
    return state.protected_nodes


async def remove_now(settings: AutoscalerSettings, state: NodeAutoscalerState, node: str) -> str:
    """Start removing ``node`` at once. Refused (ApplicationError naming the reason) when the
    removal would lose data; other blockers (utilisation, timers) are the operator's call."""
    sd = state.scale_downs.get(node)
    if sd is not None:
        await workflow.get_external_workflow_handle(sd.workflow_id).signal(NodeScaleDownWorkflow.remove_now)
        return f"{sd.workflow_id}: timer skipped"
    check_inp = NodeRemovalCheckInput(
        cluster=settings.cluster,
        node=node,
        now=workflow.now().timestamp(),
        in_progress=sorted(state.scale_downs),
        settings=loop_settings(settings),
        from_cache=True,  # the NodeScaleDown it starts reads the API server before the drain
    )
    check: NodeRemovalCheck = await workflow.execute_activity(
        contracts.CHECK_NODE_REMOVAL,
        check_inp,
        result_type=NodeRemovalCheck,
        **NODE_ACTIVITIES[contracts.CHECK_NODE_REMOVAL].timeouts(),
        retry_policy=OBSERVE_RETRY,
    )
    if not check.found:
        raise ApplicationError(f"node {node} does not exist", type="NodeNotFound")
    if not check.managed:
        raise ApplicationError(f"node {node} is not managed by growth (no {LABEL_GROUP} label)", type="NotManaged")
    loses = data_loss_blockers(check.blockers)
    if loses:
        raise ApplicationError("; ".join(str(b) for b in loses), type="WouldLoseData", non_retryable=True)
    if node in state.protected_nodes:
        state.protected_nodes.remove(node)  # an explicit remove wins over an earlier protect
    removal = NodeRemoval(
        name=node,
        group=check.group or "",
        pool=check.pool,
        kind=NodeState.UNDERUSED,
        scale_down_at=workflow.now().timestamp(),
    )
    inp = removal_input(settings, state, removal, check.provider_id)
    inp.kind = MANUAL
    return await start_child(settings, state, inp)


# -- orphans ---------------------------------------------------------------------------------


async def release_ended_removals(settings: AutoscalerSettings, state: NodeAutoscalerState) -> list[str]:
    """Let go of the nodes whose removal's workflow closed without a final word to the loop (terminated
    from the Web UI or the CLI, or failed): each is unmarked and uncordoned (if growth cordoned it), and
    the next evaluation lifts a karpenter.sh/disrupted taint no removal holds. Held for good before,
    such a node kept its group's budget slot and was never evaluated again. Returns the nodes."""
    try:
        ended: list[str] = await workflow.execute_activity(
            contracts.REMOVALS_ENDED,
            removals_to_check(state),
            result_type=list[str],
            **NODE_ACTIVITIES[contracts.REMOVALS_ENDED].timeouts(),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
    except ActivityError:
        workflow.logger.warning("could not tell which removals ended")
        return []
    released = release_ended(state, ended, workflow.now().timestamp())
    for node in released:
        try:
            await workflow.execute_activity(
                contracts.UNMARK_NODE,
                UnmarkNodeInput(cluster=settings.cluster, node=node, uncordon=True),
                **NODE_ACTIVITIES[contracts.UNMARK_NODE].timeouts(),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError:  # best effort: the node serves again once its marks go
            workflow.logger.warning("could not unmark %s", node)
    return released


async def check_orphans(settings: AutoscalerSettings, state: NodeAutoscalerState, providers: list[str]) -> None:
    state.orphans = await workflow.execute_activity(
        contracts.FIND_ORPHANS,
        OrphanSearchInput(
            cluster=settings.cluster,
            providers=providers,
            now=workflow.now().timestamp(),
            grace_s=settings.orphan_grace_s,
            previous=state.orphans,
            removing=sorted(state.scale_downs),
            fresh=state.resource_versions,
        ),
        result_type=list[Orphan],
        **NODE_ACTIVITIES[contracts.FIND_ORPHANS].timeouts(),
        retry_policy=RetryPolicy(maximum_attempts=3),
    )
