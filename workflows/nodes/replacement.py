"""NodeReplacement `nodes/<cluster>/replace/<node>`: a drifted, expired or consolidated node replaced, its
successor Ready before it is drained (Karpenter's disruption controller and orchestration queue: taint the
candidates karpenter.sh/disrupted:NoSchedule, launch, wait initialized, then drain and delete; untaint
when a launch fails). The taint comes right before the first successor's create (once approved, when
the group's approval gate holds it): from then on no new pod lands on a node whose pods the plan
moves, and the node keeps serving the pods it has.

A multi-node consolidation is one NodeReplacement for N nodes (``others``): its plan chooses
which go together, the nodes not chosen go back to the loop, the one successor is made Ready, then the
chosen nodes are drained together: every node's NodeScaleDown starts at once, gated by this workflow (``drain_gate``),
marks, re-checks and cordons its node, reports it cordoned and waits; once every one is cordoned or has
ended (a re-check that cancelled left its node unmarked and serving), all evict and delete together. So
no pod evicted from one node of the command lands on another (Karpenter taints every candidate of a
command before any is drained), and the command takes its longest drain's time, not their sum. If the
successor fails, none was touched.

Planning (plan_replacement: the scale-up planner beside the cluster, for the node's pods) → the
successors, each a RequestMachine as a NodeRequest runs it (its id, derived from this workflow's, is the
create's key: a killed worker never buys twice), behind the group's approval gate → the node's
NodeScaleDown as a child (mark, re-check, cordon, drain through the Eviction API and PDBs, delete) →
done. If a successor fails, the node was never marked: it keeps serving, the successors already made
are deleted, and the reason is reported to the loop. If the drain's re-check cancels (a do-not-disrupt
pod arrived, a PDB holds), the NodeScaleDown leaves the node unmarked, and successors that took no
pod yet are deleted.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import FailureError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from scaling.nodes import contracts
    from scaling.nodes.contracts import (
        DeleteNodeInput,
        DisruptedTaintInput,
        EvictInOrderInput,
        NodeRemovalCheck,
        NodeRemovalCheckInput,
        OrderedEviction,
        ReplacementPlan,
        ReplacementPlanInput,
        WaitReadyInput,
    )
    from scaling.nodes.disruption.orchestration import (
        ALREADY_REMOVING,
        NODE_CORDONED,
        REPLACEMENT_FAILED,
        REPLACEMENT_UNPLANNED,
        NodeReplacementInput,
        command_id,
        command_nodes,
        removal_of,
        successor_inputs,
        successors_lent_until,
    )
    from scaling.nodes.disruption.refusals import NOT_WORTH_IT
    from scaling.nodes.disruption.replacement import saving_refused
    from scaling.nodes.models import RequestPhase
    from scaling.nodes.scale_down.methods import method_for
    from scaling.nodes.scale_down.removals import NODE_GONE, NodeScaleDownInput, ScaleDownPhase, ScaleDownStatus
    from scaling.nodes.summaries import replacement_details
    from workflows.nodes.activity_options import NODE_ACTIVITIES
    from workflows.nodes.request_machine import DELETE_RETRY, Decision, MachineApprovals, RequestMachine, wait_alone
    from workflows.nodes.scale_down import KUBE_RETRY, NodeScaleDownWorkflow, scale_down_id
    from workflows.search import CLUSTER, NODE, PHASE

PLAN_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


@workflow.defn(name="NodeReplacement")
class NodeReplacementWorkflow(MachineApprovals):  # approve/deny: the successors (denied: the node stays)
    @workflow.init
    def __init__(self, inp: NodeReplacementInput) -> None:
        self.inp = inp
        self.status = ScaleDownStatus(
            node=inp.removal.node,
            workflow_id=workflow.info().workflow_id,
            kind=inp.removal.kind,
            scale_down_at=inp.removal.scale_down_at,
            message="planning its successor",
            run=workflow.info().run_id[:8],
        )
        self.decision = Decision()  # one approval for every successor
        self.machines: list[RequestMachine] = []
        self.cancel_reason: tuple[str, str] | None = None
        self.draining = False
        self.cordoned: set[str] = set()  # drain_gate reports: nodes of the command cordoned, waiting to drain
        self.nodes = command_nodes(inp)  # what the loop holds for this command (one node but for multi-node)
        self.disrupted = False  # whether the nodes were tainted (before the first successor's create)
        # The run's key, not the id's (orchestration.command_id): the successors' create key and label.
        self.command = command_id(workflow.info().workflow_id, workflow.info().first_execution_run_id)

    # -- steering ------------------------------------------------------------------------
    @workflow.query
    def describe(self) -> ScaleDownStatus:
        return self.status

    @workflow.signal
    def cancel(self, reason: str = "CancelledByOperator", message: str = "cancelled by operator") -> None:
        """Honoured until the drain starts (the NodeScaleDown child takes cancels from then on)."""
        if self.cancel_reason is None and not self.draining:
            self.cancel_reason = (reason, message)
            for m in self.machines:
                m.cancel(message)

    @workflow.signal
    def remove_now(self) -> None:
        """Nothing waits on a timer here: a replacement goes at once."""

    @workflow.signal(name=NODE_CORDONED)
    def node_cordoned(self, node: str) -> None:
        """A NodeScaleDown of this command cordoned its node and waits for the word to drain."""
        self.cordoned.add(node)

    # -- the orchestration ---------------------------------------------------------------
    @workflow.run
    async def run(self, inp: NodeReplacementInput) -> ScaleDownStatus:
        removal = inp.removal
        await self._publish()
        plan: ReplacementPlan = await workflow.execute_activity(
            contracts.PLAN_REPLACEMENT,
            ReplacementPlanInput(
                cluster=removal.cluster,
                node=removal.node,
                now=workflow.now().timestamp(),
                leaving=inp.leaving,
                others=[o.node for o in inp.others],
                allowed=inp.allowed,
            ),
            result_type=ReplacementPlan,
            **NODE_ACTIVITIES[contracts.PLAN_REPLACEMENT].timeouts(),
            retry_policy=PLAN_RETRY,
        )
        if not plan.found:
            return await self._finish(ScaleDownPhase.CANCELLED, NODE_GONE, f"node {removal.node} no longer exists")
        if plan.problems:
            p = plan.problems[0]
            return await self._finish(
                ScaleDownPhase.CANCELLED,
                REPLACEMENT_UNPLANNED,
                f"no successor can hold pod {p.namespace}/{p.name}: {p.reason}: {p.message}",
            )

        if plan.refused:
            # A refusal carries what the plan read: the loop does not ask again while the cluster shows the same.
            self.status.cluster_digest = plan.cluster_digest
            self.nodes = [removal.node, *(o.node for o in inp.others)]  # every candidate's timer starts again
            return await self._finish(ScaleDownPhase.CANCELLED, NOT_WORTH_IT, f"nodes kept: {plan.refused}")
        if inp.others:
            await self._take(plan.nodes or [removal.node])

        min_saving = method_for(removal.kind).min_saving
        if min_saving is not None and (refused := saving_refused(plan, min_saving)) is not None:
            self.status.cluster_digest = plan.cluster_digest
            return await self._finish(ScaleDownPhase.CANCELLED, NOT_WORTH_IT, f"node {removal.node} kept: {refused}")

        wid = workflow.info().workflow_id
        # Keyed by the run: an activity's input, so runs from before replay unchanged.
        requests = successor_inputs(inp, self.command, plan, self.nodes[-1])
        self.machines = [RequestMachine(r, self, self.decision) for r in requests]
        if self.machines:
            self.status.message = f"making {len(self.machines)} successor(s) Ready before the drain"
            # Their spare room takes the loop's pending pods meanwhile, as Karpenter's in-flight NodeClaims'
            # does; not a gated one's: a person may hold it for hours, and no pod should wait on that.
            self.status.successors = [
                m.status.for_planner(successor=True) for m in self.machines if m.inp.approval is None
            ]
            self.status.successors_until = successors_lent_until(inp, len(self.machines), workflow.now().timestamp())
            await self._publish()
        for m in self.machines:
            if self.cancel_reason is not None:
                break
            await m.run()
            if m.status.phase != RequestPhase.READY:
                break
        self.status.successors, self.status.successors_until = [], 0.0  # Ready (its room counted there), or given up
        failed = [m for m in self.machines if m.status.phase != RequestPhase.READY]
        if self.cancel_reason is not None or failed:
            await self._delete_successors()
            await self._untaint(self.nodes)  # rolled back: every node keeps serving, new pods too
            if self.cancel_reason is not None:
                return await self._finish(ScaleDownPhase.CANCELLED, *self.cancel_reason)
            m = failed[0]
            return await self._finish(
                ScaleDownPhase.FAILED,
                REPLACEMENT_FAILED,
                f"successor {m.status.id} ended {m.status.phase.value}: {m.status.message}; node {removal.node} keeps serving",
            )

        # Every successor is Ready: now, and only now, the nodes are marked, drained and deleted.
        self.draining = True
        # A multi-node command's nodes are all cordoned before any pod is evicted, then drained together
        # (Karpenter taints every candidate of a command, then terminates them together): drained in
        # turn, a pod evicted from the first could land on the next and be evicted again. A plan the
        # scheduler follows in one order only names it, and this workflow evicts in that order first.
        if len(self.nodes) > 1 or plan.drain_order:
            results = await self._drain_together(plan.drain_order)
        else:
            results = [await self._drain_alone(self.nodes[0])]
        if all(r.phase != ScaleDownPhase.REMOVED and not r.evicted for r in results):
            await self._delete_successors()  # nothing moved to them: the nodes keep serving alone
        # A node the drain's re-check kept serves on, for new pods too; one another command removes is its.
        await self._untaint(
            [r.node for r in results if r.phase != ScaleDownPhase.REMOVED and r.reason != ALREADY_REMOVING]
        )
        result = results[0]
        if len(results) > 1:
            removed = [r.node for r in results if r.phase == ScaleDownPhase.REMOVED]
            result = result.model_copy(
                update={"message": f"{len(removed)} of {len(results)} nodes removed ({', '.join(removed) or 'none'})"}
            )
        self.status = result.model_copy(update={"workflow_id": wid})
        self._show()
        return self.status  # the child reported the outcome to the loop itself

    # -- the drains ------------------------------------------------------------------------
    async def _drain_alone(self, node: str) -> ScaleDownStatus:
        """The one node's NodeScaleDown (mark, re-check, cordon, drain, delete), ungated."""
        try:
            return await workflow.execute_child_workflow(
                NodeScaleDownWorkflow.run,
                self._removal(node),
                id=scale_down_id(self.inp.removal.cluster, node),
                result_type=ScaleDownStatus,
            )
        except WorkflowAlreadyStartedError:
            return self._already_removing(node)

    async def _drain_together(self, order: list[str]) -> list[ScaleDownStatus]:
        """Every node's NodeScaleDown at once, each gated by this workflow: it marks, re-checks and
        cordons its node, reports it cordoned, and evicts nothing until told. Once every one started
        is cordoned or has ended (a re-check that cancelled left its node unmarked and serving), the
        pods of ``order`` on the cordoned nodes are evicted in it, one at a time; then all are told to
        drain, and they drain and delete their nodes together."""
        wid = workflow.info().workflow_id
        started = await asyncio.gather(*(self._start_removal(node, wid) for node in self.nodes))
        children = {node: child for node, child in zip(self.nodes, started, strict=True) if child is not None}
        await workflow.wait_condition(lambda: all(n in self.cordoned or c.done() for n, c in children.items()))
        draining = sorted(self.cordoned & {n for n, c in children.items() if not c.done()})
        if order and draining:
            self.status.message = (
                f"evicting {len(order)} pod(s) one at a time, in the order the scheduler places all in"
            )
            await self._publish()
            evict = EvictInOrderInput(cluster=self.inp.removal.cluster, pods=order, nodes=draining)
            await workflow.execute_activity(
                contracts.EVICT_IN_ORDER,
                evict,
                result_type=list[OrderedEviction],
                **NODE_ACTIVITIES[contracts.EVICT_IN_ORDER].timeouts(
                    timedelta(seconds=len(order) * (evict.bound_timeout_s + evict.refused_retry_s + 15) + 60)
                ),
                retry_policy=KUBE_RETRY,
            )
        self.status.message = f"draining {', '.join(sorted(self.cordoned & set(children))) or 'none'} together"
        workflow.set_current_details(replacement_details(self.status))  # no command: not in history
        await asyncio.gather(*(self._release(c) for n, c in children.items() if n in self.cordoned and not c.done()))
        ended = await asyncio.gather(*children.values(), return_exceptions=True)
        if failed := next((e for e in ended if isinstance(e, BaseException)), None):
            raise failed  # as a lone drain's failure ends the run, once every other one ended
        by_node = dict(zip(children, ended, strict=True))
        return [by_node.get(node) or self._already_removing(node) for node in self.nodes]

    async def _start_removal(self, node: str, gate: str) -> workflow.ChildWorkflowHandle | None:
        """The node's NodeScaleDown gated by ``gate``; None when another command's removes the node."""
        try:
            return await workflow.start_child_workflow(
                NodeScaleDownWorkflow.run,
                self._removal(node).model_copy(
                    update={
                        "drain_gate": gate,
                        "command": self.command,
                        "moving_with": [n for n in self.nodes if n != node],
                    }
                ),
                id=scale_down_id(self.inp.removal.cluster, node),
                result_type=ScaleDownStatus,
            )
        except WorkflowAlreadyStartedError:
            return None

    @staticmethod
    async def _release(child: workflow.ChildWorkflowHandle) -> None:
        try:
            await child.signal(NodeScaleDownWorkflow.drain)
        except FailureError:  # it ended in between (terminated): its result says how
            workflow.logger.warning("could not tell %s to drain", child.id)

    def _removal(self, node: str) -> NodeScaleDownInput:
        return removal_of(self.inp, node).model_copy(update={"scale_down_at": workflow.now().timestamp()})

    def _already_removing(self, node: str) -> ScaleDownStatus:
        """Another command took this node after the loop named it to this one (a single-node fallback
        may take any candidate): its NodeScaleDown drains it and reports to the loop."""
        return self.status.model_copy(
            update={
                "node": node,
                "phase": ScaleDownPhase.CANCELLED,
                "reason": ALREADY_REMOVING,
                "message": f"node {node} is being removed by another workflow",
            }
        )

    # -- RequestOwner ----------------------------------------------------------------------
    async def publish(self, machine: RequestMachine) -> None:
        s = machine.status
        self.status.message = f"successor {s.id}: {s.phase.value}" + (f" ({s.message})" if s.message else "")
        self._show()

    async def creating(self, machine: RequestMachine) -> None:
        """Before the first create, the command's nodes are tainted karpenter.sh/disrupted:NoSchedule (Karpenter's
        executeCommand): untainted while the successors were made, a node took pods from elsewhere into the
        room its own plan counted on, and its drain's re-check cancelled the command after its successor
        was bought (the consolidation bench, seed 3). Lifted from those the command does not remove."""
        if not self.disrupted:
            self.disrupted = True
            await self._taint(self.nodes, present=True)

    async def provisioning(self, machine: RequestMachine) -> None:
        await self.publish(machine)

    async def wait_ready(self, machine: RequestMachine, wait: WaitReadyInput) -> bool:
        return await wait_alone(machine, wait)

    # -- helpers -------------------------------------------------------------------------
    async def _taint(self, nodes: list[str], present: bool) -> None:
        await workflow.execute_activity(
            contracts.TAINT_DISRUPTED,
            DisruptedTaintInput(cluster=self.inp.removal.cluster, nodes=nodes, present=present),
            result_type=list[str],
            **NODE_ACTIVITIES[contracts.TAINT_DISRUPTED].timeouts(),
            retry_policy=KUBE_RETRY,
        )

    async def _untaint(self, nodes: list[str]) -> None:
        """The taint lifted from ``nodes``, if this run tainted them."""
        if self.disrupted and nodes:
            await self._taint(nodes, present=False)

    async def _delete_successors(self) -> None:
        ready = [m.status for m in self.machines if m.status.phase == RequestPhase.READY and m.status.node_name]
        # A successor is a Ready, schedulable node from the moment it is made, and pods from elsewhere may
        # have landed on it: it is deleted only when none needs evicting (at the provider, they went with
        # it undrained); one that serves is left to the loop's scale-down.
        for s in ready:
            if await self._serving(s.node_name or ""):
                workflow.logger.info("successor %s keeps serving the pods that landed on it", s.node_name)
                continue
            await workflow.execute_activity(
                contracts.DELETE_NODE,
                DeleteNodeInput(
                    cluster=self.inp.removal.cluster,
                    provider=s.provider,
                    node_name=s.node_name,
                    provider_id=s.provider_id,
                ),
                **NODE_ACTIVITIES[contracts.DELETE_NODE].timeouts(),
                retry_policy=DELETE_RETRY,
            )

    async def _serving(self, node: str) -> bool:
        """Whether pods that need evicting run on ``node`` (read from the API server)."""
        check: NodeRemovalCheck = await workflow.execute_activity(
            contracts.CHECK_NODE_REMOVAL,
            NodeRemovalCheckInput(
                cluster=self.inp.removal.cluster,
                node=node,
                now=workflow.now().timestamp(),
                require_empty=True,
                settings=self.inp.removal.settings,
            ),
            result_type=NodeRemovalCheck,
            **NODE_ACTIVITIES[contracts.CHECK_NODE_REMOVAL].timeouts(),
            retry_policy=KUBE_RETRY,
        )
        return check.found and bool(check.pods_to_evict)

    async def _finish(self, phase: ScaleDownPhase, reason: str, message: str) -> ScaleDownStatus:
        self.status.phase, self.status.reason, self.status.message = phase, reason, message
        await self._publish()
        return self.status

    def _show(self) -> None:
        workflow.set_current_details(replacement_details(self.status))  # no command: not in history
        if self.inp.use_search_attributes:
            workflow.upsert_search_attributes(
                [
                    CLUSTER.value_set(self.inp.removal.cluster),
                    NODE.value_set(self.inp.removal.node),
                    PHASE.value_set(self.status.phase.value),
                ]
            )

    async def _take(self, chosen: list[str]) -> None:
        """A multi-node command planned: the chosen nodes are held, then the ones held for it but not
        chosen go back to the loop (their timers start again). In between the loop counts more nodes
        than the command disrupts, never fewer (a single-node fallback may choose a node it did not
        hold), so no evaluation in between starts what the budget does not allow."""
        released = [n for n in self.nodes if n not in chosen]
        release = self.status.model_copy(
            update={
                "phase": ScaleDownPhase.CANCELLED,
                "reason": NOT_WORTH_IT,
                "message": f"not in the consolidation of {', '.join(chosen)}",
            }
        )
        self.nodes = list(chosen)
        self.status.node = chosen[0]
        self.status.message = f"consolidating {', '.join(chosen)}: planning the successor"
        await self._publish()
        # Released first (before this), the loop counted fewer nodes than were disrupted in between, and
        # an evaluation then started a disruption beyond the budget (the consolidation bench, seed 11).
        if released:
            await self._tell(release, released)

    async def _publish(self) -> None:
        """Tell the loop (it follows these nodes as being removed) and the Web UI."""
        self._show()
        await self._tell(self.status)

    async def _tell(self, status: ScaleDownStatus, nodes: list[str] | None = None) -> None:
        """The status, for each node of the command (or of ``nodes``), to the loop."""
        parent = self.inp.removal.parent_workflow_id
        if not parent:
            return
        for node in self.nodes if nodes is None else nodes:
            try:
                await workflow.get_external_workflow_handle(parent).signal(
                    "scale_down_changed", status if node == status.node else status.model_copy(update={"node": node})
                )
            except FailureError:
                workflow.logger.warning("autoscaler %s did not take the update", parent)
