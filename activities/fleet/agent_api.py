"""The agent API a data-plane cluster's agent (fleetshard) talks to, served by growth's worker.

- PUT /api/kafkas_mgmt/v1/agent-clusters/{id}/status: the body (AgentStatusReport) becomes the
  `report_agent_status` update on `fleet/cluster/<id>`; 204, or 400 naming the field (the body
  or the workflow's validator refused it) or the unknown cluster.
- GET /api/kafkas_mgmt/v1/agent-clusters/{id}: DataplaneClusterAgentConfig (spec.capacity.<type>
  .maxNodes), from query `agent_view`.
- GET /api/kafkas_mgmt/v1/agent-clusters/{id}/kafkas: the instances placed there and the reserved
  ones, as ManagedKafka objects (labels carry type and units, annotations bf2.org/id and
  bf2.org/placementId, spec.versions and spec.deleted, as fleetshard reads them).
- PUT /api/kafkas_mgmt/v1/agent-clusters/{id}/kafkas/status: instance id -> status, the
  `report_instance_statuses` update (placed -> ready, deleting -> gone); 200.

Auth: a bearer token per cluster (activities.fleet.tokens): no token -> 401, a token that is not
this cluster's, or a revoked one -> 403 (an HMAC token names no cluster, so another cluster's
token and a forged one look alike). It lives in the worker process (`serve`) because it only
needs a Temporal client, and one process fewer to run; it holds no state of its own.

Hostile input is refused here, before any workflow sees it (docs/operations.md, "Input
surfaces"): a body over MAX_BODY_BYTES is 413 unread; a Content-Type other than JSON is 415;
integers decode as Go's encoding/json does (scaling.fleet.contracts: no true, "18" or 18.0,
int32 range); free text is cut; a decoded update over MAX_UPDATE_BYTES is 413 unsent, so no
update can fail a workflow task on the server's payload limit. Every error, the framework's
own 404/405 and an unexpected 500 included, is kas-fleet-manager's `{kind: "Error", id, href,
code, reason}`; a workflow that does not answer in time is 503. A closed (deleted) cluster is
400 "not found" on all four endpoints, as upstream, and its workflow is never replayed: queries
are sent with reject_condition NOT_OPEN, and an update to a closed workflow is NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import (
    Client,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import QueryRejectCondition
from temporalio.service import RPCError, RPCStatusCode

from activities.fleet.settings import AgentApiSettings
from activities.fleet.tokens import AgentTokens
from activities.meter import process_meter
from activities.updates import MAX_UPDATE_BYTES, PayloadTooLarge, execute_update
from scaling.fleet import contracts
from scaling.fleet.contracts import AgentClusterView, AgentStatusReport, InstanceStatusReport, ManagedInstance
from scaling.fleet.metrics import AGENT_API_RESPONSES
from scaling.fleet.models import InstanceVersions
from scaling.text import shorten

log = logging.getLogger(__name__)

PREFIX = "/api/kafkas_mgmt/v1/agent-clusters"
PROFILE_QUOTA_LABEL = "bf2.org/kafkaInstanceProfileQuotaConsumed"
SUSPENDED_LABEL = "bf2.org/suspended"


# A request body is read up to this many bytes; a longer one is 413 (a status report of a
# cluster with every instance type is about 2 KB; kube-apiserver's own limit is 3 MiB).
MAX_BODY_BYTES = 1024 * 1024
MAX_REASON_CHARS = 2000  # of an error's reason (a validator's list of problems, say)

# kas-fleet-manager's error codes (pkg/errors/errors.go), so an agent's logs read the same as
# against the real one: code KAFKAS-MGMT-<n>, href /api/kafkas_mgmt/v1/errors/<n>. A status
# with no code of its own takes NewErrorFromHTTPStatusCode's: 21 for a 4xx, 9 for a 5xx.
ERR_FORBIDDEN = 4
ERR_NOT_FOUND = 7
ERR_GENERAL = 9
ERR_NOT_IMPLEMENTED = 10  # 405
ERR_UNAUTHENTICATED = 15
ERR_MALFORMED = 17
ERR_BAD_REQUEST = 21
ERR_FIELD_VALIDATION = 37
FIELD_VALIDATION_REASON = "Field validation failed"
JSON_TYPES = ("application/json",)


class ApiError(Exception):
    def __init__(self, status: int, reason: str, code: int = ERR_BAD_REQUEST) -> None:
        super().__init__(reason)
        self.status, self.reason, self.code = status, reason, code


def error_body(err: ApiError) -> dict[str, Any]:
    return {
        "id": str(err.code),
        "kind": "Error",
        "href": f"/api/kafkas_mgmt/v1/errors/{err.code}",
        "code": f"KAFKAS-MGMT-{err.code}",
        "reason": shorten(err.reason, MAX_REASON_CHARS),
    }


def framework_error(status: int, path: str, detail: str) -> ApiError:
    """What Starlette answers by itself (no route, wrong method), in upstream's words."""
    if status == 404:
        return ApiError(404, f"The requested resource '{shorten(path, 200)}' doesn't exist", ERR_NOT_FOUND)
    if status == 405:
        return ApiError(405, "HTTP Method not implemented for this endpoint", ERR_NOT_IMPLEMENTED)
    return ApiError(status, detail, ERR_BAD_REQUEST if status < 500 else ERR_GENERAL)


class UnexpectedErrors:
    """ASGI middleware: an exception no handler expected is a 500 in upstream's shape (code 9),
    logged here, never a plain-text traceback page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            log.exception("agent API: %s %s failed", scope.get("method"), scope.get("path"))
            if started or scope["type"] != "http":
                raise
            resp = JSONResponse(error_body(ApiError(500, "Unspecified error", ERR_GENERAL)), status_code=500)
            await resp(scope, receive, send)


async def bounded_body(request: Request) -> bytes:
    """The request's body, refused with 415 when it says it is not JSON and with 413 (unread
    beyond the limit) when it is over MAX_BODY_BYTES."""
    ctype = request.headers.get("content-type", "")
    media = ctype.partition(";")[0].strip().lower()
    if media and media not in JSON_TYPES and not media.endswith("+json"):
        raise ApiError(415, f"Content-Type {shorten(ctype, 100)!r} is not supported: send application/json")
    too_large = f"the request body is over {MAX_BODY_BYTES} bytes (1 MiB), the agent API's limit"
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise ApiError(413, too_large)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(413, too_large)
        chunks.append(chunk)
    return b"".join(chunks)


def field_errors(err: ValidationError) -> str:
    """`capacity.standard.remainingUnits: ...` for each problem: the field is named."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in err.errors())


def managed_kafka(inst: ManagedInstance, versions: InstanceVersions | None, reserved: bool) -> dict[str, Any]:
    """A ManagedKafka as upstream's services/kafka.go builds it (the parts growth knows: no
        capacity, oauth, owners or service accounts). Placement id: the instance id on its cluster
        (growth places an instance once); a reserved one's is its id, as upstream's. The quota label is
    the size's quotaConsumed, or its units when the config gives no quota."""
    labels = {
        **inst.labels,
        contracts.INSTANCE_PROFILE_LABEL: inst.instance_type,
        PROFILE_QUOTA_LABEL: str(inst.quota or inst.units),
    }
    if reserved:
        labels[contracts.RESERVED_DEPLOYMENT_LABEL] = "reserved"
    else:
        labels[SUSPENDED_LABEL] = "false"
    placement = inst.id if reserved else f"{inst.id}.{inst.cluster_id}"
    return {
        "id": inst.id,
        "kind": "ManagedKafka",
        "apiVersion": "managedkafka.bf2.org/v1alpha1",
        "metadata": {
            "name": inst.id,
            "namespace": inst.namespace or inst.id,
            "annotations": {"bf2.org/id": inst.id, "bf2.org/placementId": placement},
            "labels": labels,
        },
        "spec": {
            "endpoint": {"bootstrapServerHost": f"{inst.id}-dummyhost" if reserved else ""},
            "versions": (versions or InstanceVersions()).model_dump(by_alias=True),
            "deleted": inst.deleted,
            "owners": [],
        },
    }


INSTANCE_STATUSES = TypeAdapter(dict[str, InstanceStatusReport])


def create_app(client: Client, settings: AgentApiSettings, tokens: AgentTokens | None = None) -> FastAPI:
    tokens = tokens or AgentTokens(settings)
    timeout = timedelta(seconds=settings.temporal_timeout_s)
    app = FastAPI(title="growth agent API", docs_url=None, redoc_url=None, openapi_url=None)
    responses = process_meter().create_counter(AGENT_API_RESPONSES, "agent API answers, by HTTP status code")
    # The 5xx series exists from the start (0), as Prometheus's guidance asks of a series known to
    # come: an alert on its rate then reads 0, not "no data", while the API is healthy.
    responses.add(0, {"code": "500"})

    @app.middleware("http")
    async def _count(request: Request, call_next: Any) -> Response:
        try:
            response: Response = await call_next(request)
        except Exception:
            responses.add(1, {"code": "500"})
            raise
        responses.add(1, {"code": str(response.status_code)})
        return response

    app.add_middleware(UnexpectedErrors)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, err: ApiError) -> JSONResponse:
        return JSONResponse(error_body(err), status_code=err.status)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException) -> JSONResponse:
        api_err = framework_error(err.status_code, request.url.path, str(err.detail))
        return JSONResponse(error_body(api_err), status_code=api_err.status, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def _request_error(_: Request, err: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body(ApiError(400, str(err.errors())[:500])), status_code=400)

    def authorize(request: Request, cluster_id: str) -> None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "a bearer token is required", ERR_UNAUTHENTICATED)
        if tokens.revoked(cluster_id):
            raise ApiError(403, f"the token of cluster {shorten(cluster_id, 100)} is revoked", ERR_FORBIDDEN)
        if not tokens.verify(cluster_id, token.strip()):
            raise ApiError(403, f"the token is not valid for cluster {shorten(cluster_id, 100)}", ERR_FORBIDDEN)

    def not_found(cluster_id: str) -> ApiError:
        # upstream answers 400 here (404 is kept for refused tokens), also for a deleted cluster
        return ApiError(400, f"cluster agent with ID '{cluster_id}' not found")

    def unavailable(cluster_id: str, why: str) -> ApiError:
        return ApiError(503, f"cluster {cluster_id}: {shorten(why, 500)}; try again", ERR_GENERAL)

    async def view(cluster_id: str) -> AgentClusterView:
        handle = client.get_workflow_handle(contracts.cluster_workflow_id(cluster_id))
        try:
            # NOT_OPEN: the server answers for a closed (deleted) cluster without replaying it
            return await handle.query(
                contracts.QUERY_AGENT_VIEW,
                result_type=AgentClusterView,
                rpc_timeout=timeout,
                reject_condition=QueryRejectCondition.NOT_OPEN,
            )
        except WorkflowQueryRejectedError:
            raise not_found(cluster_id) from None
        except WorkflowQueryFailedError as err:
            raise unavailable(cluster_id, f"its workflow cannot answer: {err}") from None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise not_found(cluster_id) from None
            raise unavailable(cluster_id, err.message) from None

    @app.get(PREFIX + "/{cluster_id}")
    @app.get(PREFIX + "/{cluster_id}/", include_in_schema=False)  # httpx base_url + "" ends in "/"
    async def get_cluster(cluster_id: str, request: Request) -> dict[str, Any]:
        authorize(request, cluster_id)
        v = await view(cluster_id)
        # DataplaneClusterAgentConfig: everything under `spec`, as the agent reads it
        return {
            "spec": {
                "net": {"private": False},
                "capacity": {t: {"maxNodes": c.max_nodes} for t, c in sorted(v.capacity.items())},
                "observability": {"channel": "", "repository": "", "tag": ""},
            }
        }

    @app.get(PREFIX + "/{cluster_id}/kafkas")
    async def get_kafkas(cluster_id: str, request: Request) -> dict[str, Any]:
        authorize(request, cluster_id)
        v = await view(cluster_id)
        # upstream lists reserved ones only when a ready Strimzi version is known (else it fails)
        reserved = v.reserved if v.versions is not None else []
        items = [managed_kafka(i.model_copy(update={"cluster_id": cluster_id}), v.versions, False) for i in v.instances]
        items += [managed_kafka(i, v.versions, True) for i in reserved]
        return {"kind": "ManagedKafkaList", "items": items}

    @app.put(PREFIX + "/{cluster_id}/status", status_code=204)
    async def put_status(cluster_id: str, request: Request) -> Response:
        authorize(request, cluster_id)
        try:
            report = AgentStatusReport.model_validate_json(await bounded_body(request))
        except ValidationError as err:
            raise ApiError(400, field_errors(err), ERR_MALFORMED) from None
        problems = report.strimzi_problems()
        if problems:
            raise ApiError(400, f"{FIELD_VALIDATION_REASON}: {problems[0]}", ERR_FIELD_VALIDATION)
        await update(cluster_id, contracts.UPDATE_AGENT_STATUS, report)
        return Response(status_code=204)

    @app.put(PREFIX + "/{cluster_id}/kafkas/status")
    async def put_kafka_statuses(cluster_id: str, request: Request) -> Response:
        authorize(request, cluster_id)
        try:
            reports = INSTANCE_STATUSES.validate_json(await bounded_body(request))
        except ValidationError as err:
            raise ApiError(400, field_errors(err), ERR_MALFORMED) from None
        if reports:
            await update(cluster_id, contracts.UPDATE_INSTANCE_STATUSES, reports)
        else:
            await view(cluster_id)  # nothing to record; an unknown cluster is still 400
        return Response(status_code=200)  # upstream answers 200 here, 204 for the cluster's status

    async def update(cluster_id: str, name: str, arg: Any) -> None:
        handle = client.get_workflow_handle(contracts.cluster_workflow_id(cluster_id))
        try:
            await execute_update(handle, name, arg, rpc_timeout=timeout, max_payload_bytes=MAX_UPDATE_BYTES)
        except PayloadTooLarge as err:
            raise ApiError(413, str(err)) from None
        except WorkflowUpdateFailedError as err:
            # the workflow's validator refused it; its message names the field
            cause = err.cause
            raise ApiError(400, getattr(cause, "message", None) or str(cause)) from None
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            why = f"its workflow did not answer within {settings.temporal_timeout_s:g} s"
            raise unavailable(cluster_id, why) from None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:  # never created, or already deleted
                raise not_found(cluster_id) from None
            raise unavailable(cluster_id, err.message) from None

    return app


async def serve(client: Client, settings: AgentApiSettings, stop: asyncio.Event) -> None:
    """Serve the agent API on settings.bind until `stop` is set."""
    host, _, port = settings.bind.rpartition(":")
    config = uvicorn.Config(
        create_app(client, settings), host=host or "127.0.0.1", port=int(port), log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    log.info("agent API on http://%s", settings.bind)
    await stop.wait()
    server.should_exit = True
    await task
