"""InstanceIndex `fleet/<provider>/<region>/instances/<k>`: one shard of a region's instance index
(scaling.fleet.index says why and what it keeps). Started by the region as an abandoned child;
it applies the region's operations in order, answers claims, removals and rejections by signal,
and answers the `instance` query. Its records are 1/N of the region's instances."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from scaling.fleet.index import (
        QUERY_INSTANCE,
        SIGNAL_INDEX_ANSWERS,
        SIGNAL_INDEX_OPS,
        IndexAnswer,
        IndexAnswers,
        IndexOps,
        InstanceIndexInput,
        apply_index_ops,
    )
    from scaling.fleet.models import ManagedInstance

INDEX_WORKFLOW = "InstanceIndex"
OPS_PER_RUN = 2000  # batches of operations per run before continue-as-new (bounds the history)


@workflow.defn(name=INDEX_WORKFLOW)
class InstanceIndexWorkflow:
    @workflow.init
    def __init__(self, inp: InstanceIndexInput) -> None:
        self.inp = inp
        self.records = dict(inp.records)
        self.owed: list[IndexAnswer] = []
        self.batches = 0

    @workflow.query(name=QUERY_INSTANCE)
    def instance(self, instance_id: str) -> ManagedInstance | None:
        return self.records.get(instance_id)

    @workflow.signal(name=SIGNAL_INDEX_OPS)
    def index_ops(self, batch: IndexOps) -> None:
        self.owed.extend(apply_index_ops(self.records, batch.ops))
        self.batches += 1

    @workflow.run
    async def run(self, inp: InstanceIndexInput) -> None:
        region = workflow.get_external_workflow_handle(inp.region_workflow_id)
        while True:
            await workflow.wait_condition(
                lambda: bool(self.owed) or self.batches >= OPS_PER_RUN or workflow.info().is_continue_as_new_suggested()
            )
            if self.owed:
                owed, self.owed = self.owed, []
                try:
                    await region.signal(SIGNAL_INDEX_ANSWERS, IndexAnswers(answers=owed))
                except FailureError:
                    workflow.logger.warning("region %s did not take %d answers", inp.region_workflow_id, len(owed))
                continue
            await workflow.wait_condition(workflow.all_handlers_finished)
            if not self.owed:
                workflow.continue_as_new(inp.model_copy(update={"records": self.records}))
