"""kas-fleet-manager's own configuration files (tests/scaling/fleet/upstream/, copied from its
config/ directory: data as shipped, comments left out) load as they are."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from scaling.fleet.config import FleetConfigError, load_fleet_config, load_fleet_config_text, load_kas_fleet_manager_dir
from scaling.fleet.models import ClusterPhase
from scaling.fleet.placement import instance_quota, reserved_instances

UPSTREAM = Path(__file__).parent / "upstream"


def test_upstream_files_load_as_they_are() -> None:
    cfg = load_fleet_config(UPSTREAM)  # a directory: kas-fleet-manager's files
    std, dev = cfg.instance_type("standard"), cfg.instance_type("developer")
    assert std is not None and dev is not None
    assert [(s.id, s.capacity_consumed, s.quota_consumed) for s in std.sizes] == [("x1", 1, 1), ("x2", 2, 2)]
    assert [b.id for b in std.supported_billing_models] == ["standard", "marketplace", "eval", "enterprise"]
    assert std.supported_billing_models[2].grace_period_days == 4
    assert dev.sizes[0].lifespan_seconds == 172800 and dev.sizes[0].supported_az_modes == ["single"]
    region = cfg.region("aws", "us-east-1")
    assert region is not None and set(region.supported_instance_type) == {"standard", "developer"}
    assert region.supported_instance_type["standard"].limit is None  # `standard: {}` = no limit
    ds = cfg.dynamic_scaling
    assert (ds.enable_dynamic_data_plane_scale_up, ds.new_data_plane_openshift_version) == (False, "openshift-v4.11.22")
    dev_machines = cfg.machines("aws", "developer")
    assert dev_machines is not None and dev_machines.compute_node_autoscaling.max_compute_nodes == 3
    assert cfg.node_prewarming["standard"].num_reserved_instances == 0


def test_reserved_and_placed_instances_carry_the_sizes_quota() -> None:
    doc = yaml.safe_load((UPSTREAM / "kafka-instance-types-configuration.yaml").read_text())
    doc["supported_instance_types"][0]["sizes"][0]["quotaConsumed"] = 5  # standard x1
    cfg = load_fleet_config_text(
        yaml.safe_dump({**doc, "node_prewarming": {"standard": {"num_reserved_instances": 2}}})
    )
    assert (instance_quota(cfg, "standard", "x1"), instance_quota(cfg, "standard", "x9")) == (5, 0)
    reserved = reserved_instances("c1", ClusterPhase.READY, ["standard"], cfg)
    assert [(r.id, r.units, r.quota) for r in reserved] == [
        ("reserved-kafka-standard-1", 1, 5),
        ("reserved-kafka-standard-2", 1, 5),
    ]


def test_a_missing_file_leaves_its_section_at_the_default(tmp_path: Path) -> None:
    shutil.copy(UPSTREAM / "kafka-instance-types-configuration.yaml", tmp_path)
    cfg = load_kas_fleet_manager_dir(tmp_path)
    assert cfg.supported_providers == [] and cfg.node_prewarming == {}


def test_bad_values_are_refused_naming_the_upstream_field(tmp_path: Path) -> None:
    for f in UPSTREAM.glob("*.yaml"):
        shutil.copy(f, tmp_path)
    path = tmp_path / "kafka-instance-types-configuration.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["supported_instance_types"][0]["sizes"][1]["capacityConsumed"] = 0
    doc["supported_instance_types"][1]["sizes"][0]["supportedAZModes"] = ["triple"]
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(FleetConfigError) as info:
        load_kas_fleet_manager_dir(tmp_path)
    paths = [p for p, _ in info.value.problems]
    assert "supported_instance_types[0].sizes[1].capacityConsumed" in paths
    assert "supported_instance_types[1].sizes[0].supportedAZModes[0]" in paths


def test_one_document_takes_upstream_sections_too() -> None:
    sections = {
        name: yaml.safe_load((UPSTREAM / f"{name}.yaml").read_text())
        for name in ("kafka-instance-types-configuration", "provider-configuration")
    }
    doc = {
        **sections["kafka-instance-types-configuration"],
        **sections["provider-configuration"],
        "dynamic_scaling": yaml.safe_load((UPSTREAM / "dynamic-scaling-configuration.yaml").read_text()),
    }
    cfg = load_fleet_config_text(yaml.safe_dump(doc))
    assert cfg.instance_type("standard").biggest_units() == 2  # type: ignore[union-attr]
