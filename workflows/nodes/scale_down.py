"""NodeScaleDown `nodes/<cluster>/scale-down/<node>`: seed 004 steps 8-9 with CA's safe drain.

Marked (ScaleDownAt, and a taint: soft while it waits, as Cluster Autoscaler's on an unneeded node)
→ durable timer → hard taint → Checking (check_node_removal: still_removable beside the cluster) →
Draining (cordon, evict through the Eviction API, wait for the pods to be gone) → Deleting (machine
at the provider, then the Node) → Removed. A node of a multi-node command (``drain_gate``: its
NodeReplacement) waits between the cordon and the first eviction until the replacement says every
node of the command is cordoned, so no evicted pod lands on a node about to be drained.
Cancelled when pods land on an empty node during the
wait, when an operator protects the node, or when the re-check finds a blocker; Failed when a
PDB keeps refusing an eviction past the bounded retry time. Both leave the node untainted
(and uncordoned). Every step is an idempotent activity, so a worker killed mid-drain resumes
where the history says it was and removes the node once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.kube.drain import NOT_ENOUGH_PDB
    from scaling.nodes import contracts
    from scaling.nodes.contracts import (
        DeleteNodeInput,
        EvictPodInput,
        EvictResult,
        MarkNodeInput,
        NodeEvent,
        NodeEventsInput,
        NodeRef,
        NodeRemovalCheck,
        NodeRemovalCheckInput,
        UnmarkNodeInput,
        WaitPodsGoneInput,
    )
    from scaling.nodes.disruption.orchestration import NODE_CORDONED
    from scaling.nodes.scale_down.methods import method_for
    from scaling.nodes.scale_down.recheck import blocking, cancel_code
    from scaling.nodes.scale_down.removals import NODE_GONE, NodeScaleDownInput, ScaleDownPhase, ScaleDownStatus
    from scaling.nodes.summaries import scale_down_details
    from workflows.nodes import metrics
    from workflows.nodes.activity_options import NODE_ACTIVITIES
    from workflows.search import CLUSTER, NODE, PHASE

from workflows.nodes.request_machine import failure_text

KUBE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10))
EVENTS_RETRY = RetryPolicy(maximum_attempts=3)
# One round of provider deletes; the workflow reports a failed round and tries again later.
PROVIDER_ROUND = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=3
)
PROVIDER_BACKOFF_MAX_S = 300.0
CANCELLED_BY_OPERATOR = "CancelledByOperator"
DRAIN_TIMEOUT = "DrainTimeout"
# workflow.patched id: a node that waits for its ScaleDownAt is soft-tainted for the wait
# (DeletionCandidateOfClusterAutoscaler, PreferNoSchedule, as Cluster Autoscaler marks an unneeded
# node), so a pod that fits no other node still lands there and cancels the removal, instead of
# waiting for a node bought for it; the hard taint (ToBeDeleted, NoSchedule) comes once the wait is
# over, before the re-check. Runs from before it (0.2.0's recordings) tainted hard for the whole
# wait. Asked only when there is a wait. (Orchestration: added 2026-11-30.)
SOFT_MARK_WHILE_WAITING = "soft-mark-while-waiting"


def scale_down_id(cluster: str, node: str) -> str:
    return f"nodes/{cluster}/scale-down/{node}"


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@workflow.defn(name="NodeScaleDown")
class NodeScaleDownWorkflow:
    @workflow.init
    def __init__(self, inp: NodeScaleDownInput) -> None:
        self.status = ScaleDownStatus(
            node=inp.node,
            workflow_id=workflow.info().workflow_id,
            kind=inp.kind,
            scale_down_at=inp.scale_down_at,
            command=inp.command,
            run=workflow.info().run_id[:8],
        )
        self.cancel_reason: tuple[str, str] | None = None  # (code, message)
        self.now_requested = False
        self.drain_released = False  # a drain_gate's answer: every node of the command is cordoned

    # -- steering ------------------------------------------------------------------------
    @workflow.query
    def describe(self) -> ScaleDownStatus:
        return self.status

    @workflow.signal
    def cancel(self, reason: str = CANCELLED_BY_OPERATOR, message: str = "cancelled by operator") -> None:
        """Honoured until the drain starts; after that the node is on its way out."""
        if self.cancel_reason is None:
            self.cancel_reason = (reason, message)

    @workflow.signal
    def remove_now(self) -> None:
        """Skip the rest of the timer (the re-check still runs)."""
        self.now_requested = True

    @workflow.signal
    def drain(self) -> None:
        """From the drain_gate: every node of the command is cordoned, evict."""
        self.drain_released = True

    # -- the state machine ---------------------------------------------------------------
    @workflow.run
    async def run(self, inp: NodeScaleDownInput) -> ScaleDownStatus:
        soft = inp.scale_down_at > workflow.now().timestamp() and workflow.patched(SOFT_MARK_WHILE_WAITING)
        if not await self._mark(inp, candidate=soft):
            return await self._node_gone(inp)
        await self._publish(inp)
        await self._events(
            inp.cluster,
            [
                NodeEvent(
                    node=inp.node,
                    reason="ScaleDown",
                    message=f"{inp.kind.lower()} node marked for scale-down at {rfc3339(inp.scale_down_at)}",
                )
            ],
        )

        wait_s = inp.scale_down_at - workflow.now().timestamp()
        if wait_s > 0:
            try:
                await workflow.wait_condition(
                    lambda: self.cancel_reason is not None or self.now_requested, timeout=timedelta(seconds=wait_s)
                )
            except TimeoutError:
                pass
        if self.cancel_reason is not None:
            code, message = self.cancel_reason
            return await self._finish(inp, ScaleDownPhase.CANCELLED, code, message)
        # The hard taint before the re-check: no pod lands between the check and the drain.
        if soft and not await self._mark(inp, candidate=False):
            return await self._node_gone(inp)

        # Re-check against the cluster as it is now (seed 004: still empty? CA: still safe?).
        self.status.phase = ScaleDownPhase.CHECKING
        await self._publish(inp)
        recheck = NodeRemovalCheckInput(
            cluster=inp.cluster,
            node=inp.node,
            now=workflow.now().timestamp(),
            protected=inp.protected,
            require_empty=method_for(inp.kind).require_empty,
            settings=inp.settings,
            moving_with=inp.moving_with,
        )
        check: NodeRemovalCheck = await self._kube(contracts.CHECK_NODE_REMOVAL, recheck, NodeRemovalCheck)
        if not check.found:
            return await self._node_gone(inp)
        blockers = blocking(inp.kind, check.blockers)
        if blockers:
            return await self._finish(
                inp,
                ScaleDownPhase.CANCELLED,
                cancel_code(blockers[0]),
                "; ".join(b.message for b in blockers),
                blocked=True,
            )

        # Drain: from here the node goes unless a PDB holds a pod past the bounded retry time.
        self.status.phase = ScaleDownPhase.DRAINING
        await self._publish(inp)
        await self._kube(contracts.CORDON_NODE, NodeRef(cluster=inp.cluster, node=inp.node))
        if inp.drain_gate:
            await self._wait_for_gate(inp, inp.drain_gate)
        # The check leaves out pods long past their grace period: a dead kubelet never finishes them.
        failed = await self._drain(inp, check.pods_to_evict)
        if failed is not None:
            code, message = failed
            return await self._finish(inp, ScaleDownPhase.FAILED, code, message, uncordon=True, event="ScaleDownFailed")

        self.status.phase = ScaleDownPhase.DELETING
        await self._publish(inp)
        await self._delete_machine(inp)
        await self._kube(contracts.DELETE_NODE_OBJECT, NodeRef(cluster=inp.cluster, node=inp.node))
        return await self._finish(
            inp,
            ScaleDownPhase.REMOVED,
            None,
            f"node {inp.node} removed ({inp.kind.lower()})",
            unmark=False,
            event="ScaleDown",
        )

    async def _node_gone(self, inp: NodeScaleDownInput) -> ScaleDownStatus:
        """Cancelled: the node is no longer there (nothing to unmark)."""
        return await self._finish(
            inp, ScaleDownPhase.CANCELLED, NODE_GONE, f"node {inp.node} no longer exists", unmark=False
        )

    async def _mark(self, inp: NodeScaleDownInput, candidate: bool) -> bool:
        """Taint and annotate the node (soft while it waits: ``candidate``); False if it is gone."""
        mark = MarkNodeInput(
            cluster=inp.cluster, node=inp.node, scale_down_at=rfc3339(inp.scale_down_at), candidate=candidate
        )
        return await self._kube(contracts.MARK_NODE_FOR_SCALE_DOWN, mark, bool)

    async def _wait_for_gate(self, inp: NodeScaleDownInput, gate: str) -> None:
        """Tell the command's NodeReplacement this node is cordoned, then wait for its word to drain
        (cancels are not honoured from the drain on, here as after it). A gate that cannot be told
        (gone) can never answer: the drain goes on at once."""
        try:
            await workflow.get_external_workflow_handle(gate).signal(NODE_CORDONED, inp.node)
        except FailureError:
            workflow.logger.warning("drain gate %s did not take the cordon of %s", gate, inp.node)
            return
        message = self.status.message
        self.status.message = "cordoned; waiting until every node of the command is cordoned"
        await workflow.wait_condition(lambda: self.drain_released)
        self.status.message = message

    async def _drain(self, inp: NodeScaleDownInput, pods: list[str]) -> tuple[str, str] | None:
        deadline = workflow.now().timestamp() + inp.pdb_retry_s
        left = [p for p in pods if p not in self.status.evicted]
        while left:
            refused: list[str] = []
            last_message = ""
            for key in left:
                ns, name = key.split("/", 1)
                res: EvictResult = await self._kube(
                    contracts.EVICT_POD,
                    EvictPodInput(cluster=inp.cluster, namespace=ns, name=name, node=inp.node),
                    EvictResult,
                )
                if res.outcome == "refused":
                    refused.append(key)
                    last_message = res.message
                    self.status.evictions_refused += 1
                else:
                    self.status.evicted.append(key)
            left = refused
            if not left:
                break
            self.status.last_error = f"eviction of {', '.join(left)} refused: {last_message}"
            await self._publish(inp)
            if workflow.now().timestamp() >= deadline:
                return NOT_ENOUGH_PDB, (
                    f"evicting {', '.join(left)} was refused by a PodDisruptionBudget for {inp.pdb_retry_s:.0f}s: {last_message}"
                )
            await workflow.sleep(timedelta(seconds=inp.eviction_retry_s))
        remaining: list[str] = await workflow.execute_activity(
            contracts.WAIT_PODS_GONE,
            WaitPodsGoneInput(cluster=inp.cluster, node=inp.node, pods=pods, timeout_s=inp.drain_timeout_s),
            result_type=list[str],
            **NODE_ACTIVITIES[contracts.WAIT_PODS_GONE].timeouts(timedelta(seconds=inp.drain_timeout_s + 60)),
            retry_policy=KUBE_RETRY,
        )
        if remaining:
            return DRAIN_TIMEOUT, f"pods {', '.join(remaining)} still on the node after {inp.drain_timeout_s:.0f}s"
        return None

    async def _delete_machine(self, inp: NodeScaleDownInput) -> None:
        """Retried until it works, with growing pauses; every failed round is reported."""
        pause = 5.0
        while True:
            try:
                await workflow.execute_activity(
                    contracts.DELETE_NODE,
                    DeleteNodeInput(
                        cluster=inp.cluster, provider=inp.provider, node_name=inp.node, provider_id=inp.provider_id
                    ),
                    **NODE_ACTIVITIES[contracts.DELETE_NODE].timeouts(),
                    retry_policy=PROVIDER_ROUND,
                )
                return
            except ActivityError as err:
                self.status.provider_delete_failures += 1
                self.status.last_error = f"provider delete failed: {failure_text(err)}"
                await self._publish(inp)
                await self._events(
                    inp.cluster,
                    [
                        NodeEvent(
                            node=inp.node,
                            reason="ScaleDownFailed",
                            type="Warning",
                            message=f"deleting the machine at {inp.provider} failed, retrying in {pause:.0f}s: {failure_text(err)}",
                        )
                    ],
                )
                await workflow.sleep(timedelta(seconds=pause))
                pause = min(pause * 2, PROVIDER_BACKOFF_MAX_S)

    # -- helpers -------------------------------------------------------------------------
    async def _finish(
        self,
        inp: NodeScaleDownInput,
        phase: ScaleDownPhase,
        reason: str | None,
        message: str,
        unmark: bool = True,
        uncordon: bool = False,
        blocked: bool = False,
        event: str | None = None,
    ) -> ScaleDownStatus:
        if unmark:
            await self._kube(
                contracts.UNMARK_NODE, UnmarkNodeInput(cluster=inp.cluster, node=inp.node, uncordon=uncordon)
            )
        self.status.phase, self.status.reason, self.status.message = phase, reason, message
        metrics.scale_down_finished(inp, self.status)
        ev = event or ("ScaleDownBlocked" if blocked else "ScaleDown")
        warn = phase in (ScaleDownPhase.FAILED,) or blocked
        text = message if phase == ScaleDownPhase.REMOVED else f"scale-down {phase.value.lower()}: {reason}: {message}"
        await self._events(
            inp.cluster, [NodeEvent(node=inp.node, reason=ev, message=text, type="Warning" if warn else "Normal")]
        )
        await self._publish(inp)
        return self.status

    async def _kube(self, name: str, arg, result_type=None):  # noqa: ANN001, ANN202
        return await workflow.execute_activity(
            name,
            arg,
            result_type=result_type,
            **NODE_ACTIVITIES[name].timeouts(),
            retry_policy=KUBE_RETRY,
        )

    async def _events(self, cluster: str, events: list[NodeEvent]) -> None:
        try:
            await workflow.execute_activity(
                contracts.EMIT_NODE_EVENTS,
                NodeEventsInput(cluster=cluster, events=events),
                **NODE_ACTIVITIES[contracts.EMIT_NODE_EVENTS].timeouts(),
                retry_policy=EVENTS_RETRY,
            )
        except ActivityError:
            workflow.logger.warning("could not write node events for %s", events[0].node if events else "?")

    async def _publish(self, inp: NodeScaleDownInput) -> None:
        workflow.set_current_details(scale_down_details(self.status))  # no command: not in history
        if inp.use_search_attributes:
            workflow.upsert_search_attributes(
                [CLUSTER.value_set(inp.cluster), NODE.value_set(inp.node), PHASE.value_set(self.status.phase.value)]
            )
        if not inp.parent_workflow_id:
            return
        try:
            await workflow.get_external_workflow_handle(inp.parent_workflow_id).signal(
                "scale_down_changed", self.status
            )
        except FailureError:
            workflow.logger.warning("autoscaler %s did not take the update", inp.parent_workflow_id)
