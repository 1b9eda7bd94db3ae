"""schemathesis against growth's agent API with kas-fleet-manager's own private OpenAPI (a copy
with its spec errors fixed, each explained: kas-fleet-manager-private.yaml beside this file).

In process (the ASGI app, schemathesis's client), backed by the time-skipping Temporal server
and a DataPlaneCluster workflow waiting for its agent. Bounded and seeded: EXAMPLES cases per
operation and mode (positive: what the spec allows; negative: what it does not), derandomized.
Checks: no 5xx, every status and content type documented, every body in the documented shape.
Afterwards the cluster's workflow still takes a good report."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from temporalio.testing import WorkflowEnvironment

from activities.fleet.agent_api import create_app
from activities.fleet.settings import AgentApiSettings
from activities.fleet.tokens import AgentTokens
from scaling.fleet.models import ClusterPhase
from tests.activities.fleet.test_agent_api import api, body
from tests.polling import until
from tests.workflows.fleet.stubs import FleetWorld
from tests.workflows.fleet.test_cluster import cluster_input, in_phase, running

SPEC = Path(__file__).with_name("kas-fleet-manager-private.yaml")
EXAMPLES = 10  # per operation and mode: 20 per operation
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


class OneToken(AgentTokens):
    """The fuzzer's token is good for the cluster under test only."""

    def __init__(self, settings: AgentApiSettings, cluster_id: str) -> None:
        super().__init__(settings)
        self.cluster_id = cluster_id

    def verify(self, cluster_id: str, token: str) -> bool:
        return cluster_id == self.cluster_id and token == "fuzz-token"


def fuzz(schema: schemathesis.BaseSchema, cluster_id: str) -> Counter[tuple[str, int]]:
    """Every operation in both modes; the answers' (operation, status) counts."""
    seen: Counter[tuple[str, int]] = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @hsettings(
                max_examples=EXAMPLES,
                derandomize=True,  # seeded: the same cases every run
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def one(case: schemathesis.Case) -> None:
                case.path_parameters = {**(case.path_parameters or {}), "id": cluster_id}
                response = case.call(headers={"Authorization": "Bearer fuzz-token"})
                seen[(case.operation.label, response.status_code)] += 1
                case.validate_response(response, checks=CHECKS)

            one()
    return seen


async def test_the_agent_api_answers_upstreams_spec_and_its_workflow_keeps_serving(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_text("fuzz-secret")
    settings = AgentApiSettings(token_secret_file=str(tmp_path / "secret"))
    inp = cluster_input()
    async with running(env, FleetWorld(), inp) as handle:
        await until(lambda: in_phase(handle, ClusterPhase.WAITING))
        schema = schemathesis.openapi.from_path(SPEC)
        schema.app = create_app(env.client, settings, OneToken(settings, inp.cluster_id))
        # schemathesis's ASGI client is synchronous: it runs beside this loop, which serves Temporal
        seen = await asyncio.to_thread(fuzz, schema, inp.cluster_id)
        assert not [k for k in seen if k[1] >= 500], seen
        assert any(status in (200, 204) for (_, status) in seen), seen  # cases got through, not only refusals
        async with api(env, settings, inp.cluster_id) as http:
            assert (await http.put("/status", json=body(max_units=12, remaining=9))).status_code == 204
        assert await in_phase(handle, ClusterPhase.READY)
        await handle.terminate()
