"""The one worker composes every loop: what it registers is exactly each loop's contract."""

from __future__ import annotations

from pathlib import Path

from temporalio import activity

import worker
from activities.settings import Settings
from scaling.components import contracts as components
from scaling.fleet import contracts as fleet
from scaling.nodes import contracts as nodes
from workflows.all import WORKFLOWS

KUBECONFIG = (
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
    "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
)


def registered(settings: Settings) -> list[str]:
    return [activity._Definition.must_from_callable(fn).name for fn in worker.build_activities(settings)]


def test_worker_registers_every_loops_contract_names(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)  # never contacted: building the activities only reads it
    plain = Settings.model_validate({"kubernetes": {"kubeconfig": str(kubeconfig)}})
    names = registered(plain)
    assert len(names) == len(set(names))
    assert (
        set(names)
        == nodes.ACTIVITY_NAMES | components.ACTIVITY_NAMES | fleet.DECISION_NAMES | components.DECISION_NAMES
    )

    # The fleet loop talks to OCM only on a worker configured for it.
    with_fleet = Settings.model_validate({"kubernetes": {"kubeconfig": str(kubeconfig)}, "fleet": {}})
    names = registered(with_fleet)
    assert len(names) == len(set(names))
    assert (
        set(names)
        == nodes.ACTIVITY_NAMES
        | components.ACTIVITY_NAMES
        | fleet.ACTIVITY_NAMES
        | fleet.DECISION_NAMES
        | components.DECISION_NAMES
    )


def test_every_loop_has_workflows_registered() -> None:
    names = {w.__temporal_workflow_definition.name for w in WORKFLOWS}
    assert {"NodeAutoscaler", "NodeRequest", "NodeScaleDown", "MachineGC"} <= names
    assert {"FleetAutoscaler", "DataPlaneCluster", "ComponentAutoscaler"} <= names
