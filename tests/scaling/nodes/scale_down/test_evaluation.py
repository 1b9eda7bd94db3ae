"""evaluate_scale_down: the loop's scale-down evaluation beside the cluster. Its result crosses the
NodeAutoscaler's history, so it must stay small whatever the cluster's size, and it must decide
what the old in-workflow path decided (observe everything, plan_from_input, check the waiting
empty nodes)."""

from __future__ import annotations

import functools
import hashlib
import time
from datetime import UTC, datetime

from temporalio.contrib.pydantic import pydantic_data_converter

from scaling.kube.drain import (
    ANNOTATION_SAFE_TO_EVICT,
    TAINT_DELETION_CANDIDATE,
    is_long_terminating,
    marked_for_deletion,
    pods_to_evict,
    without_long_terminating,
)
from scaling.kube.models import NodeInfo, PodInfo, Resources, Taint
from scaling.nodes.contracts import (
    NodeRemovalCheckInput,
    ScaleDownEvaluation,
    ScaleDownEvaluationInput,
    ScaleDownObservation,
)
from scaling.nodes.models import LABEL_GROUP, LABEL_POOL, Billing, NodeGroup, PoolSpec
from scaling.nodes.scale_down.candidates import plan_from_input
from scaling.nodes.scale_down.checks import is_empty
from scaling.nodes.scale_down.evaluation import (
    CANDIDATES_MAX_BYTES,
    MAX_CANDIDATES,
    MESSAGE_MAX_CHARS,
    REUSE_MAX_S,
    apply_unneeded,
    check_node_removal,
    compact_candidates,
    evaluate_scale_down,
    evaluation_of,
    reuse_key,
    reuse_of,
    stands,
)
from scaling.nodes.scale_down.models import NodeDecision, NodeState, ScaleDownInput, ScaleDownLoopSettings
from scaling.nodes.scale_down.recheck import still_removable
from scaling.nodes.scale_down.removals import CandidateState

GI = 1 << 30
NOW = 1_800_000_000.0
TARGET_BYTES = 256 * 1024  # the goal for anything the loop puts in its history (Temporal's limit: 2 MB)
GROUP = NodeGroup(name="general", pools=[PoolSpec(provider="kwok", serverType=["cx32"], priority=10)])


def payload_bytes(value: object) -> int:
    """The size of ``value`` as the worker's data converter puts it into the history."""
    [payload] = pydantic_data_converter.payload_converter.to_payloads([value])
    return payload.ByteSize()


def mk_node(name: str, managed: bool, cpu: int = 4000) -> NodeInfo:
    labels = {LABEL_GROUP: "general", LABEL_POOL: "kwok-cx32"} if managed else {"node-role": "static"}
    return NodeInfo(
        name=name,
        labels=labels,
        ready=True,
        provider_id=f"kwok://{name}",
        allocatable=Resources(cpu_m=cpu, memory=16 * GI, pods=110),
    )


def app(name: str, on: str | None, cpu: int = 500, **kw) -> PodInfo:
    kw.setdefault("controller_kind", "ReplicaSet")
    return PodInfo(
        namespace="default",
        name=name,
        uid=name,
        node_name=on,
        phase="Running",
        labels={"app": "web", "pod-template-hash": "7d9f8c6b5"},
        requests=Resources(cpu_m=cpu, memory=GI, pods=1),
        **kw,
    )


def ds(name: str, on: str) -> PodInfo:
    return PodInfo(
        namespace="kube-system",
        name=name,
        uid=name,
        node_name=on,
        phase="Running",
        controller_kind="DaemonSet",
        is_daemonset=True,
        requests=Resources(cpu_m=50, memory=64 << 20, pods=1),
    )


@functools.cache  # built once per test process; nothing here changes it
def big_cluster(workload_gone: bool = False, n_nodes: int = 5000, n_pods: int = 30_000) -> ScaleDownObservation:
    """``n_nodes`` nodes, every other one growth-managed, ``n_pods`` pods spread over them: a
    DaemonSet pod per node; growth's nodes mostly busy, every tenth empty and every tenth
    underused. With ``workload_gone`` growth's nodes run only their DaemonSet pod (the moment
    after a workload is deleted: every managed node unneeded at once)."""
    nodes = [
        mk_node(f"prod-general-kwok-cx32-{i:08x}" if i % 2 == 0 else f"static-worker-{i:05d}", managed=i % 2 == 0)
        for i in range(n_nodes)
    ]
    pods = [ds(f"node-exporter-{i:05d}", n.name) for i, n in enumerate(nodes)]
    for i, n in enumerate(nodes):
        managed = i % 2 == 0
        if managed and (workload_gone or (i // 2) % 10 == 0):
            continue  # empty
        count = 1 if managed and (i // 2) % 10 == 1 else 5
        pods += [app(f"web-{i:05d}-{j}", n.name) for j in range(count)]
    unmanaged = [n.name for i, n in enumerate(nodes) if i % 2 == 1]
    k = 0
    while len(pods) < n_pods:  # the rest on the static nodes, round robin
        pods.append(app(f"batch-{k:05d}", unmanaged[k % len(unmanaged)], cpu=100))
        k += 1
    return ScaleDownObservation(nodes=nodes, pods=pods, groups=[GROUP])


def test_result_stays_small_on_a_5000_node_30000_pod_cluster() -> None:
    obs = big_cluster()
    assert len(obs.nodes) == 5000 and len(obs.pods) == 30_000
    # What observe_scale_down returned into the history: ~18 MB here, past Temporal's 2 MB limit.
    assert payload_bytes(obs) > 2 * 1024 * 1024
    inp = ScaleDownEvaluationInput(cluster="prod", now=NOW, settings=ScaleDownLoopSettings())
    started = time.perf_counter()
    ev = evaluate_scale_down(obs, inp)
    took = time.perf_counter() - started
    size = payload_bytes(ev)
    print(f"\n5,000 nodes / 30,000 pods: evaluation {took:.2f}s, result {size / 1024:.1f} KB")
    assert size < TARGET_BYTES
    # What it says about the cluster: 250 empty nodes, 250 underused (their timers start now),
    # the rest busy; unmanaged nodes never appear.
    assert ev.candidates_by_state == {"Empty": 250, "UnneededWaiting": 250, "Utilized": 2000}
    assert len(ev.unneeded_started) == 500 and ev.unneeded_ended == []
    assert [t.kind for t in ev.to_remove] == [NodeState.EMPTY] * 10  # max_removals_per_loop
    assert all(t.provider_id == f"kwok://{t.name}" and t.scale_down_at == NOW + 600 for t in ev.to_remove)
    # The status list is cut, most telling first: the chosen removals lead it.
    assert len(ev.candidates) < 2500 and len(ev.candidates) <= MAX_CANDIDATES
    assert [c.node for c in ev.candidates[:10]] == [t.name for t in ev.to_remove]
    assert all(c.node.startswith("prod-") for c in ev.candidates)
    # Its time is printed, not asserted (speed belongs in bench/): ~0.3 s here, ~35 s before
    # pods were indexed by node.


def test_result_stays_small_when_every_managed_node_is_unneeded_at_once() -> None:
    """The timer state is the part that grows: one entry per unneeded node, in the input (the
    result carries only its changes). With all 2,500 managed nodes unneeded and 100 removals
    running, input and result still fit."""
    obs = big_cluster(workload_gone=True)
    managed = [n.name for n in obs.nodes if LABEL_GROUP in n.labels]
    running = managed[:100]
    inp = ScaleDownEvaluationInput(
        cluster="prod",
        now=NOW,
        unneeded_since={n: NOW - 60 for n in managed[100:]},
        in_progress=running,
        watch_empty=running,
        protected=managed[100:110],
    )
    started = time.perf_counter()
    ev = evaluate_scale_down(obs, inp)
    took = time.perf_counter() - started
    size, in_size = payload_bytes(ev), payload_bytes(inp)
    print(
        f"\nall 2,500 managed nodes unneeded: evaluation {took:.2f}s, result {size / 1024:.1f} KB, input {in_size / 1024:.1f} KB"
    )
    assert size < TARGET_BYTES and in_size < TARGET_BYTES
    # Protected nodes are blocked, not unneeded: their timers end; the others' keep running.
    assert ev.unneeded_ended == sorted(managed[100:110]) and ev.unneeded_started == []
    assert len(apply_unneeded(inp.unneeded_since, ev, NOW)) == 2390
    assert ev.not_empty == []  # the running removals' nodes are still empty
    assert ev.candidates_by_state[NodeState.REMOVING.value] == 100
    assert sum(ev.candidates_by_state.values()) == 2500
    # Running removals come first in the status list.
    assert {c.node for c in ev.candidates[:100]} == set(running)


def test_candidates_are_cut_by_count_and_bytes_and_messages_are_shortened() -> None:
    long = "x" * 5000
    decisions = {
        f"n{i:04d}": NodeDecision(
            name=f"n{i:04d}",
            state=NodeState.BLOCKED if i % 2 else NodeState.UTILIZED,
            utilization=0.9,
            reasons=[{"code": "NotReplicated", "message": long}] if i % 2 else [],
        )
        for i in range(3000)
    }
    decisions["static"] = NodeDecision(name="static", state=NodeState.NOT_MANAGED)
    out, by_state = compact_candidates(decisions)
    assert by_state == {"Blocked": 1500, "Utilized": 1500}
    assert sum(len(c.model_dump_json()) + 1 for c in out) + 2 <= CANDIDATES_MAX_BYTES
    assert all(c.state == "Blocked" and len(c.message) == MESSAGE_MAX_CHARS for c in out)  # blocked first
    out, _ = compact_candidates(decisions, max_count=7, max_bytes=10**9)
    assert len(out) == 7 and "static" not in {c.node for c in out}


# -- the same decision as the old path ------------------------------------------------------


class OldStep(ScaleDownEvaluation):
    unneeded_since: dict[str, float]


def old_path(obs: ScaleDownObservation, inp: ScaleDownEvaluationInput) -> OldStep:
    """What the NodeAutoscaler's step computed in the workflow before evaluate_scale_down, from
    the whole observation (the reference the new activity must agree with)."""
    plan = plan_from_input(
        ScaleDownInput(
            nodes=obs.nodes,
            pods=obs.pods,
            pdbs=obs.pdbs,
            groups=obs.groups,
            storage=obs.storage,
            now=inp.now,
            unneeded_since=inp.unneeded_since,
            last_scale_up_at=inp.last_scale_up_at,
            protected=inp.protected,
            in_progress=inp.in_progress,
            settings=inp.settings,
        )
    )
    by_name = {n.name: n for n in obs.nodes}
    live = without_long_terminating(obs.pods, inp.now)
    return OldStep(
        unneeded_since=plan.unneeded_since,
        to_remove=[
            {
                **r.model_dump(include={"name", "group", "pool", "kind", "scale_down_at"}),
                "provider_id": by_name[r.name].provider_id,
            }
            for r in plan.to_remove
        ],
        candidates=[
            CandidateState(
                node=name,
                state=d.state.value,
                reason=d.reason,
                message="; ".join(b.message for b in d.reasons),
                group=d.group,
                pool=d.pool,
                utilization=round(d.utilization, 3),
                unneeded_since=d.unneeded_since,
            )
            for name, d in plan.decisions.items()
            if d.state != NodeState.NOT_MANAGED
        ],
        not_empty=[n for n in inp.watch_empty if n in by_name and not is_empty(by_name[n], live)],
    )


def small_cluster() -> ScaleDownObservation:
    nodes = [
        mk_node("busy", managed=True),
        mk_node("movable", managed=True),
        mk_node("empty", managed=True),
        mk_node("blocked", managed=True),
        mk_node("held", managed=True),
        mk_node("marked", managed=True),
        mk_node("marked-quiet", managed=True),
        mk_node("static", managed=False, cpu=8000),
    ]
    gone = datetime.fromtimestamp(NOW - 3600, UTC)
    pods = [
        *(app(f"busy-{i}", "busy") for i in range(5)),  # 2500m of 4000m: utilized
        app("web-1", "movable"),  # underused; moves to static
        ds("ds-empty", "empty"),
        app("bare", "blocked", controller_kind=None),  # no controller: NotReplicated
        app("pinned", "held", annotations={ANNOTATION_SAFE_TO_EVICT: "false"}),
        app("landed", "marked"),  # a pod landed on a node waiting as EMPTY
        app("leftover", "marked-quiet", deletion_timestamp=gone),  # long terminating: still empty
        app("pending", None),
    ]
    assert is_long_terminating(pods[-2], NOW)
    return ScaleDownObservation(nodes=nodes, pods=pods, groups=[GROUP])


def test_same_decision_as_the_old_path_on_a_small_mixed_cluster() -> None:
    obs = small_cluster()
    inp = ScaleDownEvaluationInput(
        cluster="c",
        now=NOW,
        unneeded_since={"movable": NOW - 900, "gone": NOW - 900},
        last_scale_up_at=NOW - 3600,
        in_progress=["marked", "marked-quiet"],
        watch_empty=["marked", "marked-quiet", "gone"],
    )
    ev = evaluate_scale_down(obs, inp)
    ref = old_path(obs, inp)

    assert ev.to_remove == ref.to_remove
    assert apply_unneeded(inp.unneeded_since, ev, NOW) == ref.unneeded_since
    assert ev.not_empty == ref.not_empty
    assert sorted(ev.candidates, key=lambda c: c.node) == sorted(ref.candidates, key=lambda c: c.node)
    # ...and that decision is the expected one.
    assert [(t.name, t.kind, t.scale_down_at, t.provider_id) for t in ev.to_remove] == [
        ("empty", NodeState.EMPTY, NOW + 600, "kwok://empty"),
        ("movable", NodeState.UNDERUSED, NOW, "kwok://movable"),
    ]
    assert ev.unneeded_started == ["empty"] and ev.unneeded_ended == ["gone"]
    assert ref.unneeded_since == {"empty": NOW, "movable": NOW - 900}
    assert ev.not_empty == ["marked"]
    states = {c.node: (c.state, c.reason) for c in ev.candidates}
    assert states == {
        "busy": ("Utilized", None),
        "movable": ("Underused", None),
        "empty": ("Empty", None),
        "blocked": ("Blocked", "NotReplicated"),
        "held": ("Blocked", "NotSafeToEvictAnnotation"),
        "marked": ("Removing", None),
        "marked-quiet": ("Removing", None),
    }
    assert ev.candidates_by_state == {"Utilized": 1, "Underused": 1, "Empty": 1, "Blocked": 2, "Removing": 2}
    assert (ev.nodes, ev.pods) == (8, len(obs.pods))


# -- one node's re-check (NodeScaleDown's timer fired, or an operator's remove_node) ----------


def test_node_check_is_the_old_re_check_and_stays_small() -> None:
    obs = small_cluster()
    for name, require_empty in [("movable", False), ("blocked", False), ("marked", True), ("marked-quiet", True)]:
        inp = NodeRemovalCheckInput(cluster="c", node=name, now=NOW, protected=["held"], require_empty=require_empty)
        check = check_node_removal(obs, inp)
        # What NodeScaleDown worked out from the whole observation before.
        node = next(n for n in obs.nodes if n.name == name)
        leaving = {n.name for n in obs.nodes if marked_for_deletion(n)} | {name}
        old = still_removable(
            node,
            obs.pods,
            obs.pdbs,
            obs.storage,
            obs.nodes,
            groups=obs.groups,
            protected={"held"},
            in_progress=leaving,
            require_empty=require_empty,
            settings=inp.settings,
            now=NOW,
        )
        live = without_long_terminating(obs.pods, NOW)
        assert check.found and check.managed and check.group == "general" and check.pool == "kwok-cx32"
        assert check.blockers == old.blockers, name
        assert check.pods_to_evict == sorted(f"{p.namespace}/{p.name}" for p in pods_to_evict(name, live))
        assert check.provider_id == f"kwok://{name}"
    by_node = {
        n: check_node_removal(
            obs, NodeRemovalCheckInput(cluster="c", node=n, now=NOW, require_empty=n.startswith("marked"))
        )
        for n in ("movable", "blocked", "marked", "marked-quiet")
    }
    assert by_node["movable"].blockers == [] and by_node["movable"].pods_to_evict == ["default/web-1"]
    assert [b.code for b in by_node["blocked"].blockers] == ["NotReplicated"]
    assert [b.code for b in by_node["marked"].blockers] == ["NodeNotEmpty"]
    assert by_node["marked-quiet"].blockers == [] and by_node["marked-quiet"].pods_to_evict == []  # long terminating
    static = check_node_removal(obs, NodeRemovalCheckInput(cluster="c", node="static", now=NOW))
    assert static.found and not static.managed
    assert not check_node_removal(obs, NodeRemovalCheckInput(cluster="c", node="gone", now=NOW)).found
    # On the big cluster the answer is about one node: a few hundred bytes, not 18 MB.
    big = big_cluster()
    started = time.perf_counter()
    check = check_node_removal(big, NodeRemovalCheckInput(cluster="c", node=big.nodes[2].name, now=NOW))
    took = time.perf_counter() - started
    print(f"\none node's re-check on 5,000 nodes / 30,000 pods: {took:.2f}s, {payload_bytes(check)} bytes")
    assert check.found and payload_bytes(check) < 4096


def test_an_evaluation_leaves_out_the_candidates_the_workflow_already_holds() -> None:
    """An idle loop finds the same candidates every time: sent once, then named by digest
    (300 nodes wrote ~95 KB of the same candidates into the history every 2 s)."""
    obs = big_cluster(n_nodes=600, n_pods=3000)
    first = evaluate_scale_down(obs, ScaleDownEvaluationInput(cluster="prod", now=NOW))
    assert first.candidates and not first.candidates_unchanged and first.candidates_digest
    again = evaluate_scale_down(
        obs, ScaleDownEvaluationInput(cluster="prod", now=NOW, candidates_digest=first.candidates_digest)
    )
    assert again.candidates == [] and again.candidates_unchanged
    assert again.candidates_by_state == first.candidates_by_state
    assert payload_bytes(again) < payload_bytes(first) // 5  # what is left: the removals and the counts
    # A node's removal started (the workflow overrides its reason): the candidates are sent again.
    busy = evaluate_scale_down(
        obs,
        ScaleDownEvaluationInput(
            cluster="prod", now=NOW, candidates_digest=first.candidates_digest, in_progress=[obs.nodes[0].name]
        ),
    )
    assert busy.candidates and not busy.candidates_unchanged
    # So is a change in what the nodes hold.
    fuller = obs.model_copy(update={"pods": [*obs.pods, app("late", obs.nodes[0].name)]})
    changed = evaluate_scale_down(
        fuller, ScaleDownEvaluationInput(cluster="prod", now=NOW, candidates_digest=first.candidates_digest)
    )
    assert changed.candidates and not changed.candidates_unchanged


def waiting_cluster(soft: bool = True, **pod_kw) -> ScaleDownObservation:
    """A busy managed node, an underused one whose pod fits elsewhere (``soft``: an earlier loop
    soft-tainted it), and a roomy static node."""
    light = mk_node("light", managed=True)
    if soft:
        light.taints = [Taint(key=TAINT_DELETION_CANDIDATE, value="1", effect="PreferNoSchedule")]
    nodes = [mk_node("busy", managed=True), light, mk_node("static", False, cpu=8000)]
    pods = [*(app(f"busy-{i}", "busy") for i in range(5)), app("web-1", "light", **pod_kw)]
    return ScaleDownObservation(nodes=nodes, pods=pods, groups=[GROUP])


def test_a_node_waiting_on_its_timer_says_the_same_words_loop_after_loop() -> None:
    """The candidates name the times, not "for Xs, Ys to go": a loop that finds nothing new is
    answered by digest (a waiting node made every idle loop resend every candidate)."""
    obs = waiting_cluster()
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, unneeded_since={"light": NOW - 100})
    first = evaluate_scale_down(obs, inp)
    light = next(c for c in first.candidates if c.node == "light")
    assert (light.state, light.removable_at) == ("UnneededWaiting", NOW + 500)
    assert "since 2027-01-15 07:58:20Z" in light.message  # NOW - 100, in UTC
    later = evaluate_scale_down(
        obs, inp.model_copy(update={"now": NOW + 2, "candidates_digest": first.candidates_digest})
    )
    assert later.candidates_unchanged and later.candidates == []


def test_stable_until_is_when_the_plan_would_first_change() -> None:
    """An evaluation may be reused for the same cluster and input until its first timer runs out:
    the plan just before that moment is the same plan, at it a different one."""
    obs = waiting_cluster()
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, unneeded_since={"light": NOW - 400})
    ev = evaluation_of(obs, inp)
    until = ev.stable_until
    assert until == NOW + 200 and ev.to_remove == []
    before = evaluation_of(obs, inp.model_copy(update={"now": until - 0.001}))
    assert before == ev
    at = evaluation_of(obs, inp.model_copy(update={"now": until}))
    assert [t.name for t in at.to_remove] == ["light"] and at.stable_until is None  # removing: evaluate again
    # Nothing waiting on time: reusable while nothing changes, REUSE_MAX_S at most.
    busy = waiting_cluster(soft=False)
    busy.pods = [p for p in obs.pods if p.node_name == "busy"] + [app("x", "light", 2500)]
    assert evaluation_of(busy, inp.model_copy(update={"unneeded_since": {}})).stable_until == NOW + REUSE_MAX_S
    # The delay after a scale-up holds the node until it ends.
    delayed = evaluation_of(obs, inp.model_copy(update={"now": until, "last_scale_up_at": until - 500}))
    assert delayed.stable_until == until + 100


def test_an_evaluation_that_starts_nothing_names_the_soft_taints_to_change() -> None:
    """Cluster Autoscaler's soft taint goes on an unneeded node and off a node needed again, named
    only by an evaluation that starts no removal (CA updates them in a loop that deleted nothing); an
    evaluation naming some is not reused, so a failed update is tried again the next loop."""
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, unneeded_since={"light": NOW - 100})
    ev = evaluation_of(waiting_cluster(soft=False), inp)
    assert (ev.soft_taint, ev.soft_untaint, ev.stable_until) == (["light"], [], None)
    assert (evaluation_of(waiting_cluster(), inp).soft_taint, evaluation_of(waiting_cluster(), inp).soft_untaint) == ([], [])  # fmt: skip
    due = evaluation_of(waiting_cluster(soft=False), inp.model_copy(update={"now": NOW + 600}))
    assert [t.name for t in due.to_remove] == ["light"] and (due.soft_taint, due.soft_untaint) == ([], [])
    needed = waiting_cluster()
    needed.pods = [*needed.pods, app("x", "light", 2500)]
    ev = evaluation_of(needed, inp.model_copy(update={"unneeded_since": {}}))
    assert (ev.soft_taint, ev.soft_untaint, ev.stable_until) == ([], ["light"], None)
    off = inp.model_copy(update={"settings": ScaleDownLoopSettings(max_bulk_soft_taint_count=0)})
    assert evaluation_of(waiting_cluster(soft=False), off).soft_taint == []
    # Off with a TTL: a taint younger than it stays, and the evaluation is reused only until it is
    # stale; then it is lifted.
    young = waiting_cluster()
    young.nodes[1].taints = [Taint(key=TAINT_DELETION_CANDIDATE, value=str(int(NOW) - 100), effect="PreferNoSchedule")]
    off_ttl = inp.model_copy(
        update={"settings": ScaleDownLoopSettings(max_bulk_soft_taint_count=0, deletion_candidate_ttl_s=300)}
    )
    ev = evaluation_of(young, off_ttl)
    assert (ev.soft_untaint, ev.stable_until) == ([], NOW + 200)
    assert evaluation_of(young, off_ttl.model_copy(update={"now": NOW + 200})).soft_untaint == ["light"]
    assert evaluation_of(young, off).soft_untaint == ["light"]  # TTL 0: lifted at once


def test_stable_until_stops_where_a_deleted_pod_turns_long_terminating() -> None:
    """A pod deleted 10 s ago (30 s grace + 30 s margin) stops holding its node 50 s from now."""
    deleted = datetime.fromtimestamp(NOW - 10, UTC)
    obs = waiting_cluster(deletion_timestamp=deleted)
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, unneeded_since={"light": NOW - 100})
    ev = evaluation_of(obs, inp)
    until = ev.stable_until
    assert until == NOW + 50 and ev.to_remove == []
    after = evaluation_of(obs, inp.model_copy(update={"now": until + 0.001}))
    assert [(t.name, t.kind) for t in after.to_remove] == [("light", NodeState.EMPTY)]


def test_no_reuse_while_a_billed_node_is_unneeded() -> None:
    """A billed pool's paid period moves its removal window with time alone: evaluated every loop."""
    billed = GROUP.model_copy(deep=True)
    billed.pools[0].billing = Billing(period_s=3600, margin_s=300)
    nodes = [
        n.model_copy(update={"created_at": datetime.fromtimestamp(NOW - 60, UTC)}) for n in waiting_cluster().nodes
    ]
    obs = waiting_cluster().model_copy(update={"groups": [billed], "nodes": nodes})
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, unneeded_since={"light": NOW - 100})
    assert evaluation_of(obs, inp).stable_until is None


def test_the_last_evaluation_stands_only_for_the_same_view_input_and_time() -> None:
    """The loop skips an evaluation only when the worker's token, the input and the clock all say
    it would be the same one."""
    obs = waiting_cluster()
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, unneeded_since={"light": NOW - 100})
    ev = evaluation_of(obs, inp).model_copy(update={"view": "w1:3.7"})
    reuse = reuse_of(ev, reuse_key(inp))
    later = inp.model_copy(update={"now": NOW + 2, "candidates_digest": "abc", "fresh": {"pods": "9"}})
    assert stands(reuse, "w1:3.7", reuse_key(later), NOW + 2)  # now, digest and versions do not count
    assert not stands(reuse, "w1:3.8", reuse_key(later), NOW + 2)  # an object changed
    assert not stands(reuse, "", reuse_key(later), NOW + 2)  # a worker without a token
    assert not stands(reuse, "w1:3.7", reuse_key(later.model_copy(update={"protected": ["busy"]})), NOW + 2)
    assert not stands(reuse, "w1:3.7", reuse_key(later.model_copy(update={"replacing": ["r@1"]})), NOW + 2)
    assert not stands(reuse, "w1:3.7", reuse_key(later), NOW + 500)  # light's timer ran out
    assert reuse_of(ev.model_copy(update={"view": ""}), reuse_key(inp)) is None
    assert reuse_of(ev.model_copy(update={"stable_until": None}), reuse_key(inp)) is None


def test_the_reuse_key_of_an_input_with_no_command_in_flight_is_the_one_before_commands_were_sent() -> None:
    """The key is carried over continue-as-new: one from before ``replacing`` was sent must match,
    or a recorded run that reused its evaluation evaluates again on replay."""
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, unneeded_since={"light": NOW - 100}, protected=["busy"])
    before = inp.model_dump_json(
        exclude={
            "now": True,
            "fresh": True,
            "candidates_digest": True,
            "replacing": True,
            "first_evaluation": True,
            # nor the soft taints' count at CA's default, nor their TTL while off
            "settings": {"max_bulk_soft_taint_count", "deletion_candidate_ttl_s"},
        }
    )
    assert reuse_key(inp) == hashlib.sha256(before.encode()).hexdigest()[:24]
    fewer = inp.model_copy(update={"settings": ScaleDownLoopSettings(max_bulk_soft_taint_count=0)})
    assert reuse_key(fewer) != reuse_key(inp)  # set otherwise, it counts
    ttl = inp.model_copy(update={"settings": ScaleDownLoopSettings(deletion_candidate_ttl_s=300)})
    assert reuse_key(ttl) != reuse_key(inp)
    # The first evaluation's key is the second's, as before the flag was sent.
    assert reuse_key(inp.model_copy(update={"first_evaluation": True})) == reuse_key(inp)


def test_the_first_evaluation_takes_the_timers_a_stopped_cluster_autoscaler_soft_taints_say() -> None:
    """CA started with --node-deletion-candidate-ttl loads each node's unneeded time from its soft
    taint; growth does so on the loop's first evaluation, for a node the plan finds unneeded and
    that has no timer yet, so a node CA found unneeded 8 minutes ago goes 2 minutes later, not 10."""
    obs = waiting_cluster()
    obs.nodes[1].taints = [Taint(key=TAINT_DELETION_CANDIDATE, value=str(int(NOW) - 480), effect="PreferNoSchedule")]
    settings = ScaleDownLoopSettings(deletion_candidate_ttl_s=900)
    inp = ScaleDownEvaluationInput(cluster="c", now=NOW, settings=settings, first_evaluation=True)
    ev = evaluation_of(obs, inp)
    assert (ev.unneeded_adopted, ev.unneeded_started) == ({"light": NOW - 480}, [])
    timers = apply_unneeded({}, ev, NOW)
    assert timers == {"light": NOW - 480}
    assert ev.stable_until == NOW + 120  # its timer (600 s) runs out then
    later = evaluation_of(
        obs, inp.model_copy(update={"now": NOW + 120, "unneeded_since": timers, "first_evaluation": False})
    )
    assert [t.name for t in later.to_remove] == ["light"]
    # Only on the first evaluation, only with the TTL set and the taint younger than it; a timer the
    # loop keeps stands, and a node the plan finds needed starts none.
    for update in (
        {"first_evaluation": False},
        {"settings": ScaleDownLoopSettings()},
        {"settings": ScaleDownLoopSettings(deletion_candidate_ttl_s=300)},
    ):
        ev = evaluation_of(obs, inp.model_copy(update=update))
        assert (ev.unneeded_adopted, ev.unneeded_started) == ({}, ["light"]), update
    kept = evaluation_of(obs, inp.model_copy(update={"unneeded_since": {"light": NOW - 60}}))
    assert (kept.unneeded_adopted, kept.unneeded_started) == ({}, [])
    needed = obs.model_copy(update={"pods": [*obs.pods, app("x", "light", 2500)]})
    assert evaluation_of(needed, inp).unneeded_adopted == {}


def test_stable_until_stops_at_a_budget_window_edge() -> None:
    """A window that opens while the evaluation is reused is honoured at its edge: the loop never
    reuses an evaluation past the next hit of a budget's schedule, nor past a window's end."""
    from scaling.nodes.disruption.models import Budget, Disruption

    windowed = GROUP.model_copy(deep=True)
    # Every hour on the hour, for 10 minutes: no removal at all.
    windowed.disruption = Disruption(budgets=[Budget(nodes="0", schedule="0 * * * *", duration_s=600.0)])
    obs = waiting_cluster().model_copy(update={"groups": [windowed]})
    hour = (NOW // 3600 + 1) * 3600  # the next full hour after NOW
    inp = ScaleDownEvaluationInput(cluster="c", now=hour - 60, unneeded_since={"light": hour - 1000})
    ev = evaluation_of(obs, inp)
    assert [t.name for t in ev.to_remove] == ["light"]  # window closed: it goes
    inp = inp.model_copy(update={"unneeded_since": {"light": hour - 500}})  # removable at hour + 100
    assert evaluation_of(obs, inp).stable_until == hour  # the window opens first
    inside = evaluation_of(obs, inp.model_copy(update={"now": hour + 400}))
    assert inside.to_remove == [] and inside.stable_until == hour + 600  # held until the window closes
    assert [t.name for t in evaluation_of(obs, inp.model_copy(update={"now": hour + 600})).to_remove] == ["light"]
