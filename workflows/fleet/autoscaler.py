"""FleetAutoscaler `fleet/<provider>/<region>`: keeps a provider region's data-plane clusters in
balance with its managed instances (seed 000).

Every interval (or at once when something changed): place waiting instances on the first
ready cluster with room; per instance type, ask the rules whether to start a DataPlaneCluster
child or mark one empty cluster deprovisioning; re-check clusters marked in an earlier round
(still empty, and a dry run of the scale-up says no) and tell them to delete themselves, or
bring them back to ready. Its registry lives in one state model carried across
continue-as-new; clusters report their phase and capacity to it by signal.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import FailureError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from scaling.fleet import contracts
    from scaling.fleet.approvals import cluster_gate
    from scaling.fleet.capacity import TypeRules, type_rules
    from scaling.fleet.contracts import CreateInstanceRequest, InstancePlacement
    from scaling.fleet.evaluation import evaluate_region
    from scaling.fleet.lifecycle import ClusterReport, DataPlaneClusterInput
    from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance
    from scaling.fleet.placement import (
        instance_quota,
        instance_units,
        place_instance,
        reserved_instances,
        within_region_limit,
    )
    from scaling.fleet.pools import cluster_multi_az
    from scaling.fleet.region import (
        ClusterMessage,
        FleetAutoscalerInput,
        FleetAutoscalerState,
        RegionStatus,
        merge_cluster_report,
        region_status,
        remember,
    )
    from scaling.fleet.scale_down import removal_decision
    from scaling.fleet.summaries import cluster_summary, region_details
    from workflows.fleet.cluster import DataPlaneClusterWorkflow
    from workflows.search import CLUSTER, PHASE, PROVIDER, REGION, fleet_attributes


@workflow.defn(name=contracts.AUTOSCALER_WORKFLOW)
class FleetAutoscalerWorkflow:
    @workflow.init
    def __init__(self, inp: FleetAutoscalerInput) -> None:
        self.settings = inp.settings
        self.config = inp.config
        self.state = inp.state or FleetAutoscalerState()
        self.rules: dict[str, TypeRules] = type_rules(inp.config, inp.settings.provider, inp.settings.region)
        self.wake = False

    # -- queries ------------------------------------------------------------------------
    @workflow.query(name=contracts.QUERY_REGION_STATUS)
    def status(self) -> RegionStatus:
        return region_status(self.settings, self.state)

    @workflow.query
    def instance(self, instance_id: str) -> InstancePlacement | None:
        found = self.state.instances.get(instance_id)
        return _placement(found) if found else None

    # -- clusters report ----------------------------------------------------------------
    @workflow.signal(name=contracts.SIGNAL_CLUSTER_CHANGED)
    def cluster_changed(self, report: ClusterReport) -> None:
        st = self.state
        before = st.clusters.get(report.cluster_id)
        after = merge_cluster_report(before, report)
        if after is not None:
            st.clusters[report.cluster_id] = after
        elif before is not None:
            del st.clusters[report.cluster_id]
            st.marked_at.pop(report.cluster_id, None)
            if report.phase == ClusterPhase.FAILED:
                st.clusters_failed += 1
                st.last_failure_at[report.instance_type] = workflow.now()
            else:
                st.clusters_deleted += 1
            remember(st, f"{report.cluster_id} {report.phase.value}: {report.message}")
            self._unplace_from(report.cluster_id)
        if report.deletion_denied:
            st.marked_at.pop(report.cluster_id, None)
            remember(st, f"{report.cluster_id}: {report.message}; deletion blocked until approve-deletion")
        self.wake = True

    # -- instances ----------------------------------------------------------------------
    @workflow.update(name=contracts.UPDATE_CREATE_INSTANCE)
    def create_instance(self, req: CreateInstanceRequest) -> InstancePlacement:
        st = self.state
        existing = st.instances.get(req.id)
        if existing is None:
            units = instance_units(self.config, req.instance_type, req.size) or 0
            st.instances[req.id] = ManagedInstance(
                id=req.id,
                instance_type=req.instance_type,
                size=req.size,
                units=units,
                quota=instance_quota(self.config, req.instance_type, req.size),
            )
            st.waiting.append(req.id)
            self._place_waiting()
            self.wake = True
        return _placement(st.instances[req.id])

    @create_instance.validator
    def _validate_create(self, req: CreateInstanceRequest) -> None:
        existing = self.state.instances.get(req.id)
        if existing is not None:
            if (existing.instance_type, existing.size) != (req.instance_type, req.size):
                raise ValueError(
                    f"id: instance {req.id} exists with type {existing.instance_type} size {existing.size}"
                )
            return  # the same request again: answered with its placement
        rules = self.rules.get(req.instance_type)
        if rules is None:
            raise ValueError(f"instance_type: {req.instance_type!r} is not supported in {self.settings.region}")
        units = instance_units(self.config, req.instance_type, req.size)
        if units is None:
            raise ValueError(f"size: {req.size!r} is not a size of {req.instance_type!r}")
        if len(self.state.instances) >= self.settings.max_instances:
            raise ValueError(f"id: the region holds its maximum of {self.settings.max_instances} instances")
        committed = sum(i.units for i in self.state.instances.values() if i.instance_type == req.instance_type)
        if not within_region_limit(units, committed, rules.limit):
            raise ValueError(f"instance_type: the region's {req.instance_type} limit of {rules.limit} units is reached")

    @workflow.update(name=contracts.UPDATE_DELETE_INSTANCE)
    def delete_instance(self, instance_id: str) -> bool:
        st = self.state
        inst = st.instances.pop(instance_id, None)
        if inst is None:
            return False
        if instance_id in st.waiting:
            st.waiting.remove(instance_id)
        rec = st.clusters.get(inst.cluster_id)
        if rec is not None:
            rec.consumed_units = max(0, rec.consumed_units - inst.units)
            rec.instances = max(0, rec.instances - 1)
            st.outbox.append(
                ClusterMessage(cluster_id=rec.id, signal=contracts.SIGNAL_INSTANCE_RELEASED, instance_id=instance_id)
            )
        self.wake = True
        return True

    # -- operators ----------------------------------------------------------------------
    @workflow.update(name=contracts.UPDATE_APPROVE_DELETION)
    def approve_deletion(self, cluster_id: str) -> bool:
        rec = self.state.clusters[cluster_id]
        rec.deletion_approved, rec.deletion_blocked = True, False
        remember(self.state, f"{cluster_id}: deletion approved")
        self.wake = True
        return True

    @workflow.update(name=contracts.UPDATE_BLOCK_DELETION)
    def block_deletion(self, cluster_id: str) -> bool:
        rec = self.state.clusters[cluster_id]
        rec.deletion_blocked, rec.deletion_approved = True, False
        remember(self.state, f"{cluster_id}: deletion blocked")
        self.wake = True
        return True

    @approve_deletion.validator
    def _validate_approve(self, cluster_id: str) -> None:
        self._known_cluster(cluster_id)

    @block_deletion.validator
    def _validate_block(self, cluster_id: str) -> None:
        self._known_cluster(cluster_id)

    def _known_cluster(self, cluster_id: str) -> None:
        if cluster_id not in self.state.clusters:
            raise ValueError(
                f"cluster_id: no cluster {cluster_id!r} in {self.settings.provider}/{self.settings.region}"
            )

    @workflow.signal(name=contracts.SIGNAL_PAUSE)
    def pause(self) -> None:
        self.state.paused = True
        self.wake = True

    @workflow.signal(name=contracts.SIGNAL_RESUME)
    def resume(self) -> None:
        self.state.paused = False
        self.wake = True

    # -- the loop -----------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: FleetAutoscalerInput) -> None:
        s = self.settings
        if s.use_search_attributes:
            workflow.upsert_search_attributes(fleet_attributes(s.provider, s.region, "running"))
        iterations = 0
        while True:
            self.state.rounds += 1
            self._place_waiting()
            if not self.state.paused:
                self._recheck_deprovisioning()
                await self._evaluate()
            await self._flush_outbox()
            iterations += 1
            workflow.set_current_details(region_details(self.status()))  # no command: not in history
            if workflow.info().is_continue_as_new_suggested() or iterations >= s.iterations_per_run:
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._flush_outbox()
                self.state.runs += 1
                workflow.continue_as_new(FleetAutoscalerInput(settings=s, config=self.config, state=self.state))
            self.wake = False
            try:
                await workflow.wait_condition(
                    lambda: self.wake or bool(self.state.outbox), timeout=timedelta(seconds=s.interval_s)
                )
            except TimeoutError:
                pass

    def _place_waiting(self) -> None:
        st = self.state
        clusters = list(st.clusters.values())
        still: list[str] = []
        for iid in st.waiting:
            inst = st.instances.get(iid)
            rules = self.rules.get(inst.instance_type) if inst else None
            if inst is None or rules is None:
                continue
            cid = place_instance(inst.units, clusters, rules)
            if cid is None:
                still.append(iid)
                continue
            rec = st.clusters[cid]
            rec.consumed_units += inst.units
            rec.instances += 1
            inst.cluster_id, inst.namespace = cid, inst.namespace or iid
            st.outbox.append(ClusterMessage(cluster_id=cid, signal=contracts.SIGNAL_INSTANCE_PLACED, instance=inst))
        st.waiting = still

    def _unplace_from(self, cluster_id: str) -> None:
        """A cluster left the registry: anything placed there waits for a cluster again."""
        for inst in self.state.instances.values():
            if inst.cluster_id == cluster_id:
                inst.cluster_id = ""
                self.state.waiting.append(inst.id)

    def _recheck_deprovisioning(self) -> None:
        """Seed 000: once marked, check again (empty, and the region keeps enough capacity)
        before deleting; otherwise back to ready. The re-check waits `recheck_delay_s` after the
        mark, so capacity reports and an operator's block can still change the answer."""
        st, now = self.state, workflow.now()
        for rec in list(st.clusters.values()):
            if rec.phase != ClusterPhase.DEPROVISIONING or rec.delete_sent:
                continue
            marked = st.marked_at.get(rec.id)
            if marked is not None and now - marked < timedelta(seconds=self.settings.recheck_delay_s):
                continue
            rules = self.rules.get(rec.instance_type)
            decision = removal_decision(rec, list(st.clusters.values()), rules, rechecking=True) if rules else None
            if decision is not None and decision.removable:
                rec.delete_sent = True
                st.last_removal_at[rec.instance_type] = now
                st.outbox.append(ClusterMessage(cluster_id=rec.id, signal=contracts.SIGNAL_DELETE))
                remember(st, f"{rec.id}: re-check passed, deleting")
            else:
                rec.phase = ClusterPhase.READY
                rec.deletion_approved = False
                st.marked_at.pop(rec.id, None)
                st.outbox.append(ClusterMessage(cluster_id=rec.id, signal=contracts.SIGNAL_RESTORE))
                why = decision.reason.value if decision else "unknown instance type"
                remember(st, f"{rec.id}: re-check failed ({why}), back to ready")

    async def _evaluate(self) -> None:
        st, s, now = self.state, self.settings, workflow.now()
        scaling = self.config.dynamic_scaling
        ev = evaluate_region(
            list(st.clusters.values()),
            self.rules,
            scale_up_enabled=scaling.enable_dynamic_data_plane_scale_up,
            scale_down_enabled=scaling.enable_dynamic_data_plane_scale_down,
        )
        st.evaluations += 1
        st.last_evaluation = ev.types
        st.awaiting_approval = []
        for itype in ev.scale_up_types():
            failed_at = st.last_failure_at.get(itype)
            if failed_at is not None and now - failed_at < timedelta(seconds=s.failure_backoff_s):
                continue
            if len(st.clusters) >= s.max_clusters:
                remember(st, f"{itype}: scale-up needed but the registry holds max_clusters={s.max_clusters}")
                continue
            await self._start_cluster(itype)
        for cid in ev.removals():
            rec = st.clusters[cid]
            if s.deletion_requires_approval and not rec.deletion_approved:
                st.awaiting_approval.append(cid)
                continue
            rec.phase = ClusterPhase.DEPROVISIONING
            st.marked_at[cid] = now
            st.outbox.append(ClusterMessage(cluster_id=cid, signal=contracts.SIGNAL_DEPROVISION))
            remember(st, f"{cid}: empty and not needed, marked deprovisioning")

    async def _start_cluster(self, itype: str) -> None:
        st, s, cfg = self.state, self.settings, self.config
        machines = cfg.machines(s.provider, itype)
        provider_machines = cfg.dynamic_scaling.compute_machine_per_cloud_provider.get(s.provider)
        if machines is None or provider_machines is None:
            remember(st, f"{itype}: no machines configured for {s.provider}; cannot create a cluster")
            return
        st.seq += 1
        # A random suffix (deterministic in the workflow) keeps ids unique if the loop is ever
        # started afresh: OCM's idempotency key must never match an old cluster.
        cid = f"{s.region}-{itype}-{st.seq}-{workflow.uuid4().hex[:6]}"
        removed_at = st.last_removal_at.get(itype)
        if removed_at is not None and workflow.now() - removed_at < timedelta(seconds=s.flap_window_s):
            st.flaps += 1
        inp = DataPlaneClusterInput(
            cluster_id=cid,
            provider=s.provider,
            region=s.region,
            instance_type=itype,
            multi_az=cluster_multi_az(itype, machines),
            cluster_machines=provider_machines.cluster_wide_workload,
            type_machines=machines,
            openshift_version=cfg.dynamic_scaling.new_data_plane_openshift_version,
            fleetshard_parameters=s.fleetshard_parameters,
            reserved=reserved_instances(cid, ClusterPhase.READY, [itype], cfg),
            timeouts=s.cluster_timeouts,
            parent_workflow_id=workflow.info().workflow_id,
            use_search_attributes=s.use_search_attributes,
            reports_per_run=s.cluster_reports_per_run,
            approval=cluster_gate(
                s.approve_cluster_create, s.approve_cluster_delete, s.approval_timeout_s, s.approval_default
            ),
        )
        st.clusters[cid] = ClusterRecord(id=cid, instance_type=itype, phase=ClusterPhase.ACCEPTED)
        st.clusters_created += 1
        remember(st, f"{cid}: created for {itype}")
        attrs = None
        if s.use_search_attributes:
            attrs = TypedSearchAttributes(
                [
                    SearchAttributePair(PROVIDER, s.provider),
                    SearchAttributePair(REGION, s.region),
                    SearchAttributePair(PHASE, ClusterPhase.ACCEPTED.value),
                    SearchAttributePair(CLUSTER, cid),
                ]
            )
        try:
            await workflow.start_child_workflow(
                DataPlaneClusterWorkflow.run,
                inp,
                id=contracts.cluster_workflow_id(cid),
                # Clusters outlive a continue-as-new or a restart of the region's loop.
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                search_attributes=attrs,
                static_summary=cluster_summary(inp),  # the Web UI's workflow list
            )
        except WorkflowAlreadyStartedError:
            pass  # replayed start of a child that exists: it reports to us anyway

    async def _flush_outbox(self) -> None:
        """Send what the clusters are owed, in order; a cluster that is gone is skipped."""
        st = self.state
        while st.outbox:
            msg = st.outbox[0]
            handle = workflow.get_external_workflow_handle(contracts.cluster_workflow_id(msg.cluster_id))
            arg = msg.instance if msg.instance is not None else (msg.instance_id or None)
            try:
                if arg is None:
                    await handle.signal(msg.signal)
                else:
                    await handle.signal(msg.signal, arg)
            except FailureError:
                workflow.logger.warning("cluster %s did not take %s", msg.cluster_id, msg.signal)
            st.outbox.pop(0)


def _placement(inst: ManagedInstance) -> InstancePlacement:
    return InstancePlacement(
        id=inst.id,
        instance_type=inst.instance_type,
        size=inst.size,
        units=inst.units,
        cluster_id=inst.cluster_id,
        waiting=not inst.cluster_id,
    )
