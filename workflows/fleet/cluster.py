"""DataPlaneCluster `fleet/cluster/<id>`: one data-plane cluster's lifecycle (seed 000: created at
OCM, terraformed, serving once its agent reports ready, deleted when the region no longer needs it).

cluster_accepted -> cluster_provisioning (OCM install) -> cluster_provisioned (terraforming:
machine pool per type, ingress DNS, identity provider, resources, addons until ready) ->
waiting_for_kas_fleetshard_operator <-> ready (the agent's reports, an update) ->
deprovisioning (marked by the region's autoscaler; `restore` takes it back) -> cleanup ->
deleted. A step that does not finish within its durable timeout ends in `failed`, and the
cluster is then deleted at OCM and cleaned up all the same.

Every OCM create carries the cluster id as its idempotency key, so a retried create (or one
re-run after a worker restart) finds the OCM cluster the first one made.

Gated steps (scaling.fleet.approvals): creating the cluster at OCM and deleting it wait, when the
region's settings say so, for the `approve`/`deny` update or their durable timeout's default.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.approvals import AWAITING_APPROVAL, ApprovalState, applies_default, decision_refused
    from scaling.fleet import contracts
    from scaling.fleet.approvals import CREATE, DELETE, gate_reason
    from scaling.fleet.contracts import (
        AddonInput,
        AddonInstallation,
        AddonRef,
        AgentClusterView,
        AgentStatusReport,
        CleanupInput,
        ClusterResourcesInput,
        ClusterResourcesResult,
        CreateOcmClusterInput,
        IdentityProviderInput,
        IdentityProviderResult,
        IngressDns,
        InstanceStatusReport,
        MachinePoolResult,
        ManagedInstance,
        OcmCluster,
        OcmClusterRef,
        RejectedInstances,
        ocm_cluster_name,
    )
    from scaling.fleet.instances import (
        MAX_DELETED_KEPT,
        apply_instance_statuses,
        latest_ready_versions,
        mark_deleted,
    )
    from scaling.fleet.lifecycle import (
        STEP_ADDONS,
        STEP_IDENTITY_PROVIDER,
        STEP_INGRESS_DNS,
        STEP_MACHINE_POOLS,
        STEP_RESOURCES,
        ClusterReport,
        DataPlaneClusterInput,
        DataPlaneClusterState,
        apply_report,
        cluster_report,
        report_problems,
        set_phase,
    )
    from scaling.fleet.models import ClusterPhase, TypeCapacity
    from scaling.fleet.pools import machine_pool_input
    from scaling.fleet.region import ClusterMessages
    from scaling.fleet.summaries import cluster_details, cluster_summary, placed_units
    from workflows.approvals import ApprovalUpdates
    from workflows.details import show
    from workflows.fleet.activity_options import FLEET_ACTIVITIES
    from workflows.search import fleet_attributes

# OCM calls: retry 429/5xx with backoff; a refused token or request ends the step at once.
OCM_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    non_retryable_error_types=list(contracts.NON_RETRYABLE_OCM_ERRORS),
)
# Deleting and cleaning up must eventually happen: retry without a cap.
REMOVAL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=2))
CALL_TIMEOUT = timedelta(minutes=1)
ADDONS = (contracts.STRIMZI_ADDON, contracts.FLEETSHARD_ADDON)


class StepFailed(Exception):
    """A lifecycle step gave up (error at OCM, or its durable timeout passed). Raised and
    caught inside the workflow only."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message


@workflow.defn(name=contracts.CLUSTER_WORKFLOW)
class DataPlaneClusterWorkflow(ApprovalUpdates):
    @workflow.init
    def __init__(self, inp: DataPlaneClusterInput) -> None:
        self.inp = inp
        self.state = inp.state or DataPlaneClusterState(
            cluster_id=inp.cluster_id,
            provider=inp.provider,
            region=inp.region,
            instance_type=inp.instance_type,
            multi_az=inp.multi_az,
            ocm_name=ocm_cluster_name(inp.cluster_id),
            # every type a registered cluster runs, so its agent's capacity for each is kept
            capacity={t: TypeCapacity() for t in inp.instance_types},
        )
        self.changed = True  # something to tell the autoscaler and the Web UI
        self.published: ClusterReport | None = None  # what the autoscaler was last told
        self.reports_this_run = 0
        self.decided = self.approved = False  # the current wait for approval
        self.rejected: dict[str, str] = {}  # instance id -> reason, owed to the region

    # -- queries ----------------------------------------------------------------------
    @workflow.query(name=contracts.QUERY_CLUSTER_STATUS)
    def status(self) -> DataPlaneClusterState:
        return self.state

    @workflow.query(name=contracts.QUERY_AGENT_VIEW)
    def agent_view(self) -> AgentClusterView:
        st = self.state
        return AgentClusterView(
            cluster_id=st.cluster_id,
            provider=st.provider,
            region=st.region,
            phase=st.phase,
            capacity=st.capacity,
            instances=st.instances,
            reserved=self.inp.reserved if st.phase == ClusterPhase.READY else [],
            versions=latest_ready_versions(st.strimzi),
        )

    # -- the agent's report -----------------------------------------------------------
    @workflow.update(name=contracts.UPDATE_AGENT_STATUS)
    def report_agent_status(self, report: AgentStatusReport) -> None:
        # Outside waiting/ready the report changes nothing (upstream ignores it too).
        if apply_report(self.state, report, workflow.now()):
            self.changed = True  # phase or capacity moved: the autoscaler's registry wants it
        self.reports_this_run += 1

    @report_agent_status.validator
    def _validate_report(self, report: AgentStatusReport) -> None:
        problems = report_problems(report, self.state)
        if problems:
            raise ValueError("; ".join(problems))

    @workflow.update(name=contracts.UPDATE_INSTANCE_STATUSES)
    def report_instance_statuses(self, reports: dict[str, InstanceStatusReport]) -> None:
        """The agent's per-instance reports: placed -> ready, deleting -> gone (see
        scaling.fleet.instances). Unknown and reserved ids change nothing, as upstream."""
        st = self.state
        st.instances, gone = apply_instance_statuses(st.instances, reports)
        st.deleted_instances = [*st.deleted_instances, *gone][-MAX_DELETED_KEPT:]
        refused = {i.id: i.message for i in st.instances if i.phase == "rejected"}
        if refused and self.inp.parent_workflow_id:
            # Dropped here before the region re-places them: never on two clusters at once.
            st.instances = [i for i in st.instances if i.id not in refused]
            self.rejected.update(refused)
            self.changed = True
        self.reports_this_run += 1

    # -- approval gates (approve/deny: workflows.approvals) ------------------------------
    def _decision_refused(self, note: Any) -> str:
        approval = self.state.approval
        waiting = approval is not None and not approval.decision and not self.decided
        return decision_refused(waiting, approval, workflow.info().workflow_id, note)

    def _decided(self, approve: bool, note: Any) -> str:
        return self._decide(approve, "operator", str(note or ""))

    def _decide(self, approve: bool, by: str, note: str) -> str:
        approval = self.state.approval
        assert approval is not None
        self.decided, self.approved = True, approve
        approval.decision, approval.by, approval.note = ("approved" if approve else "denied"), by, note
        return f"{workflow.info().workflow_id}: {approval.decision}"

    async def _approved(self, step: str) -> bool:
        """Whether `step` may go ahead: at once when not gated, else once approved (by an
        operator, or by the timeout's default). The wait is a durable timer."""
        st, gate = self.state, self.inp.approval
        reason = gate_reason(gate, step, st.cluster_id, st.instance_type, st.region)
        if not reason or gate is None:
            return True
        self.decided = self.approved = False
        st.approval = ApprovalState(
            reason=reason,
            step=step,
            deadline=workflow.now() + timedelta(seconds=gate.timeout_s),
            default=gate.default,
        )
        st.message = f"awaiting approval: {reason}"
        self.changed = True
        await self._publish()  # (which sets GrowthPhase to the cluster's phase on a change: first)
        self._search_phase(AWAITING_APPROVAL)
        try:
            await workflow.wait_condition(lambda: self.decided, timeout=timedelta(seconds=gate.timeout_s))
        except TimeoutError:
            self._decide(applies_default(gate.default), "timeout", f"no decision within {gate.timeout_s:g} s")
        self._search_phase(st.phase.value)
        note = f": {st.approval.note}" if st.approval.note else ""
        st.message = f"{step} {st.approval.decision} by {st.approval.by}{note}"
        self.changed = True
        return self.approved

    def _search_phase(self, phase: str) -> None:
        st = self.state
        if self.inp.use_search_attributes:
            workflow.upsert_search_attributes(fleet_attributes(st.provider, st.region, phase, st.cluster_id))

    # -- the region's autoscaler --------------------------------------------------------
    @workflow.signal(name=contracts.SIGNAL_DEPROVISION)
    def deprovision(self) -> None:
        if self.state.phase in (ClusterPhase.READY, ClusterPhase.WAITING):
            set_phase(self.state, ClusterPhase.DEPROVISIONING, workflow.now(), "marked for removal")
            self.changed = True

    @workflow.signal(name=contracts.SIGNAL_RESTORE)
    def restore(self) -> None:
        st = self.state
        if st.phase == ClusterPhase.DEPROVISIONING and not st.deletion_confirmed:
            back = ClusterPhase.READY if st.agent_ready else ClusterPhase.WAITING
            set_phase(st, back, workflow.now(), "removal called off")
            self.changed = True

    @workflow.signal(name=contracts.SIGNAL_DELETE)
    def delete(self) -> None:
        if self.state.phase == ClusterPhase.DEPROVISIONING:
            self.state.deletion_confirmed = True
            self.changed = True

    @workflow.signal(name=contracts.SIGNAL_INSTANCE_PLACED)
    def instance_placed(self, instance: ManagedInstance) -> None:
        mine = self.state.instances
        if all(i.id != instance.id for i in mine):
            mine.append(instance)

    @workflow.signal(name=contracts.SIGNAL_INSTANCE_RELEASED)
    def instance_released(self, instance_id: str) -> None:
        # ManagedKafka spec.deleted: the agent removes it, then reports it Deleted
        self.state.instances = mark_deleted(self.state.instances, instance_id)

    @workflow.signal(name=contracts.SIGNAL_CLUSTER_MESSAGES)
    def cluster_messages(self, batch: ClusterMessages) -> None:
        """What the region owed this cluster since its last round, in the order it was owed."""
        for msg in batch.messages:
            if msg.signal == contracts.SIGNAL_INSTANCE_PLACED and msg.instance is not None:
                self.instance_placed(msg.instance)
            elif msg.signal == contracts.SIGNAL_INSTANCE_RELEASED:
                self.instance_released(msg.instance_id)
            elif msg.signal == contracts.SIGNAL_DEPROVISION:
                self.deprovision()
            elif msg.signal == contracts.SIGNAL_RESTORE:
                self.restore()
            elif msg.signal == contracts.SIGNAL_DELETE:
                self.delete()
        self._show()  # placements change the units used at once, before the agent's next report

    # -- the lifecycle ------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: DataPlaneClusterInput) -> DataPlaneClusterState:
        st = self.state
        if st.accepted_at is None:
            st.accepted_at = workflow.now()
            set_phase(st, ClusterPhase.ACCEPTED, st.accepted_at, "accepted")
        if st.phase == ClusterPhase.ACCEPTED and not st.ocm_id and not await self._approved(CREATE):
            # Nothing exists at OCM yet: failed, so the region backs off this type (failure_backoff_s).
            st.failed_step, st.finished_at = "approval", workflow.now()
            set_phase(st, ClusterPhase.FAILED, st.finished_at, st.message)
            await self._publish()
            return st
        try:
            if inp.manual and st.phase == ClusterPhase.ACCEPTED:
                await self._registered()
            if st.phase in (ClusterPhase.ACCEPTED, ClusterPhase.PROVISIONING):
                await self._provision()
            if st.phase == ClusterPhase.PROVISIONED:
                await self._terraform()
            if st.phase in (ClusterPhase.WAITING, ClusterPhase.READY, ClusterPhase.DEPROVISIONING):
                await self._serve()  # returns once deletion is confirmed (or continues as new)
        except StepFailed as failed:
            st.failed_step = failed.step
            set_phase(st, ClusterPhase.FAILED, workflow.now(), str(failed))
            await self._publish()
        await self._remove()
        return st

    async def _registered(self) -> None:
        """A cluster that exists already (registered, not created): straight to waiting for
        its agent; no OCM create, no terraforming."""
        st = self.state
        st.waiting_since = workflow.now()
        set_phase(st, ClusterPhase.WAITING, st.waiting_since, "registered; waiting for the agent")
        await self._publish()

    async def _provision(self) -> None:
        st, t = self.state, self.inp.timeouts
        set_phase(st, ClusterPhase.PROVISIONING, workflow.now(), "creating the cluster at OCM")
        await self._publish()
        deadline = workflow.now() + timedelta(seconds=t.provisioning_s)
        machines = self.inp.cluster_machines
        assert machines is not None, "a created cluster has its machines"
        created: OcmCluster = await self._call(
            "provisioning",
            deadline,
            contracts.CREATE_OCM_CLUSTER,
            CreateOcmClusterInput(
                cluster_id=st.cluster_id,
                provider=st.provider,
                region=st.region,
                multi_az=st.multi_az,
                compute_machine_type=machines.compute_machine_type,
                default_min_nodes=machines.compute_node_autoscaling.min_compute_nodes,
                default_max_nodes=machines.compute_node_autoscaling.max_compute_nodes,
                openshift_version=self.inp.openshift_version,
            ),
            OcmCluster,
        )
        st.ocm_id, st.ocm_name = created.ocm_id, created.name or st.ocm_name
        while True:
            st.ocm_state = created.state
            if created.state == "ready":
                break
            if created.state in ("error", "gone", "uninstalling"):  # none of them becomes ready
                raise StepFailed("provisioning", f"OCM cluster is {created.state}: {created.message}".rstrip(": "))
            await self._sleep_until_next_poll(deadline, "provisioning", f"OCM cluster still {created.state}")
            created = await self._call("provisioning", deadline, contracts.GET_OCM_CLUSTER, self._ref(), OcmCluster)
        set_phase(st, ClusterPhase.PROVISIONED, workflow.now(), "terraforming")
        await self._publish()

    async def _terraform(self) -> None:
        """Each step once, in order; `steps_done` survives continue-as-new and restarts."""
        st, inp = self.state, self.inp
        steps = {
            STEP_MACHINE_POOLS: self._machine_pools,
            STEP_INGRESS_DNS: self._ingress_dns,
            STEP_IDENTITY_PROVIDER: self._identity_provider,
            STEP_RESOURCES: self._resources,
            STEP_ADDONS: self._addons,
        }
        for name, step in steps.items():
            if name in st.steps_done:
                continue
            await step(workflow.now() + timedelta(seconds=inp.timeouts.step_s))
            st.steps_done.append(name)
        st.waiting_since = workflow.now()
        set_phase(st, ClusterPhase.WAITING, st.waiting_since, "terraformed; waiting for the agent")
        await self._publish()

    async def _machine_pools(self, deadline: datetime) -> None:
        st, inp = self.state, self.inp
        assert inp.type_machines is not None, "a created cluster has its machines"
        spec = machine_pool_input(st.ocm_id, st.cluster_id, st.instance_type, inp.type_machines, st.multi_az)
        pool: MachinePoolResult = await self._call(
            STEP_MACHINE_POOLS, deadline, contracts.CREATE_MACHINE_POOL, spec, MachinePoolResult
        )
        # Seed 000: max_nodes per instance type is stored once the pool exists.
        current = st.capacity.get(st.instance_type, TypeCapacity())
        st.capacity[st.instance_type] = current.model_copy(update={"max_nodes": pool.max_nodes})

    async def _ingress_dns(self, deadline: datetime) -> None:
        dns: IngressDns = await self._call(
            STEP_INGRESS_DNS, deadline, contracts.ENSURE_INGRESS_DNS, self._ref(), IngressDns
        )
        self.state.dns_name = dns.dns_name

    async def _identity_provider(self, deadline: datetime) -> None:
        st = self.state
        idp: IdentityProviderResult = await self._call(
            STEP_IDENTITY_PROVIDER,
            deadline,
            contracts.ENSURE_IDENTITY_PROVIDER,
            IdentityProviderInput(ocm_id=st.ocm_id, cluster_id=st.cluster_id),
            IdentityProviderResult,
        )
        st.idp_id = idp.idp_id

    async def _resources(self, deadline: datetime) -> None:
        st = self.state
        applied: ClusterResourcesResult = await self._call(
            STEP_RESOURCES,
            deadline,
            contracts.APPLY_CLUSTER_RESOURCES,
            ClusterResourcesInput(
                ocm_id=st.ocm_id,
                cluster_id=st.cluster_id,
                ingress_dns_name=st.dns_name,
                instance_types=[st.instance_type],
            ),
            ClusterResourcesResult,
        )
        st.syncset_id = applied.syncset_id

    async def _addons(self, deadline: datetime) -> None:
        """Install each addon and wait for it to be ready before the next (strimzi first: the
        fleetshard needs its operator)."""
        st = self.state
        for addon in ADDONS:
            if st.addons.get(addon) == "ready":
                continue
            params = self.inp.fleetshard_parameters if addon == contracts.FLEETSHARD_ADDON else {}
            got: AddonInstallation = await self._call(
                STEP_ADDONS,
                deadline,
                contracts.INSTALL_ADDON,
                AddonInput(ocm_id=st.ocm_id, cluster_id=st.cluster_id, addon_id=addon, parameters=params),
                AddonInstallation,
            )
            ref = AddonRef(ocm_id=st.ocm_id, cluster_id=st.cluster_id, addon_id=addon)
            while True:
                st.addons[addon] = got.state
                if got.state == "ready":
                    break
                if got.state in ("failed", "deleting", "deleted", "absent"):
                    raise StepFailed(STEP_ADDONS, f"addon {addon} is {got.state}: {got.message}".rstrip(": "))
                await self._sleep_until_next_poll(deadline, STEP_ADDONS, f"addon {addon} still {got.state}")
                got = await self._call(STEP_ADDONS, deadline, contracts.GET_ADDON, ref, AddonInstallation)

    async def _serve(self) -> None:
        """waiting <-> ready on the agent's reports, until the autoscaler confirms deletion.
        Until its first Ready report the agent has `timeouts.agent_s`."""
        st, inp = self.state, self.inp
        while True:
            if self.changed:
                await self._publish()
            if self.rejected:
                await self._hand_back_rejected()
            if st.deletion_confirmed and not await self._approved(DELETE):
                st.deletion_confirmed = False
                back = ClusterPhase.READY if st.agent_ready else ClusterPhase.WAITING
                set_phase(st, back, workflow.now(), st.message)
                await self._publish(deletion_denied=True)  # the region blocks its deletion
                continue
            if st.deletion_confirmed:
                return
            if st.phase == ClusterPhase.READY and st.ready_at is None:
                st.ready_at = workflow.now()
            if self.reports_this_run >= inp.reports_per_run or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self.changed:
                    await self._publish()
                workflow.continue_as_new(inp.model_copy(update={"state": st}))
            timeout: timedelta | None = None
            if st.ready_at is None and st.phase == ClusterPhase.WAITING:
                since = st.waiting_since or workflow.now()
                timeout = since + timedelta(seconds=inp.timeouts.agent_s) - workflow.now()
                if timeout <= timedelta(0):
                    raise StepFailed(ClusterPhase.WAITING.value, "the agent never reported Ready")
            try:
                await workflow.wait_condition(
                    lambda: self.changed or st.deletion_confirmed or self.reports_this_run >= inp.reports_per_run,
                    timeout=timeout,
                )
            except TimeoutError:
                pass

    async def _remove(self) -> None:
        """Delete at OCM (found by external id if the create never answered), wait until it is
        gone, remove growth's external resources. Runs after a confirmed deletion and after a
        failure alike, so nothing is left behind."""
        st, t = self.state, self.inp.timeouts
        failed = st.phase == ClusterPhase.FAILED
        if self.inp.manual:
            # Registered, not created: its owner keeps the cluster; growth made nothing to clean.
            st.cleaned_up, st.finished_at = True, workflow.now()
            await self._publish()
            return
        if not failed:
            st.message = "deleting the cluster at OCM"
            await self._publish()
        await self._removal_call(contracts.DELETE_OCM_CLUSTER, self._ref(), OcmCluster)
        poll = t.poll_s
        next_resend = workflow.now() + timedelta(seconds=t.deletion_s)
        while True:
            gone: OcmCluster = await self._removal_call(contracts.GET_OCM_CLUSTER, self._ref(), OcmCluster)
            st.ocm_state = gone.state
            if gone.state == "gone":
                break
            if workflow.now() >= next_resend:
                # Still there long after the delete: ask again, and poll less often.
                await self._removal_call(contracts.DELETE_OCM_CLUSTER, self._ref(), OcmCluster)
                next_resend = workflow.now() + timedelta(seconds=t.deletion_s)
                poll = min(poll * 2, 600.0)
            await workflow.sleep(timedelta(seconds=poll))
        if not failed:
            set_phase(st, ClusterPhase.CLEANUP, workflow.now(), "removing external resources")
            await self._publish()
        await self._removal_call(
            contracts.CLEANUP_CLUSTER_RESOURCES, CleanupInput(cluster_id=st.cluster_id, ocm_id=st.ocm_id), None
        )
        st.cleaned_up = True
        st.finished_at = workflow.now()
        if failed:
            st.message += " (cleaned up)"
        else:
            set_phase(st, ClusterPhase.DELETED, st.finished_at, "deleted")
        await self._publish()

    # -- helpers ------------------------------------------------------------------------
    def _ref(self) -> OcmClusterRef:
        return OcmClusterRef(ocm_id=self.state.ocm_id, cluster_id=self.state.cluster_id)

    async def _call(self, step: str, deadline: datetime, name: str, arg: Any, result_type: type) -> Any:
        """One OCM activity within the step's deadline; giving up fails the step."""
        left = deadline - workflow.now()
        if left <= timedelta(0):
            raise StepFailed(step, f"timed out before {name}")
        try:
            return await workflow.execute_activity(
                name,
                arg,
                result_type=result_type,
                **FLEET_ACTIVITIES[name].timeouts(min(CALL_TIMEOUT, left)),
                schedule_to_close_timeout=left,
                retry_policy=OCM_RETRY,
            )
        except ActivityError as err:
            raise StepFailed(step, f"{name}: {_cause(err)}") from None

    async def _removal_call(self, name: str, arg: Any, result_type: type | None) -> Any:
        return await workflow.execute_activity(
            name,
            arg,
            result_type=result_type,
            **FLEET_ACTIVITIES[name].timeouts(CALL_TIMEOUT),
            retry_policy=REMOVAL_RETRY,
        )

    async def _sleep_until_next_poll(self, deadline: datetime, step: str, waiting_for: str) -> None:
        left = deadline - workflow.now()
        if left <= timedelta(0):
            raise StepFailed(step, f"timed out: {waiting_for}")
        await workflow.sleep(min(timedelta(seconds=self.inp.timeouts.poll_s), left))
        if workflow.now() >= deadline:
            raise StepFailed(step, f"timed out: {waiting_for}")

    def _show(self) -> None:
        """The Web UI's details: the last report, with the units growth placed here, the number
        `growth fleet status` shows (the region's registry counts the same placements)."""
        if self.published is not None:
            st = self.state
            show(
                cluster_summary(self.inp), cluster_details(self.published, placed_units(st.instances, st.instance_type))
            )

    async def _publish(self, deletion_denied: bool = False) -> None:
        """Tell the region's autoscaler (by workflow id: its latest run) and the Web UI."""
        self.changed = False
        st, inp = self.state, self.inp
        report = cluster_report(st, inp).model_copy(update={"deletion_denied": deletion_denied})
        if report == self.published:
            return  # agents report often; only changes cost history
        phase_changed = self.published is None or self.published.phase != report.phase
        self.published = report
        self._show()
        if inp.use_search_attributes and phase_changed:
            workflow.upsert_search_attributes(fleet_attributes(st.provider, st.region, st.phase.value, st.cluster_id))
        if not inp.parent_workflow_id:
            return
        parent = workflow.get_external_workflow_handle(inp.parent_workflow_id)
        try:
            await parent.signal(contracts.SIGNAL_CLUSTER_CHANGED, report)
        except FailureError:
            # The autoscaler is gone (terminated); the cluster's lifecycle goes on regardless.
            workflow.logger.warning("autoscaler %s did not take the report", inp.parent_workflow_id)

    async def _hand_back_rejected(self) -> None:
        refused, self.rejected = self.rejected, {}
        parent = workflow.get_external_workflow_handle(self.inp.parent_workflow_id)
        try:
            await parent.signal(
                contracts.SIGNAL_INSTANCES_REJECTED,
                RejectedInstances(cluster_id=self.state.cluster_id, messages=refused),
            )
        except FailureError:
            workflow.logger.warning("autoscaler %s did not take the rejected instances", self.inp.parent_workflow_id)


def _cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err)
