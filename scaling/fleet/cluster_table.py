"""The region's registry of clusters as columns: the form it crosses continue-as-new in (patch
compact-registry).

Why: the registry is carried in the region's continue-as-new input. As a dict of ClusterRecord
it costs about 285 bytes a cluster (field names repeated in every record, phase names of up to
36 characters): 285 KB at 1,000 clusters (`make bench-fleet`). As columns, field names appear
once, phases and instance types are indexes into a vocabulary, and the booleans are bits: about
40 bytes a cluster. In memory the region keeps its ClusterRecords (what the rules read); only
the input it carries over is a ClusterTable.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field, model_validator

from scaling.fleet.models import ClusterPhase, ClusterRecord, TypeUnits

# One bit each in `flags`, in this order (a new flag goes at the end: recorded tables keep theirs).
FLAGS = ("manual", "enterprise", "unschedulable", "deletion_blocked", "deletion_approved", "delete_sent")
NOT_REPORTED = -1  # max_units before the agent's first report (agents never report negatives)


class ClusterTable(BaseModel):
    """Every cluster of the registry, one entry per column, in the registry's order. `units`
    holds, per cluster, flat (type index, max_units, consumed_units) triples, one per type it
    runs."""

    phases: list[str] = Field(default_factory=list)  # vocabulary: phase values used below
    types: list[str] = Field(default_factory=list)  # vocabulary: instance types used below
    id: list[str] = Field(default_factory=list)
    phase: list[int] = Field(default_factory=list)  # index into phases
    created_for: list[int] = Field(default_factory=list)  # index into types (ClusterRecord.instance_type)
    flags: list[int] = Field(default_factory=list)  # FLAGS bits
    instances: list[int] = Field(default_factory=list)
    limit: list[int] = Field(default_factory=list)  # instance_limit (-1 = none)
    units: list[list[int]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _columns_line_up(self) -> ClusterTable:
        n = len(self.id)
        for name in ("phase", "created_for", "flags", "instances", "limit", "units"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name}: {len(getattr(self, name))} entries for {n} clusters")
        return self


def _index(vocabulary: list[str], word: str) -> int:
    if word not in vocabulary:
        vocabulary.append(word)
    return vocabulary.index(word)


def _flags(rec: ClusterRecord) -> int:
    on = (
        rec.manual,
        rec.cluster_type == "enterprise",
        not rec.schedulable,
        rec.deletion_blocked,
        rec.deletion_approved,
        rec.delete_sent,
    )
    return sum(1 << bit for bit, set_ in enumerate(on) if set_)


def to_table(records: Iterable[ClusterRecord]) -> ClusterTable:
    """The records as columns, in their order."""
    t = ClusterTable()
    for rec in records:
        t.id.append(rec.id)
        t.phase.append(_index(t.phases, rec.phase.value))
        t.created_for.append(_index(t.types, rec.instance_type))
        t.flags.append(_flags(rec))
        t.instances.append(rec.instances)
        t.limit.append(rec.instance_limit)
        triples: list[int] = []
        for itype, u in rec.types.items():
            max_units = NOT_REPORTED if u.max_units is None else u.max_units
            triples += [_index(t.types, itype), max_units, u.consumed_units]
        t.units.append(triples)
    return t


def from_table(table: ClusterTable) -> dict[str, ClusterRecord]:
    """The registry the table was made from (cluster id -> record, in the table's order)."""
    out: dict[str, ClusterRecord] = {}
    for k, cid in enumerate(table.id):
        bits = {name: bool(table.flags[k] >> bit & 1) for bit, name in enumerate(FLAGS)}
        triples = table.units[k]
        types = {
            table.types[triples[j]]: TypeUnits(
                max_units=None if triples[j + 1] == NOT_REPORTED else triples[j + 1],
                consumed_units=triples[j + 2],
            )
            for j in range(0, len(triples), 3)
        }
        out[cid] = ClusterRecord(
            id=cid,
            instance_type=table.types[table.created_for[k]],
            types=types,
            phase=ClusterPhase(table.phases[table.phase[k]]),
            instances=table.instances[k],
            cluster_type="enterprise" if bits["enterprise"] else "managed",
            manual=bits["manual"],
            schedulable=not bits["unschedulable"],
            instance_limit=table.limit[k],
            deletion_blocked=bits["deletion_blocked"],
            deletion_approved=bits["deletion_approved"],
            delete_sent=bits["delete_sent"],
        )
    return out
