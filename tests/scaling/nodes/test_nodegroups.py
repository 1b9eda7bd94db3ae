import copy
from typing import Any

import pytest

from scaling.kube.models import Taint
from scaling.nodes.nodegroups import (
    InvalidSpec,
    flatten_pools,
    load_node_groups,
    parse_node_group,
    parse_node_groups_yaml,
    pool_name,
    priority_tiers,
)

KNOWN = {"hetzner", "kwok"}


def obj(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "growth.autoscaling.dev/v1alpha1",
        "kind": "NodeGroupWithPriority",
        "metadata": {"name": "general"},
        "spec": {
            "labels": {"team": "web"},
            "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "maxNodes": 20,
            "scaleDown": {"unneededTime": "5m", "utilizationThreshold": 0.4, "delayAfterAdd": "1h30m"},
            "pools": [
                {"provider": "hetzner", "serverType": ["CAX11"], "priority": 90},
                {
                    "provider": "hetzner",
                    "serverType": ["CX31", "CX32"],
                    "priority": 50,
                    "maxNodes": 10,
                    "minNodes": 1,
                    "config": {"location": "fsn1"},
                },
            ],
        },
    }
    base["spec"].update(spec)
    return base


def test_parse_valid_group() -> None:
    g = parse_node_group(obj(), KNOWN)
    assert g.name == "general" and g.labels == {"team": "web"} and g.max_nodes == 20
    assert g.taints == [Taint(key="dedicated", value="web", effect="NoSchedule")]
    assert g.scale_down.unneeded_time_s == 300 and g.scale_down.delay_after_add_s == 5400
    assert g.scale_down.utilization_threshold == 0.4
    assert [p.server_types for p in g.pools] == [["CAX11"], ["CX31", "CX32"]]
    assert g.pools[1].config == {"location": "fsn1"}


def test_flatten_one_pool_per_server_type_and_tiers() -> None:
    pools = flatten_pools(parse_node_group(obj(), KNOWN))
    assert [p.name for p in pools] == ["hetzner-cax11", "hetzner-cx31", "hetzner-cx32"]
    assert pool_name("Hetzner", "CX31") == "hetzner-cx31"
    assert pools[1].max_nodes == 10 and pools[2].min_nodes == 1 and pools[1].group == "general"
    tiers = priority_tiers(pools)
    assert [[p.name for p in t] for t in tiers] == [["hetzner-cax11"], ["hetzner-cx31", "hetzner-cx32"]]


def test_list_of_types_equals_separate_entries_of_same_priority() -> None:
    split = obj(
        pools=[
            {"provider": "hetzner", "serverType": ["CX31"], "priority": 50},
            {"provider": "hetzner", "serverType": ["CX32"], "priority": 50},
        ]
    )
    joined = obj(pools=[{"provider": "hetzner", "serverType": ["CX31", "CX32"], "priority": 50}])
    assert flatten_pools(parse_node_group(split, KNOWN)) == flatten_pools(parse_node_group(joined, KNOWN))


def bad(path: list[Any], value: Any) -> dict[str, Any]:
    o = copy.deepcopy(obj())
    target = o
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    return o


@pytest.mark.parametrize(
    "doc,field,words",
    [
        (bad(["spec", "pools", 1, "provider"], "aws"), "spec.pools[1].provider", "unknown provider"),
        (bad(["spec", "pools"], []), "spec.pools", "at least one"),
        (bad(["spec", "pools", 0, "serverType"], []), "spec.pools[0].serverType", "non-empty"),
        (bad(["spec", "pools", 1, "priority"], -1), "spec.pools[1].priority", "negative"),
        (bad(["spec", "pools", 1, "priority"], "high"), "spec.pools[1].priority", "integer"),
        (bad(["spec", "pools", 1, "maxNodes"], -2), "spec.pools[1].maxNodes", "negative"),
        (bad(["spec", "pools", 1, "minNodes"], 11), "spec.pools[1].minNodes", "exceeds"),
        (bad(["spec", "maxNodes"], 0), "spec.maxNodes", "minNodes"),
        (bad(["spec", "taints", 0, "effect"], "Sometimes"), "spec.taints[0].effect", "NoSchedule"),
        (bad(["spec", "scaleDown", "utilizationThreshold"], "lots"), "spec.scaleDown.utilizationThreshold", "lots"),
        (bad(["spec", "scaleDown", "utilizationThreshold"], "1500m"), "spec.scaleDown.utilizationThreshold", "between"),
        (bad(["spec", "scaleDown", "unneededTime"], "soon"), "spec.scaleDown.unneededTime", "duration"),
        # Arabic-Indic and fullwidth digits: Python's \d takes them, a Go duration does not.
        (bad(["spec", "scaleDown", "unneededTime"], "\u0661\u0660m"), "spec.scaleDown.unneededTime", "duration"),
        (bad(["spec", "scaleDown", "delayAfterAdd"], "\uff15m"), "spec.scaleDown.delayAfterAdd", "duration"),
        (
            bad(["spec", "scaleDown", "utilizationThreshold"], "\uff10.\uff15"),
            "spec.scaleDown.utilizationThreshold",
            "quantity",
        ),
        (bad(["spec", "labels"], {"a": 1}), "spec.labels.a", "string"),
        (bad(["spec", "startupTaints"], [{"effect": "NoSchedule"}]), "spec.startupTaints[0].key", "non-empty"),
        (bad(["metadata", "name"], "Bad_Name"), "metadata.name", "DNS"),
        (bad(["apiVersion"], "growth/v1alpha1"), "apiVersion", "growth.autoscaling.dev/v1alpha1"),
        (bad(["spec", "pools", 0, "serverType"], ["CX31"]), "spec.pools[1].serverType[0]", "already listed"),
        (bad(["spec", "pools", 1, "config"], {"name": "Pool_1"}), "spec.pools[1].config.name", "DNS label"),
        (bad(["spec", "pools", 1, "config"], {"name": "p"}), "spec.pools[1].config.name", "exactly one"),
        (bad(["spec", "pools", 0, "config"], {"placement_group": ""}), "spec.pools[0].config.placement_group", "id"),
        (bad(["spec", "pools", 0, "config"], {"networks": "net"}), "spec.pools[0].config.networks", "list"),
        (bad(["spec", "pools", 0, "config"], {"public_ipv4": "false"}), "spec.pools[0].config.public_ipv4", "true"),
        (
            bad(["spec", "pools", 0, "config"], {"subnet_ip_range": "10.0.1.0/24"}),
            "spec.pools[0].config.subnet_ip_range",
            "one network",
        ),
        (
            bad(["spec", "pools", 0, "config"], {"server_labels": {"a": 1}}),
            "spec.pools[0].config.server_labels.a",
            "strings",
        ),
    ],
)
def test_invalid_specs_name_the_field(doc: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_node_group(doc, KNOWN)
    assert e.value.field == field
    assert words in e.value.message
    assert field in str(e.value)


def test_one_bad_group_never_stops_the_others() -> None:
    second = obj()
    second["metadata"]["name"] = "batch"
    broken = bad(["spec", "pools", 1, "priority"], -5)
    broken["metadata"]["name"] = "broken"
    groups, problems = load_node_groups([obj(), broken, second, obj()], KNOWN)
    assert [g.name for g in groups] == ["general", "batch"]
    assert [(p.name, p.field) for p in problems] == [
        ("broken", "spec.pools[1].priority"),
        ("general", "metadata.name"),  # the duplicate
    ]
    assert problems[0].kind == "NodeGroupWithPriority"


def test_yaml_stream_of_several_documents() -> None:
    text = """
apiVersion: growth.autoscaling.dev/v1alpha1
kind: NodeGroupWithPriority
metadata: {name: a}
spec:
  pools:
    - {provider: kwok, serverType: [cx22], priority: 10}
---
---
apiVersion: growth.autoscaling.dev/v1alpha1
kind: NodeGroupWithPriority
metadata: {name: b}
spec:
  pools:
    - {provider: nowhere, serverType: [cx22], priority: 10}
"""
    groups, problems = parse_node_groups_yaml(text, KNOWN)
    assert [g.name for g in groups] == ["a"]
    assert [(p.name, p.field) for p in problems] == [("b", "spec.pools[0].provider")]


def test_yaml_syntax_error_is_a_problem_not_a_crash() -> None:
    groups, problems = parse_node_groups_yaml("spec: [unclosed", KNOWN)
    assert groups == [] and "invalid YAML" in problems[0].message


# -- spec.disruption (Karpenter's NodePool fields; patterns from pkg/apis/v1/nodepool.go and the
# cases of pkg/apis/v1/nodepool_validation_cel_test.go) --------------------------------------------


def disruption_obj(disruption: Any, scale_down: Any = None) -> dict[str, Any]:
    o = obj()
    o["spec"]["disruption"] = disruption
    if scale_down is None:
        del o["spec"]["scaleDown"]
    else:
        o["spec"]["scaleDown"] = scale_down
    return o


def test_disruption_fields_parse() -> None:
    g = parse_node_group(
        disruption_obj(
            {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "1m30s",
                "expireAfter": "720h",
                "budgets": [
                    {"nodes": "10%"},
                    {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Underutilized"]},
                ],
            }
        ),
        KNOWN,
    )
    assert g.scale_down.policy is not None and g.scale_down.policy.value == "WhenEmpty"
    assert g.scale_down.unneeded_time_s == 90.0
    assert g.disruption.expire_after_s == 720 * 3600.0
    assert [b.nodes for b in g.disruption.budgets] == ["10%", "0"]
    assert g.disruption.budgets[1].duration_s == 8 * 3600.0
    assert [r.value for r in g.disruption.budgets[1].reasons] == ["Underutilized"]


def test_no_disruption_keeps_the_old_behaviour() -> None:
    g = parse_node_group(obj(), KNOWN)
    assert g.disruption.budgets == [] and g.disruption.expire_after_s is None
    assert g.scale_down.policy is None and g.scale_down.enabled  # Cluster Autoscaler's rules


def test_consolidate_after_never_turns_consolidation_off_and_expire_after_never_is_none() -> None:
    g = parse_node_group(disruption_obj({"consolidateAfter": "Never", "expireAfter": "Never"}), KNOWN)
    assert not g.scale_down.enabled
    assert g.disruption.expire_after_s is None


@pytest.mark.parametrize(
    ("disruption", "scale_down", "field"),
    [
        ({"consolidationPolicy": "WhenUnderutilized"}, None, "spec.disruption.consolidationPolicy"),
        ({"consolidateAfter": "1d"}, None, "spec.disruption.consolidateAfter"),
        ({"consolidateAfter": "-1s"}, None, "spec.disruption.consolidateAfter"),
        ({"consolidateAfter": 30}, None, "spec.disruption.consolidateAfter"),
        ({"expireAfter": "never"}, None, "spec.disruption.expireAfter"),
        ({"consolidateAfter": "5m"}, {"unneededTime": "5m"}, "spec.disruption.consolidateAfter"),
        ({"budgets": [{"nodes": 3}]}, None, "spec.disruption.budgets[0].nodes"),
        ({"budgets": [{"nodes": "101%"}]}, None, "spec.disruption.budgets[0].nodes"),
        ({"budgets": [{"nodes": "-1"}]}, None, "spec.disruption.budgets[0].nodes"),
        ({"budgets": [{"nodes": "1", "schedule": "@daily"}]}, None, "spec.disruption.budgets[0].duration"),
        ({"budgets": [{"nodes": "1", "duration": "1h"}]}, None, "spec.disruption.budgets[0].schedule"),
        (
            {"budgets": [{"nodes": "1", "schedule": "@daily", "duration": "30s"}]},
            None,
            "spec.disruption.budgets[0].duration",
        ),
        (
            {"budgets": [{"nodes": "1", "schedule": "@daily", "duration": "-1h"}]},
            None,
            "spec.disruption.budgets[0].duration",
        ),
        (
            {"budgets": [{"nodes": "1", "schedule": "@wrongly", "duration": "1h"}]},
            None,
            "spec.disruption.budgets[0].schedule",
        ),
        (
            {"budgets": [{"nodes": "1", "schedule": "0 0 * * tue-mon", "duration": "1h"}]},
            None,
            "spec.disruption.budgets[0].schedule",
        ),
        ({"budgets": [{"nodes": "1", "reasons": ["Expiring"]}]}, None, "spec.disruption.budgets[0].reasons[0]"),
        ({"budgets": [{"nodes": "1", "crontab": "@daily"}]}, None, "spec.disruption.budgets[0].crontab"),
        ({"budgets": [{"nodes": "1"}] * 51}, None, "spec.disruption.budgets"),
        ({"consolidateWhen": "WhenEmpty"}, None, "spec.disruption.consolidateWhen"),
    ],
)
def test_bad_disruption_names_the_field(disruption: Any, scale_down: Any, field: str) -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_node_group(disruption_obj(disruption, scale_down), KNOWN)
    assert e.value.field == field


def test_budget_duration_accepts_hours_and_minutes_with_go_trailing_zero_seconds() -> None:
    for duration in ("30m", "8h", "1h30m", "1h30m0s"):
        g = parse_node_group(
            disruption_obj({"budgets": [{"nodes": "1", "schedule": "@daily", "duration": duration}]}), KNOWN
        )
        assert g.disruption.budgets[0].duration_s is not None


def test_kwok_pool_resources_are_validated_with_the_field_named() -> None:
    def group(res: object) -> dict:
        pool = {"provider": "kwok", "serverType": ["cx22"], "priority": 1, "config": {"resources": res}}
        return {"metadata": {"name": "g"}, "spec": {"pools": [pool]}}

    assert parse_node_group(group({"example.com/foo": 4}), {"kwok"}).pools[0].config["resources"] == {
        "example.com/foo": 4
    }
    for bad, where in (
        ({"foo": 1}, "resources.foo"),
        ({"example.com/foo": "x"}, "resources.example.com/foo"),
        ({"example.com/foo": -1}, "resources.example.com/foo"),
        ("a", "resources"),
    ):
        with pytest.raises(InvalidSpec) as e:
            parse_node_group(group(bad), {"kwok"})
        assert e.value.field == f"spec.pools[0].config.{where}"


def test_pools_that_name_themselves_can_share_a_type_and_location() -> None:
    # Two Cluster Autoscaler groups of one type and location, told apart by placement group.
    pools = [
        {"provider": "hetzner", "serverType": ["cpx31"], "priority": 20, "maxNodes": 10, "config": c}
        for c in ({"name": "workers-a", "placement_group": "pg-a"}, {"name": "workers-b", "placement_group": 7})
    ]
    group = parse_node_group(obj(pools=pools, maxNodes=None), KNOWN)
    assert [p.name for p in flatten_pools(group)] == ["workers-a", "workers-b"]
    with pytest.raises(InvalidSpec) as e:
        parse_node_group(obj(pools=[pools[0], pools[0]], maxNodes=None), KNOWN)
    assert e.value.field == "spec.pools[1].serverType[0]"


def test_startup_taints_are_registered_marked_and_never_planned_on() -> None:
    """Karpenter's startupTaints: the group's nodes register with them (and a label naming each, so a
    reader of the node alone knows them for startup taints), and planned nodes are read without them."""
    doc = copy.deepcopy(obj())
    cilium = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
    doc["spec"]["startupTaints"] = [cilium]
    g = parse_node_group(doc, KNOWN)
    assert [t.key for t in g.startup_taints] == ["node.cilium.io/agent-not-ready"]
    assert [t.key for t in g.registered_taints] == [*(t.key for t in g.taints), "node.cilium.io/agent-not-ready"]
    assert g.template_taints == g.taints
    assert g.registered_labels == {
        **g.labels,
        "startup-taint.growth.autoscaling.dev/node.cilium.io_agent-not-ready": "true",
    }
