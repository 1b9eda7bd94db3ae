"""A thin async client of OCM's clusters_mgmt API over httpx, and the mapping of OCM's answers
to the ApplicationError types the fleet contract names:

- 401/403                 -> OcmUnauthorized, non-retryable (the token is wrong)
- 400/409/422             -> OcmBadRequest, non-retryable, naming the attribute OCM refused
- 404                     -> OcmNotFound (callers that expect absence check `status` first)
- 429, 5xx, timeouts, ... -> OcmUnavailable, retryable (Temporal's retry policy backs off;
                             a 429's Retry-After becomes the next retry's delay)

The bearer token is read from the file or environment variable settings name, per request (a
rotated token is picked up), and never appears in a message.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
from temporalio.exceptions import ApplicationError

from activities.answers import AsyncBoundedTransport, quoted
from activities.fleet.settings import OcmSettings
from activities.secrets import read_secret, secret_source
from scaling.fleet import contracts

API = "/api/clusters_mgmt/v1"
_ATTRIBUTE = re.compile(r"[Aa]ttributes? '([^']+)'")


class OcmClient:
    def __init__(self, settings: OcmSettings, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        # Made on first use, inside the worker's event loop.
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.settings.base_url.rstrip("/") + API,
                timeout=self.settings.timeout_s,
                transport=AsyncBoundedTransport(self._transport),
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _token(self) -> str:
        s = self.settings
        return required_secret("OCM token", s.token_env, s.token_file, contracts.ERR_OCM_UNAUTHORIZED)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        expect: tuple[int, ...] = (),
    ) -> httpx.Response:
        """Send; answers with a 2xx status or one in `expect` are returned, others raise the
        contract's ApplicationError."""
        headers = {"Authorization": f"Bearer {self._token()}"}
        try:
            resp = await self._client().request(method, path, json=json, params=params, headers=headers)
        except httpx.TimeoutException as err:
            raise ApplicationError(f"OCM {method} {path}: timed out ({type(err).__name__})", type=contracts.ERR_OCM_UNAVAILABLE) from None  # fmt: skip
        except httpx.TransportError as err:
            # The request may have reached OCM (a lost response): retrying is safe because every
            # create looks for what an earlier attempt made first.
            raise ApplicationError(f"OCM {method} {path}: {type(err).__name__}: {err}", type=contracts.ERR_OCM_UNAVAILABLE) from None  # fmt: skip
        if resp.is_success or resp.status_code in expect:
            return resp
        raise ocm_error(method, path, resp)

    async def search_clusters(self, **terms: str) -> list[dict[str, Any]]:
        """Clusters matching every `field = 'value'` term (values never hold quotes: growth's ids)."""
        search = " and ".join(f"{k} = '{_quote_safe(v)}'" for k, v in terms.items())
        resp = await self.request("GET", "/clusters", params={"search": search, "size": "100"})
        return list(resp.json().get("items") or [])


def required_secret(what: str, env: str, path: str | None, error_type: str) -> str:
    """The secret, or a non-retryable error saying where it is expected (never what it is)."""
    secret = read_secret(env, path)
    if not secret:
        raise ApplicationError(f"no {what}: set {secret_source(env, path)}", type=error_type, non_retryable=True)
    return secret


def _quote_safe(value: str) -> str:
    if "'" in value:
        raise ApplicationError(f"OCM search value {value!r} holds a quote", type=contracts.ERR_OCM_BAD_REQUEST, non_retryable=True)  # fmt: skip
    return value


def reason_of(resp: httpx.Response) -> tuple[str, str]:
    """OCM's error (code, reason), or the raw text when the body is not an OCM error."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Error":
        return quoted(body.get("code") or resp.status_code), quoted(body.get("reason") or "")
    return str(resp.status_code), quoted(resp.text)


def ocm_error(method: str, path: str, resp: httpx.Response) -> ApplicationError:
    status = resp.status_code
    code, reason = reason_of(resp)
    where = f"OCM {method} {path} answered {status} ({code})"
    if status in (401, 403):
        return ApplicationError(
            f"{where}: the token is refused: {reason}", type=contracts.ERR_OCM_UNAUTHORIZED, non_retryable=True
        )
    if status in (400, 409, 422):  # a 409 a caller did not expect is as final as a 400
        field = _ATTRIBUTE.search(reason)
        named = f"field {field.group(1)}: " if field else ""
        return ApplicationError(
            f"{where}: {named}{reason}",
            {"status": status, "code": code, "field": field.group(1) if field else "", "reason": reason},
            type=contracts.ERR_OCM_BAD_REQUEST,
            non_retryable=True,
        )
    if status == 404:
        return ApplicationError(f"{where}: {reason}", type=contracts.ERR_OCM_NOT_FOUND)
    delay: timedelta | None = None
    if status == 429:
        try:
            delay = timedelta(seconds=max(1, int(resp.headers.get("Retry-After", "1"))))
        except ValueError:
            delay = None
    return ApplicationError(f"{where}: {reason}", type=contracts.ERR_OCM_UNAVAILABLE, next_retry_delay=delay)
