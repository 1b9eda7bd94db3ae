"""PD over httpx: the stores API and `POST /autoscaling`.

Released PD answers /autoscaling with a JSON list of plans {component, count, resource_type,
labels}, and with `null` both when there is no plan and when it could not read its metrics.
`autoscaling()` therefore returns None for `null`: "PD said nothing", which must never be
read as "no groups should exist". Transport and HTTP errors raise PdUnavailable.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from activities.answers import MAX_RESULT_ANSWER_BYTES, BoundedTransport, quoted

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}


class PdUnavailable(Exception):
    """PD could not be asked or answered an error; the message says why."""


def parse_byte_size(text: Any) -> int:
    """PD's byte sizes: "59.99GiB", "1.5KiB", "0B" (binary units, as docker/go-units reads them);
    plain numbers are bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a byte size: {text!r}")
    return int(float(m.group(1)) * 1024 ** _POWERS[m.group(2).lower()])


class PdClient:
    def __init__(self, base_url: str, *, timeout_s: float = 5.0, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(
            base_url=self.base_url, timeout=timeout_s, transport=BoundedTransport(transport, MAX_RESULT_ANSWER_BYTES)
        )

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise PdUnavailable(f"PD {self.base_url}: {type(exc).__name__}: {exc}") from None
        if resp.status_code != 200:
            raise PdUnavailable(f"PD {self.base_url}{path}: HTTP {resp.status_code}: {quoted(resp.text)}")
        try:
            return resp.json()
        except ValueError:
            raise PdUnavailable(f"PD {self.base_url}{path}: not JSON: {quoted(resp.text)}") from None

    def autoscaling(self, strategy: dict[str, Any]) -> list[dict[str, Any]] | None:
        """PD's plans, or None when PD answered null (no plan, or no metrics: undecidable)."""
        body = self._call("POST", "/autoscaling", json=strategy)
        if body is None:
            return None
        if not isinstance(body, list) or not all(isinstance(p, dict) for p in body):
            raise PdUnavailable(f"PD {self.base_url}/autoscaling: expected a list of plans, got {quoted(body)}")
        plans = []
        for plan in body:
            try:
                count = plan["count"]
                if type(count) is not int or count < 0:  # PD's Plan.Count is a Go uint64
                    raise ValueError(f"count: expected a non-negative integer, got {quoted(count)}")
                plans.append(
                    {
                        "component": str(plan["component"]),
                        "count": count,
                        "resource_type": str(plan.get("resource_type") or ""),
                        "labels": {str(k): str(v) for k, v in (plan.get("labels") or {}).items()},
                    }
                )
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise PdUnavailable(
                    f"PD {self.base_url}/autoscaling: malformed plan {quoted(plan)}: {quoted(exc)}"
                ) from None
        return plans

    def stores(self) -> list[dict[str, Any]]:
        """Up stores as {id, address, labels, capacity, available} with sizes in bytes."""
        body = self._call("GET", "/pd/api/v1/stores")
        out = []
        try:
            for entry in (body or {}).get("stores") or []:
                store, status = entry.get("store") or {}, entry.get("status") or {}
                if store.get("state_name", "Up") != "Up":
                    continue
                out.append(
                    {
                        "id": int(store["id"]),
                        "address": str(store.get("address", "")),
                        "labels": {lb["key"]: lb["value"] for lb in store.get("labels") or []},
                        "capacity": parse_byte_size(status.get("capacity", 0)),
                        "available": parse_byte_size(status.get("available", 0)),
                    }
                )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise PdUnavailable(f"PD {self.base_url}: malformed stores answer: {quoted(repr(exc))}") from None
        return out


def pod_of_address(address: str) -> str:
    """The pod name in a TiKV/TiDB advertise address `<pod>.<peer-svc>.<ns>.svc:<port>`."""
    return address.split(":", 1)[0].split(".", 1)[0]
