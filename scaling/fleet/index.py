"""The region's instance index: which instances exist and where each is placed, held in N shard
workflows (`fleet/<provider>/<region>/instances/<k>`, k = a stable hash of the instance id) instead
of the region's own state.

Why: the region's state crosses history in every continue-as-new, so it must not grow with the
fleet. At 250 bytes an instance, a region holding every instance passed Temporal's 2 MB payload
limit at about 8,000 instances. The region keeps what placement needs (per cluster units and
counts, committed units per type, a bounded queue of waiting instances); a shard holds 1/N of the
instances (at 64 shards and 50,000 instances, about 800 records, well under 256 KB).

The invariants, and what keeps them:
- Never placed twice. The shard is the one writer of an id's record and applies operations in
  the order the region sent them: `claim` creates the record only if the id is unknown and
  answers the existing record otherwise (a repeated create gets the instance's placement, also
  after continue-as-new and long after it was placed). `set` only updates a record that exists,
  so a placement update that arrives after a removal cannot bring an instance back.
- Never lost. A waiting instance is in the region's queue (carried across continue-as-new); a
  placed one is in its shard and on its cluster. A rejected placement goes through the shard
  (`reject`): only a record still on that cluster is taken off it and queued again, so a rejection
  that crosses a deletion does not revive the instance.
- Found. The shard's `instance` query answers where an instance is (`find_instance`).
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from scaling.fleet.models import MAX_REJECTED_BY, CompactInstance, ManagedInstance

DEFAULT_SHARDS = 64
SIGNAL_INDEX_OPS = "index_ops"  # region -> shard: IndexOps
SIGNAL_INDEX_ANSWERS = "index_answers"  # shard -> region: IndexAnswers
QUERY_INSTANCE = "instance"  # shard: instance id -> ManagedInstance | None

OpKind = Literal["claim", "set", "remove", "reject"]


def shard_of(instance_id: str, shards: int) -> int:
    """The shard that holds `instance_id`: stable across processes (not Python's salted hash)."""
    return int.from_bytes(hashlib.sha1(instance_id.encode()).digest()[:4], "big") % shards


def shard_workflow_id(region_workflow_id: str, shard: int) -> str:
    return f"{region_workflow_id}/instances/{shard}"


class IndexOp(BaseModel):
    """One operation on a shard. `claim`: create the record (`instance`) unless the id exists;
    answered. `set`: replace an existing record with `instance`. `remove`: drop the record;
    answered. `reject`: the agent of `cluster_id` refused the instance (`reason`); the record is
    taken off the cluster if it is still there, and answered (empty `instance_id`: every record
    on that cluster, when a cluster left the registry)."""

    kind: OpKind
    instance_id: str = ""
    instance: ManagedInstance | None = None
    cluster_id: str = ""
    reason: str = ""


class IndexOps(BaseModel):
    """The operations the region owes one shard, applied in order."""

    ops: list[IndexOp]


class IndexAnswer(BaseModel):
    """A shard's answer to one claim, remove or reject: the record before a claim or remove
    (None = unknown id, i.e. a claim created it), or the record a reject took off its cluster."""

    kind: OpKind
    instance_id: str
    found: ManagedInstance | None = None
    cluster_id: str = ""  # a reject's: the cluster the instance was taken off


class IndexAnswers(BaseModel):
    answers: list[IndexAnswer]


class InstanceIndexInput(BaseModel):
    region_workflow_id: str
    shard: int
    records: dict[str, CompactInstance] = Field(default_factory=dict)


def apply_index_ops(records: dict[str, ManagedInstance], ops: list[IndexOp]) -> list[IndexAnswer]:
    """Apply `ops` to a shard's `records` in order (mutating them) and return the answers owed."""
    answers: list[IndexAnswer] = []
    for op in ops:
        if op.kind == "claim" and op.instance is not None:
            found = records.get(op.instance.id)
            if found is None:
                records[op.instance.id] = op.instance
            answers.append(IndexAnswer(kind="claim", instance_id=op.instance.id, found=found))
        elif op.kind == "set" and op.instance is not None:
            if op.instance.id in records:
                records[op.instance.id] = op.instance
        elif op.kind == "remove":
            answers.append(
                IndexAnswer(kind="remove", instance_id=op.instance_id, found=records.pop(op.instance_id, None))
            )
        elif op.kind == "reject":
            ids = (
                [op.instance_id] if op.instance_id else [i for i, r in records.items() if r.cluster_id == op.cluster_id]
            )
            for iid in ids:
                rec = records.get(iid)
                if rec is None or rec.cluster_id != op.cluster_id:
                    continue  # deleted meanwhile, or already moved: nothing to place again
                moved = rec.model_copy(
                    update={
                        "cluster_id": "",
                        "phase": "placed",
                        "message": op.reason,
                        "rejected_by": [*rec.rejected_by, op.cluster_id][-MAX_REJECTED_BY:]
                        if op.instance_id
                        else rec.rejected_by,
                    }
                )
                records[iid] = moved
                answers.append(IndexAnswer(kind="reject", instance_id=iid, found=moved, cluster_id=op.cluster_id))
    return answers


def group_by_shard(ops: list[IndexOp], shards: int) -> dict[int, IndexOps]:
    """The ops as one ordered batch per shard (a cluster-wide reject goes to every shard)."""
    out: dict[int, IndexOps] = {}
    for op in ops:
        iid = op.instance.id if op.instance is not None else op.instance_id
        targets = range(shards) if op.kind == "reject" and not iid else [shard_of(iid, shards)]
        for k in targets:
            out.setdefault(k, IndexOps(ops=[])).ops.append(op)
    return out
