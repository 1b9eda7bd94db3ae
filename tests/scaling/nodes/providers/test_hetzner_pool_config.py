"""A Hetzner pool's image per architecture and spread placement: what the config says, and what
a NodeGroupWithPriority may not say (refused naming the field)."""

from __future__ import annotations

from typing import Any

import pytest

from scaling.nodes.nodegroups import InvalidSpec, parse_node_group
from scaling.nodes.providers.hetzner import SPREAD_GROUP_MAX, ImageRef, image_ref, pick_placement_group


@pytest.mark.parametrize(
    "config,arch,expected",
    [
        ({}, "amd64", ImageRef(kind="name", value="ubuntu-24.04")),
        ({"image": "15512617"}, "arm64", ImageRef(kind="id", value="15512617")),
        # Cluster Autoscaler's README example of a snapshot label selector.
        ({"image": "customized_ubuntu=true"}, "amd64", ImageRef(kind="selector", value="customized_ubuntu=true")),
        ({"image": "os in (talos),!old"}, "amd64", ImageRef(kind="selector", value="os in (talos),!old")),
        (
            {"image": "debian-12", "images_for_arch": {"arm64": "os=talos-arm"}},
            "arm64",
            ImageRef(kind="selector", value="os=talos-arm"),
        ),
        (
            {"image": "debian-12", "images_for_arch": {"arm64": "os=talos-arm"}},
            "amd64",
            ImageRef(kind="name", value="debian-12"),
        ),
    ],
)
def test_image_ref_per_architecture(config: dict[str, Any], arch: str, expected: ImageRef) -> None:
    assert image_ref(config, "ubuntu-24.04", arch) == expected


def test_the_fullest_group_with_room_is_filled_first() -> None:
    assert pick_placement_group({}) is None
    assert pick_placement_group({1: SPREAD_GROUP_MAX, 2: 3, 3: 7}) == 3
    assert pick_placement_group({1: SPREAD_GROUP_MAX, 2: SPREAD_GROUP_MAX}) is None


def group(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "growth.autoscaling.dev/v1alpha1",
        "kind": "NodeGroupWithPriority",
        "metadata": {"name": "general"},
        "spec": {"pools": [{"provider": "hetzner", "serverType": ["CAX11", "CX32"], "priority": 50, "config": config}]},
    }


def test_a_mixed_arch_spread_pool_is_valid() -> None:
    parse_node_group(
        group({"images_for_arch": {"arm64": "os=talos", "amd64": 114690387}, "placement_group": "spread"}),
        {"hetzner"},
    )


@pytest.mark.parametrize(
    "config,field,words",
    [
        ({"images_for_arch": "talos"}, "spec.pools[0].config.images_for_arch", "mapping"),
        ({"images_for_arch": {"x86": "a"}}, "spec.pools[0].config.images_for_arch.x86", "amd64 or arm64"),
        ({"images_for_arch": {"arm64": ""}}, "spec.pools[0].config.images_for_arch.arm64", "image name"),
        # A name is accepted (looked up at create, as Cluster Autoscaler takes one); nothing is not.
        ({"placement_group": ""}, "spec.pools[0].config.placement_group", "'spread'"),
        ({"placement_group": True}, "spec.pools[0].config.placement_group", "id or a name"),
    ],
)
def test_bad_hetzner_pool_config_names_the_field(config: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_node_group(group(config), {"hetzner"})
    assert e.value.field == field and words in e.value.message
