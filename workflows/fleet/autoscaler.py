"""FleetAutoscaler `fleet/<provider>/<region>`: keeps a provider region's data-plane clusters in
balance with its managed instances (seed 000: a new cluster for a type when no cluster can hold
its biggest size or free units fall under the slack; an empty cluster removed when the others still
cover the type).

Every interval (or at once when something changed): place waiting instances on the first
ready cluster with room; per instance type, ask the rules whether to start a DataPlaneCluster
child or mark one empty cluster deprovisioning; re-check clusters marked in an earlier round
(still empty, and a dry run of the scale-up says no) and tell them to delete themselves, or
bring them back to ready. Its registry lives in one state model carried across
continue-as-new (as columns, patch compact-registry: scaling.fleet.cluster_table); clusters report
their phase and capacity to it by signal. Clusters listed in dataplane-cluster-configuration reach
it through `register_clusters` in batches (the starter's), not in its input.

Instances: the region keeps per cluster the units placement needs, the
committed units per type, and a bounded queue of instances waiting for a cluster; which instances
exist and where each is placed is in the index shards (`workflows/fleet/index.py`). A create
claims the id in its shard first: an unknown id is queued and placed, a known one gets its
record's placement (a repeated create, also long after the placement). A delete removes the
record and frees what it held; a rejection goes through the shard so only an instance still on
that cluster is placed again (scaling/fleet/index.py has the invariants).

Decisions: where queued instances go, whether a cluster marked for removal is deleted, and the
evaluation run as activities whose inputs and results (what each read and decided,
scaling.fleet.decisions) are in the history; the loop acts on them.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.fleet import contracts
    from scaling.fleet.approvals import cluster_gate
    from scaling.fleet.capacity import TypeRules, type_rules
    from scaling.fleet.config import ManualCluster
    from scaling.fleet.contracts import (
        MAX_REGISTER_BATCH,
        UPDATE_DRAINING,
        ClusterRegistrations,
        CreateInstanceRequest,
        InstancePlacement,
        RejectedInstances,
    )
    from scaling.fleet.decisions import (
        PLACE_BATCH,
        PlacementFigures,
        Placements,
        Rechecks,
        placement_figures,
        recheck_figures,
    )
    from scaling.fleet.evaluation import RegionEvaluation, region_figures
    from scaling.fleet.index import (
        SIGNAL_INDEX_ANSWERS,
        SIGNAL_INDEX_OPS,
        IndexAnswer,
        IndexAnswers,
        IndexOp,
        IndexOps,
        InstanceIndexInput,
        group_by_shard,
        shard_workflow_id,
    )
    from scaling.fleet.lifecycle import ClusterReport, DataPlaneClusterInput
    from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance, TypeUnits
    from scaling.fleet.placement import (
        instance_quota,
        instance_units,
        reserved_instances,
        within_region_limit,
    )
    from scaling.fleet.pools import cluster_multi_az
    from scaling.fleet.region import (
        ClusterMessage,
        ClusterMessages,
        FleetAutoscalerInput,
        FleetAutoscalerState,
        RegionStatus,
        batch_by_cluster,
        carried_over,
        commit,
        fold_cluster_report,
        free_on_cluster,
        region_status,
        registry_of,
        release_removed,
        remember,
    )
    from scaling.fleet.scale_down import RemovalDecision
    from scaling.fleet.summaries import cluster_summary, region_details, region_summary
    from scaling.text import too_long
    from workflows.children import start_abandoned
    from workflows.details import show
    from workflows.fleet import metrics
    from workflows.fleet.activity_options import FLEET_DECISIONS
    from workflows.fleet.cluster import DataPlaneClusterWorkflow
    from workflows.fleet.index import InstanceIndexWorkflow
    from workflows.search import CLUSTER, PHASE, PROVIDER, REGION, fleet_attributes


# Patch id of release 0.2.0 whose marker its runs carry where they first decided (they took its
# new branch, the only one left): deprecated there, so they replay; removed in the release after.
DECISIONS_RECORDED = "fleet-decisions-recorded"
# workflow.patched id (added after 0.1.0): index shards start as the region first sends one an
# operation, not all at once when the region starts (a 30-instance region listed 64 shard
# workflows in the Web UI, burying the three that matter); runs from 0.1.0 start them all.
LAZY_INDEX_SHARDS = "lazy-index-shards"
# A decision is pure: it fails only when its worker dies; another worker takes it.
DECISION_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10))
RECENT_ANSWERS = 4096  # placements answered in this run, for repeats and the `instance` query (memory only)


@workflow.defn(name=contracts.AUTOSCALER_WORKFLOW)
class FleetAutoscalerWorkflow:
    @workflow.init
    def __init__(self, inp: FleetAutoscalerInput) -> None:
        self.settings = inp.settings
        self.config = inp.config
        self.state = inp.state or FleetAutoscalerState()
        if self.state.cluster_table is not None:  # carried as columns: the records the rules read
            self.state.clusters, self.state.cluster_table = registry_of(self.state), None
        self.rules: dict[str, TypeRules] = type_rules(inp.config, inp.settings.provider, inp.settings.region)
        self.wake = False
        self.marked = False  # workflow.deprecate_patch(DECISIONS_RECORDED) said in this run
        self.passes = self.passes_started = 0  # placement passes in this run (a create waits for the next)
        self.pass_wanted = 0  # the pass the latest waiting create needs (a round's end never swallows it)
        self.unplaced: PlacementFigures | None = None  # the last placement's figures when it placed none
        self.draining = False  # finishing handlers before continue-as-new
        # Memory only (rebuilt by replay): the index's answers the handlers wait for.
        self.claiming: set[str] = set()
        self.claimed: dict[str, ManagedInstance | None] = {}
        self.removing: set[str] = set()
        self.removed: dict[str, ManagedInstance | None] = {}
        self.recent: dict[str, InstancePlacement] = {}

    # -- queries ------------------------------------------------------------------------
    @workflow.query(name=contracts.QUERY_REGION_STATUS)
    def status(self) -> RegionStatus:
        return region_status(self.settings, self.state)

    @workflow.query
    def instance(self, instance_id: str) -> InstancePlacement | None:
        """Where the instance is, as far as the region knows: a queued instance or one answered in
        this run (the shard knows the rest: `activities.fleet.lookup.find_instance`)."""
        st = self.state
        queued = next((i for i in st.queue if i.id == instance_id), None)
        return placement_of(queued) if queued else self.recent.get(instance_id)

    def _start_indexing(self) -> None:
        """A region's first run fixes its number of index shards."""
        if not self.state.index_shards:
            self.state.index_shards = self.settings.index_shards

    def _mark_decisions(self) -> None:
        """Where a 0.2.0 run asked patch fleet-decisions-recorded (once per run)."""
        if not self.marked:
            self.marked = True
            workflow.deprecate_patch(DECISIONS_RECORDED)

    # -- clusters report ----------------------------------------------------------------
    @workflow.signal(name=contracts.SIGNAL_CLUSTER_CHANGED)
    def cluster_changed(self, report: ClusterReport) -> None:
        fold_cluster_report(self.state, report, self._listed(report.cluster_id), workflow.now())
        self.wake = True

    @workflow.signal(name=contracts.SIGNAL_INSTANCES_REJECTED)
    def instances_rejected(self, rejected: RejectedInstances) -> None:
        """The cluster's agent refused these (the cluster has dropped them): free their units
        there and place them on another cluster, never that one again."""
        st = self.state
        self._start_indexing()
        for iid, why in rejected.messages.items():
            st.index_outbox.append(IndexOp(kind="reject", instance_id=iid, cluster_id=rejected.cluster_id, reason=why))
        self.wake = True

    @workflow.signal(name=SIGNAL_INDEX_ANSWERS)
    def index_answers(self, batch: IndexAnswers) -> None:
        """A shard's answers, in the order it applied the operations."""
        for answer in batch.answers:
            if answer.kind == "claim" and answer.instance_id in self.claiming:
                self.claimed[answer.instance_id] = answer.found
            elif answer.kind == "remove" and answer.instance_id in self.removing:
                self.removed[answer.instance_id] = answer.found
            elif answer.kind == "reject" and answer.found is not None:
                self._requeue(answer)
        self.wake = True

    def _requeue(self, answer: IndexAnswer) -> None:
        """The shard took a rejected instance off its cluster: free it there and queue it."""
        st, inst = self.state, answer.found
        assert inst is not None
        free_on_cluster(st.clusters.get(answer.cluster_id), inst)
        st.queue.append(inst)
        self._remember_answer(placement_of(inst))
        why = inst.message or "no reason"
        remember(st, f"{inst.id}: rejected by {answer.cluster_id} ({why}), placing it elsewhere")

    # -- registered clusters -----------------------------------------------------------
    @workflow.update(name=contracts.UPDATE_REGISTER_CLUSTER)
    async def register_cluster(self, cluster: ManualCluster) -> str:
        await self._register(cluster)
        return cluster.cluster_id

    @register_cluster.validator
    def _validate_register(self, cluster: ManualCluster) -> None:
        problem = self._registration_problem(cluster, len(self.state.clusters))
        if problem:
            raise ValueError(problem)

    @workflow.update(name=contracts.UPDATE_REGISTER_CLUSTERS)
    async def register_clusters(self, batch: ClusterRegistrations) -> list[str]:
        """Several clusters at once (a dataplane-cluster-configuration file, in batches): their
        children start together, in one workflow task."""
        await self._register_all(batch.clusters)
        return [c.cluster_id for c in batch.clusters]

    @register_clusters.validator
    def _validate_register_batch(self, batch: ClusterRegistrations) -> None:
        if len(batch.clusters) > MAX_REGISTER_BATCH:
            raise ValueError(f"clusters: {len(batch.clusters)} in one update, at most {MAX_REGISTER_BATCH}")
        known = set(self.state.clusters)
        for i, cluster in enumerate(batch.clusters):
            problem = self._registration_problem(cluster, len(known))
            if problem:
                raise ValueError(f"clusters[{i}].{problem}")
            known.add(cluster.cluster_id)

    def _registration_problem(self, cluster: ManualCluster, registered: int) -> str:
        """Why the region refuses to register `cluster` ("field: reason"), or ""."""
        s = self.settings
        if (cluster.cloud_provider, cluster.region) != (s.provider, s.region):
            return (
                f"region: cluster {cluster.cluster_id} is in {cluster.cloud_provider}/{cluster.region}, "
                f"not {s.provider}/{s.region}"
            )
        # Types the region does not offer are left out (upstream's default lists both types);
        # a cluster with none of the region's types could never take an instance.
        if not any(t in self.rules for t in cluster.instance_types()):
            return f"supported_instance_type: none of {cluster.supported_instance_type!r} is supported in {s.region}"
        if cluster.cluster_id not in self.state.clusters and registered >= s.max_clusters:
            return f"cluster_id: the registry holds its maximum of {s.max_clusters} clusters"
        return ""

    def _listed(self, cluster_id: str) -> ManualCluster | None:
        s = self.settings
        return next((c for c in self.config.manual_clusters(s.provider, s.region) if c.cluster_id == cluster_id), None)

    async def _register(self, mc: ManualCluster) -> None:
        """Start a DataPlaneCluster for a cluster that exists (no OCM create): it waits for its
        agent at once. Registering a known cluster again does nothing."""
        inp = self._registration(mc)
        if inp is not None:
            await self._start_child(inp)

    async def _register_all(self, listed: list[ManualCluster]) -> None:
        """Register clusters together: every record first, then their children's starts at once."""
        starts = [inp for inp in map(self._registration, listed) if inp is not None]
        await asyncio.gather(*(self._start_child(inp) for inp in starts))

    def _registration(self, mc: ManualCluster) -> DataPlaneClusterInput | None:
        """Add a cluster that exists to the registry; its DataPlaneCluster's input (None: known)."""
        st, s = self.state, self.settings
        if mc.cluster_id in st.clusters:
            return None
        types = [t for t in mc.instance_types() if t in self.rules]
        inp = DataPlaneClusterInput(
            cluster_id=mc.cluster_id,
            provider=s.provider,
            region=s.region,
            instance_type=types[0],
            instance_types=types,
            multi_az=mc.multi_az,
            manual=True,
            cluster_type=mc.cluster_type,
            schedulable=mc.schedulable,
            instance_limit=mc.kafka_instance_limit,
            fleetshard_parameters=s.fleetshard_parameters,
            reserved=reserved_instances(mc.cluster_id, ClusterPhase.READY, types, self.config),
            timeouts=s.cluster_timeouts,
            parent_workflow_id=workflow.info().workflow_id,
            use_search_attributes=s.use_search_attributes,
            reports_per_run=s.cluster_reports_per_run,
        )
        st.clusters[mc.cluster_id] = ClusterRecord(
            id=mc.cluster_id,
            instance_type=types[0],
            types={t: TypeUnits() for t in types},
            manual=True,
            cluster_type=mc.cluster_type,
            schedulable=mc.schedulable,
            instance_limit=mc.kafka_instance_limit,
        )
        remember(st, f"{mc.cluster_id}: registered ({', '.join(types)}, {mc.cluster_type})")
        return inp

    # -- instances ----------------------------------------------------------------------
    @workflow.update(name=contracts.UPDATE_CREATE_INSTANCE)
    async def create_instance(self, req: CreateInstanceRequest) -> InstancePlacement:
        self._start_indexing()
        return await self._create_indexed(req)

    async def _create_indexed(self, req: CreateInstanceRequest) -> InstancePlacement:
        st = self.state
        while req.id in self.claiming or req.id in self.removing:
            await workflow.wait_condition(lambda: req.id not in self.claiming and req.id not in self.removing)
        known = self.recent.get(req.id)
        if known is not None:
            _same_instance(req, known.instance_type, known.size)
            return known
        units = instance_units(self.config, req.instance_type, req.size) or 0
        inst = ManagedInstance(
            id=req.id,
            instance_type=req.instance_type,
            size=req.size,
            units=units,
            quota=instance_quota(self.config, req.instance_type, req.size),
        )
        commit(st, inst, 1)  # held while the shard answers, so concurrent creates see the limit
        self.claiming.add(req.id)
        st.index_outbox.append(IndexOp(kind="claim", instance=inst))
        self.wake = True
        await workflow.wait_condition(lambda: req.id in self.claimed)
        found = self.claimed.pop(req.id)
        if found is not None:  # the id exists: its placement, not a second instance
            self.claiming.discard(req.id)
            commit(st, inst, -1)
            _same_instance(req, found.instance_type, found.size)
            return self._remember_answer(placement_of(found))
        st.queue.append(inst)
        # Placed by the loop's next placement pass (one decision for every create waiting); the id
        # stays claimed until then, so a repeat waits for this answer.
        self._mark_decisions()
        wanted = self.pass_wanted = self.passes_started + 1
        self.wake = True
        await workflow.wait_condition(lambda: self.passes >= wanted)
        answer = self._remember_answer(placement_of(inst))
        self.claiming.discard(req.id)
        return answer

    def _remember_answer(self, placement: InstancePlacement) -> InstancePlacement:
        self.recent.pop(placement.id, None)  # the latest answer goes last: the oldest leave first
        self.recent[placement.id] = placement
        if len(self.recent) > RECENT_ANSWERS:
            del self.recent[next(iter(self.recent))]
        return placement

    @create_instance.validator
    def _validate_create(self, req: CreateInstanceRequest) -> None:
        self._validate_create_indexed(req)

    def _refuse_while_draining(self) -> None:
        if self.draining:
            raise ApplicationError(
                f"{workflow.info().workflow_id} is continuing as new: send again", type=UPDATE_DRAINING
            )

    def _validate_create_indexed(self, req: CreateInstanceRequest) -> None:
        st, s = self.state, self.settings
        self._refuse_while_draining()
        known = self.recent.get(req.id)
        if known is not None:
            _same_instance(req, known.instance_type, known.size)
            return  # answered before: answered again
        rules = self.rules.get(req.instance_type)
        if rules is None:
            raise ValueError(f"instance_type: {req.instance_type!r} is not supported in {s.region}")
        units = instance_units(self.config, req.instance_type, req.size)
        if units is None:
            raise ValueError(f"size: {req.size!r} is not a size of {req.instance_type!r}")
        if st.instance_count >= s.max_instances:
            raise ValueError(f"id: the region holds its maximum of {s.max_instances} instances (max_instances)")
        if len(st.queue) >= s.max_waiting:
            raise ValueError(
                f"id: {len(st.queue)} instances already wait for a cluster in {s.region} (max_waiting={s.max_waiting})"
            )
        if not within_region_limit(units, st.committed.get(req.instance_type, 0), rules.limit):
            raise ValueError(f"instance_type: the region's {req.instance_type} limit of {rules.limit} units is reached")

    @workflow.update(name=contracts.UPDATE_DELETE_INSTANCE)
    async def delete_instance(self, instance_id: str) -> bool:
        self._start_indexing()
        return await self._delete_indexed(instance_id)

    @delete_instance.validator
    def _validate_delete(self, instance_id: str) -> None:
        if too_long("id", instance_id, 256):
            raise ValueError(too_long("id", instance_id, 256))
        self._refuse_while_draining()

    async def _delete_indexed(self, instance_id: str) -> bool:
        st = self.state
        while instance_id in self.claiming or instance_id in self.removing:
            await workflow.wait_condition(lambda: instance_id not in self.claiming and instance_id not in self.removing)
        self.removing.add(instance_id)
        st.index_outbox.append(IndexOp(kind="remove", instance_id=instance_id))
        self.wake = True
        await workflow.wait_condition(lambda: instance_id in self.removed)
        found = self.removed.pop(instance_id)
        self.removing.discard(instance_id)
        self.recent.pop(instance_id, None)
        if found is None:
            return False
        release_removed(self.state, found)
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
        self._start_indexing()
        if not self.state.index_started and not workflow.patched(LAZY_INDEX_SHARDS):
            await self._start_index()  # every shard at once, as 0.1.0 did
        listed = self.config.manual_clusters(s.provider, s.region)
        for k in range(0, len(listed), MAX_REGISTER_BATCH):
            await self._register_all(listed[k : k + MAX_REGISTER_BATCH])  # known ones are skipped
        while True:
            self.state.rounds += 1
            self._mark_decisions()
            await self._place_queue()
            if not self.state.paused:
                await self._recheck()
                await self._evaluate()
            await self._flush_outbox()
            iterations += 1
            status = self.status()
            show(region_summary(self.settings), region_details(status))  # no command: not in history
            metrics.region_observed(status)  # nor this
            if workflow.info().is_continue_as_new_suggested() or iterations >= s.iterations_per_run:
                await self._finish_handlers()  # and the outbox is flushed
                self.state.runs += 1
                carried = FleetAutoscalerInput(settings=s, config=self.config, state=self.state)
                workflow.continue_as_new(carried_over(carried))
            self.wake = False
            try:
                await workflow.wait_condition(
                    lambda: (
                        self.wake
                        or bool(self.state.outbox)
                        or bool(self.state.index_outbox)
                        or self.pass_wanted > self.passes
                    ),
                    timeout=timedelta(seconds=s.scan_interval_s),
                )
            except TimeoutError:
                pass

    async def _start_index(self) -> None:
        """Start every index shard (runs before LAZY_INDEX_SHARDS)."""
        await asyncio.gather(*(self._start_shard(k) for k in range(self.state.index_shards)))
        self.state.index_started = True

    async def _start_shard(self, k: int) -> None:
        """Start index shard k (an abandoned child: it outlives the region's runs)."""
        region_id = workflow.info().workflow_id
        # A region started again over its shards: they answer the new run.
        await start_abandoned(
            InstanceIndexWorkflow.run,
            InstanceIndexInput(region_workflow_id=region_id, shard=k),
            id=shard_workflow_id(region_id, k),
            static_summary=f"InstanceIndex shard {k} of {region_id}",
        )

    async def _shards_for(self, shards: dict[int, IndexOps]) -> dict[int, IndexOps]:
        """The batches to send, starting the shards they go to that are not started yet
        (LAZY_INDEX_SHARDS). A shard never started holds no record, so a cluster-wide reject,
        the one operation sent to every shard, skips it rather than starting it."""
        st = self.state
        if st.index_started:
            return shards
        new = [
            k
            for k, ops in shards.items()
            if k not in st.index_shards_started and any(op.kind != "reject" or op.instance_id for op in ops.ops)
        ]
        await asyncio.gather(*(self._start_shard(k) for k in new))
        st.index_shards_started = sorted({*st.index_shards_started, *new})
        return {k: ops for k, ops in shards.items() if k in st.index_shards_started}

    async def _finish_handlers(self) -> None:
        """Before continue-as-new: the handlers wait for the index's answers, so keep sending
        what is owed until every handler has finished and nothing is owed. Meanwhile new
        creations and deletions are refused as not processed (`UPDATE_DRAINING`): callers send
        them again, and they reach the next run (else a steady stream would keep a handler
        unfinished at every turn)."""
        st = self.state
        self.draining = True
        while True:
            if self.wake or self.pass_wanted > self.passes:
                await self._place_queue()  # a create waits for a placement pass
            await self._flush_outbox()
            if workflow.all_handlers_finished() and not st.outbox and not st.index_outbox:
                return
            self.wake = False
            await workflow.wait_condition(
                lambda: (
                    workflow.all_handlers_finished()
                    or bool(st.outbox)
                    or bool(st.index_outbox)
                    or self.wake
                    or self.pass_wanted > self.passes
                )
            )

    async def _place_queue(self) -> None:
        """One placement pass: the queue in batches, each a recorded decision (skipped when its
        figures are those of the last batch that placed nothing); creates wait for it."""
        st = self.state
        self.passes_started += 1
        batches = [st.queue[k : k + PLACE_BATCH] for k in range(0, len(st.queue), PLACE_BATCH)]
        for batch in batches:
            figures = placement_figures(list(st.clusters.values()), batch, self.rules)
            if not figures.clusters.id or figures == self.unplaced:
                continue  # nowhere to go, or the same question as last time: the same answer
            done: Placements = await self._decide(contracts.PLACE_INSTANCES, figures, Placements)
            self.unplaced = figures if not done.placed else None
            queued = {inst.id: inst for inst in st.queue}
            for iid, cid in done.placed.items():
                inst, rec = queued.get(iid), st.clusters.get(cid)
                # Still queued (not deleted meanwhile) and its cluster still serving: the decision stands.
                if inst is not None and rec is not None and rec.phase == ClusterPhase.READY:
                    self._place(inst, cid)
                    queued.pop(iid)
            st.queue = [inst for inst in st.queue if inst.id in queued]
        self.passes += 1

    def _place(self, inst: ManagedInstance, cid: str) -> None:
        """Count a placement on its cluster, and tell the cluster and the index."""
        st = self.state
        rec = st.clusters[cid]
        rec.types[inst.instance_type].consumed_units += inst.units
        rec.instances += 1
        inst.cluster_id, inst.namespace = cid, inst.namespace or inst.id
        st.outbox.append(ClusterMessage(cluster_id=cid, signal=contracts.SIGNAL_INSTANCE_PLACED, instance=inst))
        st.index_outbox.append(IndexOp(kind="set", instance=inst))
        self._remember_answer(placement_of(inst))

    async def _recheck(self) -> None:
        """Seed 000: once marked, check again (empty, and the region keeps enough capacity)
        before deleting; otherwise back to ready. The re-check waits `recheck_delay_s` after the
        mark, so capacity reports and an operator's block can still change the answer."""
        due = self._due_rechecks()
        if not due:
            return
        st = self.state
        known = [rec for rec in due if rec.instance_type in self.rules]
        decisions: dict[str, RemovalDecision] = {}
        if known:
            figures = recheck_figures(known, list(st.clusters.values()), self.rules)
            done: Rechecks = await self._decide(contracts.RECHECK_REMOVALS, figures, Rechecks)
            decisions = {d.cluster_id: d for d in done.decisions}
        for rec in due:
            now = st.clusters.get(rec.id)
            if now is rec and rec.phase == ClusterPhase.DEPROVISIONING and not rec.delete_sent:  # unchanged meanwhile
                self._apply_recheck(rec, decisions.get(rec.id))

    def _due_rechecks(self) -> list[ClusterRecord]:
        """Clusters marked deprovisioning whose re-check delay has passed."""
        st, now = self.state, workflow.now()
        due = []
        for rec in st.clusters.values():
            if rec.phase != ClusterPhase.DEPROVISIONING or rec.delete_sent:
                continue
            marked = st.marked_at.get(rec.id)
            if marked is not None and now - marked < timedelta(seconds=self.settings.recheck_delay_s):
                continue
            due.append(rec)
        return due

    def _apply_recheck(self, rec: ClusterRecord, decision: RemovalDecision | None) -> None:
        """Delete a cluster whose re-check passed; bring one back to ready otherwise (None: no
        rules for its type)."""
        st, now = self.state, workflow.now()
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
        """The evaluation as a recorded decision; when the registry's figures are those the last
        one read, its outcome stands (an idle round records nothing)."""
        st, scaling = self.state, self.config.dynamic_scaling
        figures = region_figures(
            list(st.clusters.values()),
            self.rules,
            scale_up_enabled=scaling.enable_dynamic_data_plane_scale_up,
            scale_down_enabled=scaling.enable_dynamic_data_plane_scale_down,
        )
        if figures == st.evaluated:
            await self._act_on(RegionEvaluation(types=st.last_evaluation))
            return
        done: RegionEvaluation = await self._decide(contracts.EVALUATE_REGION, figures, RegionEvaluation)
        st.evaluated = figures
        await self._act_on(done)

    async def _decide(self, name: str, figures: Any, result_type: type) -> Any:
        """A decision as an activity: its figures and its outcome are in the history."""
        return await workflow.execute_activity(
            name, figures, result_type=result_type, **FLEET_DECISIONS[name].timeouts(), retry_policy=DECISION_RETRY
        )

    async def _act_on(self, ev: RegionEvaluation) -> None:
        """Start a cluster per type the evaluation wants one for (unless backing off or at
        max_clusters), mark its removals deprovisioning (or hold them for approval)."""
        st, s, now = self.state, self.settings, workflow.now()
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
            rec = st.clusters.get(cid)
            if rec is None or rec.phase != ClusterPhase.READY:
                continue  # changed since the evaluation read it: the next one decides again
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
        st.clusters[cid] = ClusterRecord(
            id=cid, instance_type=itype, types={itype: TypeUnits()}, phase=ClusterPhase.ACCEPTED
        )
        st.clusters_created += 1
        remember(st, f"{cid}: created for {itype}")
        await self._start_child(inp)

    async def _start_child(self, inp: DataPlaneClusterInput) -> None:
        s = self.settings
        attrs = None
        if s.use_search_attributes:
            attrs = TypedSearchAttributes(
                [
                    SearchAttributePair(PROVIDER, s.provider),
                    SearchAttributePair(REGION, s.region),
                    SearchAttributePair(PHASE, ClusterPhase.ACCEPTED.value),
                    SearchAttributePair(CLUSTER, inp.cluster_id),
                ]
            )
        # Clusters outlive a continue-as-new or a restart of the region's loop; a replayed start of
        # a child that exists is left to it: it reports to us anyway.
        await start_abandoned(
            DataPlaneClusterWorkflow.run,
            inp,
            id=contracts.cluster_workflow_id(inp.cluster_id),
            search_attributes=attrs,
            static_summary=cluster_summary(inp),
        )

    async def _flush_outbox(self) -> None:
        """Send what the clusters are owed, in order; a cluster that is gone is skipped. One
        signal per cluster with all it is owed, all clusters at once: a burst costs a signal per
        cluster, not per instance."""
        st = self.state
        if st.index_outbox:
            # the index's operations and the clusters' batches go out together (one round trip)
            shards = group_by_shard(st.index_outbox, st.index_shards)
            batches = batch_by_cluster(st.outbox)
            st.index_outbox, st.outbox = [], []
            shards = await self._shards_for(shards)
            await asyncio.gather(
                *(self._send_ops(k, ops) for k, ops in shards.items()),
                *(self._send_batch(cid, batch) for cid, batch in batches.items()),
            )
            return
        if st.outbox:
            batches = batch_by_cluster(st.outbox)
            st.outbox = []
            await asyncio.gather(*(self._send_batch(cid, batch) for cid, batch in batches.items()))

    async def _send_ops(self, shard: int, ops: IndexOps) -> None:
        handle = workflow.get_external_workflow_handle(shard_workflow_id(workflow.info().workflow_id, shard))
        try:
            await handle.signal(SIGNAL_INDEX_OPS, ops)
        except FailureError:
            workflow.logger.warning("index shard %d did not take %d operations", shard, len(ops.ops))

    async def _send_batch(self, cluster_id: str, batch: ClusterMessages) -> None:
        handle = workflow.get_external_workflow_handle(contracts.cluster_workflow_id(cluster_id))
        try:
            await handle.signal(contracts.SIGNAL_CLUSTER_MESSAGES, batch)
        except FailureError:
            workflow.logger.warning("cluster %s did not take %d messages", cluster_id, len(batch.messages))


def _same_instance(req: CreateInstanceRequest, instance_type: str, size: str) -> None:
    if (instance_type, size) != (req.instance_type, req.size):
        raise ApplicationError(
            f"id: instance {req.id} exists with type {instance_type} size {size}", non_retryable=True
        )


def placement_of(inst: ManagedInstance) -> InstancePlacement:
    return InstancePlacement(
        id=inst.id,
        instance_type=inst.instance_type,
        size=inst.size,
        units=inst.units,
        cluster_id=inst.cluster_id,
        waiting=not inst.cluster_id,
    )
