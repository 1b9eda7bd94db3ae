"""Fleet configuration: seed 000's shapes (kas-fleet-manager's configuration files) load, and every
bad field is named."""

from __future__ import annotations

import pytest
import yaml

from scaling.fleet.config import FleetConfigError, load_fleet_config, load_fleet_config_text, parse_fleet_config

EXAMPLE = """
supported_providers:
  - name: aws
    default: true
    regions:
      - name: us-east-1
        default: true
        supported_instance_type:
          standard:
            limit: 30
            min_available_capacity_slack_streaming_units: 5
          developer:
            limit: null
dynamic_scaling:
  enable_dynamic_data_plane_scale_up: true
  enable_dynamic_data_plane_scale_down: true
  compute_machine_per_cloud_provider:
    aws:
      cluster_wide_workload:
        compute_machine_type: m5.2xlarge
        compute_node_autoscaling: {min_compute_nodes: 6, max_compute_nodes: 18}
      kafka_workload_per_instance_type:
        standard:
          compute_machine_type: r5.xlarge
          compute_node_autoscaling: {min_compute_nodes: 3, max_compute_nodes: 18}
          expected_max_streaming_units: 10
        developer:
          compute_machine_type: m5.2xlarge
          compute_node_autoscaling: {min_compute_nodes: 1, max_compute_nodes: 1}
supported_instance_types:
  - id: standard
    sizes:
      - {id: x1, capacity_consumed: 1}
      - {id: x2, capacity_consumed: 2}
  - id: developer
    sizes:
      - {id: x1, capacity_consumed: 1}
node_prewarming:
  standard:
    num_reserved_instances: 2
    base_streaming_unit_size: x1
"""


def _doc() -> dict:
    return yaml.safe_load(EXAMPLE)


def _problems(doc: dict) -> dict[str, str]:
    with pytest.raises(FleetConfigError) as info:
        parse_fleet_config(doc)
    return dict(info.value.problems)


def test_example_loads_with_seed_shapes(tmp_path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(EXAMPLE)
    cfg = load_fleet_config(path)
    region = cfg.region("aws", "us-east-1")
    assert region is not None
    assert region.supported_instance_type["standard"].limit == 30
    assert region.supported_instance_type["standard"].min_available_capacity_slack_streaming_units == 5
    assert region.supported_instance_type["developer"].limit is None
    std = cfg.instance_type("standard")
    assert std is not None and std.biggest_units() == 2 and std.size("x2").capacity_consumed == 2
    machines = cfg.machines("aws", "standard")
    assert machines is not None and machines.compute_node_autoscaling.max_compute_nodes == 18
    assert cfg.node_prewarming["standard"].num_reserved_instances == 2
    assert cfg.region("aws", "eu-west-1") is None and cfg.region("gcp", "us-east-1") is None


def test_empty_document_is_an_empty_fleet() -> None:
    cfg = load_fleet_config_text("")
    assert cfg.supported_providers == [] and cfg.node_prewarming == {}


def test_negative_limit_is_named() -> None:
    doc = _doc()
    doc["supported_providers"][0]["regions"][0]["supported_instance_type"]["standard"]["limit"] = -1
    problems = _problems(doc)
    assert "supported_providers[0].regions[0].supported_instance_type.standard.limit" in problems


def test_limit_zero_is_valid_and_kept_apart_from_none() -> None:
    doc = _doc()
    doc["supported_providers"][0]["regions"][0]["supported_instance_type"]["standard"]["limit"] = 0
    cfg = parse_fleet_config(doc)
    limits = cfg.region("aws", "us-east-1").supported_instance_type
    assert limits["standard"].limit == 0 and limits["developer"].limit is None


def test_unknown_field_is_named() -> None:
    doc = _doc()
    doc["supported_providers"][0]["regions"][0]["supported_instance_type"]["standard"]["slack"] = 3
    problems = _problems(doc)
    assert "supported_providers[0].regions[0].supported_instance_type.standard.slack" in problems


def test_pool_min_above_max_is_named() -> None:
    doc = _doc()
    pool = doc["dynamic_scaling"]["compute_machine_per_cloud_provider"]["aws"]["kafka_workload_per_instance_type"][
        "standard"
    ]
    pool["compute_node_autoscaling"] = {"min_compute_nodes": 9, "max_compute_nodes": 3}
    problems = _problems(doc)
    key = "dynamic_scaling.compute_machine_per_cloud_provider.aws.kafka_workload_per_instance_type.standard.compute_node_autoscaling"
    assert key in problems and "min_compute_nodes" in problems[key]


def test_size_without_units_is_named() -> None:
    doc = _doc()
    doc["supported_instance_types"][0]["sizes"][1] = {"id": "x2", "capacity_consumed": 0}
    assert "supported_instance_types[0].sizes[1].capacity_consumed" in _problems(doc)


def test_region_type_not_defined_is_named() -> None:
    doc = _doc()
    doc["supported_providers"][0]["regions"][0]["supported_instance_type"]["enterprise"] = {"limit": 5}
    problems = _problems(doc)
    assert problems["supported_providers[0].regions[0].supported_instance_type.enterprise"].startswith(
        "unknown instance type"
    )


def test_prewarming_size_must_be_a_size_of_the_type() -> None:
    doc = _doc()
    doc["node_prewarming"]["standard"]["base_streaming_unit_size"] = "x9"
    assert "node_prewarming.standard.base_streaming_unit_size" in _problems(doc)


def test_prewarming_unknown_type_is_named() -> None:
    doc = _doc()
    doc["node_prewarming"]["premium"] = {"num_reserved_instances": 1, "base_streaming_unit_size": "x1"}
    assert "node_prewarming.premium" in _problems(doc)


def test_region_type_without_machines_is_named_when_scale_up_enabled() -> None:
    doc = _doc()
    del doc["dynamic_scaling"]["compute_machine_per_cloud_provider"]["aws"]["kafka_workload_per_instance_type"][
        "developer"
    ]
    problems = _problems(doc)
    assert "supported_providers[0].regions[0].supported_instance_type.developer" in problems
    doc["dynamic_scaling"]["enable_dynamic_data_plane_scale_up"] = False
    parse_fleet_config(doc)  # nothing to create clusters with is fine when growth creates none


def test_every_problem_is_reported_at_once() -> None:
    doc = _doc()
    doc["supported_instance_types"][0]["sizes"][0]["capacity_consumed"] = -5
    doc["node_prewarming"]["standard"]["num_reserved_instances"] = -1
    problems = _problems(doc)
    assert "supported_instance_types[0].sizes[0].capacity_consumed" in problems
    assert "node_prewarming.standard.num_reserved_instances" in problems


def test_document_must_be_a_mapping() -> None:
    assert "(document)" in _problems(["not", "a", "mapping"])  # type: ignore[arg-type]
