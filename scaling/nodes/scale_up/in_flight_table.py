"""The loop's in-flight NodeRequests as they cross history: one table of columns.

The loop keeps each request it started until it reports a final phase, and carries them across
continue-as-new. What the next run needs of one is small: group, pool, server type, provider and
phase, requirements and pods per shape (the planner's "covered by in flight"), its node's name
(the observer's "has a Ready node"), and its newest finished attempt (a re-reported failure
counts once). As NodeRequestStatus records with every key spelled out, a Provisioning one was
~500 B, so 400 made ~200 KB of the carried state; here names (groups, pools, shape keys) are
written once and each request is a row of numbers, ~70 B (1,500 in flight:
tests/scaling/nodes/test_payloads.py).

Left out: earlier attempts and one still under way (reported again, it counts for nothing), the
provider id, and named pods (the shapes' counts cover them); messages and approval waits are
kept up to DETAILS_KEPT bytes. The request itself holds all of it (`describe`), and its next
report brings the record back whole.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from scaling.approvals import ApprovalState
from scaling.kube.models import Resources
from scaling.nodes.models import Attempt, AttemptResult, RequestPhase
from scaling.nodes.scale_up.requests import NodeRequestStatus

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_UNDER_WAY = (AttemptResult.PENDING, AttemptResult.PROVISIONING)
DETAILS_KEPT = 16 * 1024  # bytes of messages and approval waits a table keeps (the first rows')


class RowDetails(BaseModel):
    message: str = ""
    approval: ApprovalState | None = None


class InFlightTable(BaseModel):
    """Requests in order, as columns. `row[i]`: its pool (an index into `pools`, which holds
    indexes into `names` for group, pool, server type and provider), phase (into `names`),
    cpu_m, memory, pods, started (milliseconds after `t0_ms`; -1: none), the head of its node's
    name (into `names`, -1: none; `node[i]` is the rest) and, when its newest attempt has a
    result (not Pending or Provisioning), that attempt: pool, result (into `names`) and time."""

    compact: int = 1  # tells the table from the older form (request id -> record)
    prefix: str = ""  # common to every id
    t0_ms: int = 0
    names: list[str] = Field(default_factory=list)
    pools: list[list[int]] = Field(default_factory=list)
    id: list[str] = Field(default_factory=list)  # after the prefix
    node: list[str] = Field(default_factory=list)
    row: list[list[int]] = Field(default_factory=list)
    pods: list[list[int]] = Field(default_factory=list)  # flat: shape key (index), count, ...
    details: dict[int, RowDetails] = Field(default_factory=dict)  # row index -> what it said
    pod_uids: dict[int, list[str]] = Field(default_factory=dict)  # rows recorded before shapes


def epoch_ms(at: datetime) -> int:
    """The table's time resolution: a carried attempt's time compares at it (naive: UTC)."""
    return (at.replace(tzinfo=at.tzinfo or UTC) - _EPOCH) // _MS


def _at(ms: int) -> datetime:
    return _EPOCH + ms * _MS


def to_table(records: dict[str, NodeRequestStatus]) -> dict[str, Any]:
    """The wire form of `records` (keyed by id, as NodeAutoscalerState.in_flight)."""
    values = list(records.values())
    names: dict[str, int] = {}
    pools: dict[tuple[int, ...], int] = {}

    def name(value: str) -> int:
        return names.setdefault(value, len(names))

    times = [epoch_ms(r.started_at) for r in values if r.started_at]
    times += [epoch_ms(r.attempts[-1].timestamp) for r in values if r.attempts]
    t0 = min(times, default=0)
    ids = [r.id for r in values]
    prefix = os.path.commonprefix(ids)
    table = InFlightTable(prefix=prefix, t0_ms=t0, id=[i[len(prefix) :] for i in ids])
    budget = DETAILS_KEPT
    for i, r in enumerate(values):
        req = r.requirements
        pool = (name(r.group), name(r.current_pool), name(r.server_type), name(r.provider))
        # Node names share their head (`<cluster>-<pool>-`) with the pool's others.
        head, sep, tail = r.node_name.rpartition("-")
        row = [pools.setdefault(pool, len(pools)), name(r.phase.value), req.cpu_m, req.memory, req.pods]
        row += [epoch_ms(r.started_at) - t0 if r.started_at else -1, name(head + sep) if sep else -1]
        last = r.attempts[-1] if r.attempts else None
        # An attempt still under way counts for nothing when reported again: left out.
        if last is not None and last.result not in _UNDER_WAY:
            row += [name(last.pool), name(last.result.value), epoch_ms(last.timestamp) - t0]
        table.row.append(row)
        table.node.append(tail)
        table.pods.append([n for key, count in r.pods.items() for n in (name(key), count)])
        if not r.pods and r.pod_uids:
            table.pod_uids[i] = r.pod_uids
        if r.message or r.approval:
            details = RowDetails(message=r.message, approval=r.approval)
            budget -= len(details.model_dump_json())
            if budget >= 0:
                table.details[i] = details
    table.names = list(names)
    table.pools = [list(p) for p in pools]
    return table.model_dump(mode="json")


def from_table(value: Any) -> Any:
    """Records keyed by id from the wire form; anything else (the older form, records) as it is."""
    if not (isinstance(value, dict) and value.get("compact") == 1):
        return value
    table = InFlightTable.model_validate(value)
    names, t0 = table.names, table.t0_ms
    out: dict[str, NodeRequestStatus] = {}
    for i, (suffix, tail, row, pods) in enumerate(zip(table.id, table.node, table.row, table.pods, strict=True)):
        rid = table.prefix + suffix
        group, pool, server_type, provider = (names[n] for n in table.pools[row[0]])
        node = (names[row[6]] if row[6] >= 0 else "") + tail
        details = table.details.get(i, RowDetails())
        attempts = []
        if len(row) > 7:
            result = AttemptResult(names[row[8]])
            # The attempt's node: a Provisioning or Ready attempt is on the request's node.
            attempts.append(Attempt(pool=names[row[7]], result=result, timestamp=_at(t0 + row[9]), node_name=node))
        out[rid] = NodeRequestStatus(
            id=rid,
            group=group,
            current_pool=pool,
            server_type=server_type,
            provider=provider,
            phase=RequestPhase(names[row[1]]),
            requirements=Resources(cpu_m=row[2], memory=row[3], pods=row[4]),
            started_at=_at(t0 + row[5]) if row[5] >= 0 else None,
            node_name=node,
            attempts=attempts,
            pods={names[pods[j]]: pods[j + 1] for j in range(0, len(pods), 2)},
            pod_uids=table.pod_uids.get(i, []),
            message=details.message,
            approval=details.approval,
        )
    return out
