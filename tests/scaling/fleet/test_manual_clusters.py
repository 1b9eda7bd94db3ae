"""Clusters listed by hand (kas-fleet-manager's dataplane-cluster-configuration.yaml), clusters
that run several instance types, enterprise clusters, and instances a cluster refused: how the
configuration reads them and how placement and the scaling rules treat them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from scaling.fleet.capacity import TypeRules, tally_capacity
from scaling.fleet.config import FleetConfigError, load_fleet_config
from scaling.fleet.evaluation import evaluate_region
from scaling.fleet.lifecycle import ClusterReport, DataPlaneClusterInput, DataPlaneClusterState, cluster_report
from scaling.fleet.models import ClusterPhase, ClusterRecord, ManagedInstance, TypeCapacity, TypeUnits
from scaling.fleet.placement import place_instance
from scaling.fleet.region import merge_cluster_report
from scaling.fleet.scale_down import RemovalReason, cluster_to_remove, removal_decision

UPSTREAM = Path(__file__).parent / "upstream"
STD = TypeRules(instance_type="standard", slack=0, biggest_units=2, expected_units=10)
DEV = TypeRules(instance_type="developer", slack=0, biggest_units=1, expected_units=5)


def test_upstream_cluster_list_loads_with_upstreams_defaults() -> None:
    cfg = load_fleet_config(UPSTREAM)
    listed, bare = cfg.manual_clusters("aws", "us-east-1")
    assert (listed.name, listed.cluster_id, listed.multi_az, listed.schedulable) == (
        "anyname",
        "1jp6kdr7k0sjbe5adck2prjur8f39378",
        True,
        True,
    )
    assert (listed.kafka_instance_limit, listed.cluster_dns, listed.instance_types()) == (
        2,
        "apps.example.com",
        ["developer"],
    )
    # Defaults as upstream's UnmarshalYAML sets them.
    assert (bare.status, bare.provider_type, bare.cluster_type) == ("cluster_provisioning", "ocm", "managed")
    assert bare.instance_types() == ["standard", "developer"] and bare.kafka_instance_limit == -1
    assert not bare.multi_az
    assert cfg.manual_clusters("aws", "eu-west-1") == []


@pytest.mark.parametrize(
    ("entry", "path", "words"),
    [
        ({"cluster_id": ""}, "clusters[0].cluster_id", "at least 1"),
        (
            {"cluster_id": "c", "supported_instance_type": "standard,gold"},
            "clusters[0].supported_instance_type",
            "gold",
        ),
        ({"cluster_id": "c", "provider_type": "standalone"}, "clusters[0]", "cluster_dns"),
        ({"cluster_id": "c", "status": "deprovisioning"}, "clusters[0].status", "cluster_provisioning"),
        ({"cluster_id": "c", "kafka_instance_limit": -2}, "clusters[0].kafka_instance_limit", "-1"),
    ],
)
def test_bad_cluster_entries_are_refused_naming_the_field(tmp_path: Path, entry: dict, path: str, words: str) -> None:
    for f in UPSTREAM.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "dataplane-cluster-configuration.yaml").write_text(yaml.safe_dump({"clusters": [entry]}))
    with pytest.raises(FleetConfigError) as err:
        load_fleet_config(tmp_path)
    assert any(p == path and words in m for p, m in err.value.problems), err.value.problems


def record(cid: str, units: dict[str, tuple[int, int]], **kw: object) -> ClusterRecord:
    """A ready cluster with {type: (max_units, consumed_units)}."""
    types = {t: TypeUnits(max_units=m, consumed_units=c) for t, (m, c) in units.items()}
    return ClusterRecord(
        id=cid,
        instance_type=next(iter(units)),
        types=types,
        phase=ClusterPhase.READY,
        instances=sum(1 for _, c in units.values() if c),
        **kw,
    )


def inst(itype: str, units: int = 1, rejected_by: list[str] | None = None) -> ManagedInstance:
    return ManagedInstance(id="i", instance_type=itype, size="x1", units=units, rejected_by=rejected_by or [])


def test_a_cluster_running_two_types_takes_each_type_against_its_own_units() -> None:
    both = record("both", {"standard": (4, 4), "developer": (5, 0)})
    assert place_instance(inst("standard"), [both], STD) is None  # standard is full there
    assert place_instance(inst("developer"), [both], DEV) == "both"
    # Each type's evaluation counts the cluster with that type's figures only.
    assert tally_capacity([both], STD).free_units == 0 and tally_capacity([both], DEV).free_units == 5
    ev = evaluate_region([both], {"standard": STD, "developer": DEV})
    assert ev.scale_up_types() == ["standard"]


def test_legacy_one_type_records_become_that_types_units() -> None:
    old = ClusterRecord.model_validate({"id": "c", "instance_type": "standard", "max_units": 7, "consumed_units": 3})
    assert old.types == {"standard": TypeUnits(max_units=7, consumed_units=3)}


def test_report_of_several_types_updates_each_and_keeps_growths_counts() -> None:
    before = record("m", {"standard": (10, 3), "developer": (5, 1)}, manual=True)
    report = ClusterReport(
        cluster_id="m",
        instance_type="standard",
        phase=ClusterPhase.READY,
        max_units=12,
        max_units_by_type={"standard": 12, "developer": 6},
        manual=True,
    )
    after = merge_cluster_report(before, report)
    assert after is not None and after.types == {
        "standard": TypeUnits(max_units=12, consumed_units=3),
        "developer": TypeUnits(max_units=6, consumed_units=1),
    }
    rebuilt = merge_cluster_report(None, report)  # a registry rebuilt from reports keeps `manual`
    assert rebuilt is not None and rebuilt.manual and set(rebuilt.types) == {"standard", "developer"}


def test_a_registry_rebuilt_from_reports_keeps_the_listed_fields() -> None:
    """The region's input no longer lists its clusters (patch compact-registry): a registered
    cluster's `schedulable` and `kafka_instance_limit` come from its own input, through its reports."""
    inp = DataPlaneClusterInput(
        cluster_id="m",
        provider="aws",
        region="r",
        instance_type="standard",
        multi_az=False,
        manual=True,
        instance_types=["standard"],
        schedulable=False,
        instance_limit=3,
    )
    state = DataPlaneClusterState(
        cluster_id="m",
        provider="aws",
        region="r",
        instance_type="standard",
        phase=ClusterPhase.READY,
        capacity={"standard": TypeCapacity(max_units=10, remaining_units=10)},
    )
    rebuilt = merge_cluster_report(None, cluster_report(state, inp))
    assert rebuilt is not None and rebuilt.manual and not rebuilt.schedulable and rebuilt.instance_limit == 3
    assert place_instance(inst("standard"), [rebuilt], STD) is None
    listed = inp.model_copy(update={"schedulable": True})
    assert place_instance(inst("standard"), [merge_cluster_report(None, cluster_report(state, listed))], STD) == "m"


def test_enterprise_clusters_stay_out_of_scaling_limits_and_placement() -> None:
    ent = record("ent", {"standard": (100, 0)}, cluster_type="enterprise", manual=True)
    assert place_instance(inst("standard"), [ent], STD) is None
    assert tally_capacity([ent], STD).total_units == 0
    limited = STD.model_copy(update={"limit": 10})
    ev = evaluate_region([ent], {"standard": limited})
    assert ev.scale_up_types() == ["standard"]  # its room does not count for the region
    assert removal_decision(ent, [ent], STD).reason == RemovalReason.NOT_DYNAMIC


def test_registered_clusters_are_never_removed_by_dynamic_scale_down() -> None:
    manual = record("manual", {"standard": (10, 0)}, manual=True)
    busy = record("busy", {"standard": (10, 2)})
    assert cluster_to_remove([manual, busy], STD) is None
    assert removal_decision(manual, [manual, busy], STD).reason == RemovalReason.NOT_DYNAMIC
    created = record("created", {"standard": (10, 0)})
    decision = cluster_to_remove([manual, busy, created], STD)
    assert decision is not None and decision.cluster_id == "created"


def test_unschedulable_full_by_count_and_refusing_clusters_get_no_instance() -> None:
    off = record("off", {"standard": (10, 0)}, schedulable=False)
    full = record("full", {"standard": (10, 2)}, instance_limit=1)
    refused = record("refused", {"standard": (10, 0)})
    open_ = record("open", {"standard": (10, 0)}, instance_limit=-1)
    clusters = [off, full, refused, open_]
    assert place_instance(inst("standard", rejected_by=["refused"]), clusters, STD) == "open"
    assert place_instance(inst("standard"), clusters, STD) == "refused"
