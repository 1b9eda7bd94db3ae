"""Cluster Autoscaler's Hetzner settings read the way CA's Go code reads them.

CA decodes its cluster config with Go's encoding/json into typed structs
(cluster-autoscaler/cloudprovider/hetzner/hetzner_manager.go: ClusterConfig, NodeConfig,
ImageList; apiv1.Taint), so:
- keys match case-insensitively (an exact match first), unknown keys are ignored, `null`
  leaves a field at its zero value;
- a value of the wrong JSON type anywhere is an error and CA stops: the strict models below
  refuse it too, and the refusal names the setting's path (`nodeConfigs.pool1.labels`).
Environment values go through Go's parsers: strconv.ParseBool, strconv.Atoi (int64 on the
64-bit builds CA ships), base64.StdEncoding (which skips \\r and \\n, so the output of plain
`base64`, wrapped at 76 columns, decodes), and the priority expander's regexes are RE2
(Go's regexp): what RE2 refuses (lookahead, backreferences) makes CA ignore the whole
ConfigMap, and POSIX classes such as [[:digit:]] mean what they mean in RE2.

Fields per CA release (the structs at each tag): nodeConfigs {cloudInit, labels, taints,
placementGroup} and imagesForArch from 1.32; HCLOUD_CLUSTER_CONFIG_FILE from 1.33; per-pool
imagesForArch from 1.34; defaultSubnetIPRange and per-pool subnetIPRange from 1.35;
serverLabels from 1.36; per-pool firewalls after 1.36 (master).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import re2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # strconv.ParseBool
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_DIGITS = frozenset("0123456789")


class CaSettingError(ValueError):
    """A value CA itself refuses; `field` names the setting."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def go_parse_bool(value: str, field: str) -> bool:
    if value in GO_TRUE:
        return True
    if value in GO_FALSE:
        return False
    raise CaSettingError(field, f"not a boolean as Go reads one (1/t/true/0/f/false...): {value!r}")


def go_env_bool(env: dict[str, str], name: str, default: bool = True) -> bool:
    """CA's HCLOUD_PUBLIC_IPV4/IPV6: unset or "" is the default, else strconv.ParseBool."""
    value = env.get(name, "")
    return default if value == "" else go_parse_bool(value, name)


def go_atoi(value: str) -> int | None:
    """strconv.Atoi on a 64-bit build: an optional sign and decimal digits, within int64;
    None where Go returns an error."""
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits or not set(digits) <= _DIGITS:
        return None
    n = int(value)
    return n if INT64_MIN <= n <= INT64_MAX else None


def _leading_digits(s: str) -> tuple[str, str]:
    end = next((i for i, c in enumerate(s) if c not in _DIGITS), len(s))
    return s[:end], s[end:]


# time.ParseDuration's units, in nanoseconds (µ is U+00B5, μ U+03BC: Go takes both)
_GO_UNITS = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,
    "\u03bcs": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}


def go_parse_duration(value: str, field: str) -> float:
    """Seconds from time.ParseDuration, which CA's duration flags go through: a sign, then decimal
    numbers each with a unit ("300ms", "-1.5h", "2h45m"), or a bare "0"; within int64 nanoseconds.
    Refused where Go refuses; a fraction is counted to the nanosecond (Go's float may differ by one)."""

    def refused(why: str) -> CaSettingError:
        return CaSettingError(field, f"{why} in duration {value!r} (Go's time.ParseDuration)")

    s, negative = value, False
    if s[:1] in ("-", "+"):
        negative, s = s[0] == "-", s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise refused("invalid")
    total = 0
    while s:
        whole, s = _leading_digits(s)
        frac = ""
        if s[:1] == ".":
            frac, s = _leading_digits(s[1:])
        if not whole and not frac:
            raise refused("invalid")
        end = next((i for i, c in enumerate(s) if c == "." or c in _DIGITS), len(s))  # Go: up to a number
        unit, s = s[:end], s[end:]
        if not unit:
            raise refused("missing unit")
        if unit not in _GO_UNITS:
            raise refused(f"unknown unit {unit!r}")
        scale = _GO_UNITS[unit]
        total += int(whole or "0") * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
        if total > INT64_MAX + (1 if negative else 0):
            raise refused("overflow")
    return (-total if negative else total) / 1e9


def go_base64(value: str, field: str) -> bytes:
    """base64.StdEncoding.DecodeString: padded standard alphabet; \\r and \\n are skipped."""
    text = value.replace("\r", "").replace("\n", "")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise CaSettingError(field, f"not base64 as Go's StdEncoding reads it: {e}") from None


class _GoStruct(BaseModel):
    """A Go struct under encoding/json: keys case-insensitive, unknown keys kept aside (CA
    ignores them; the migration notes them), null = the zero value, types strict."""

    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _go_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # the strict model refuses it, naming the field
        names = {(f.alias or n): n for n, f in cls.model_fields.items()}
        folded = {k.lower(): k for k in names}
        out: dict[str, Any] = {}
        for key, value in data.items():
            json_name = key if key in names else folded.get(str(key).lower())
            if json_name is None:
                out[key] = value
            elif value is not None:  # null leaves the zero value
                out[json_name] = value
        return out

    def unknown(self) -> list[str]:
        return sorted(self.model_extra or {})


class CaImageList(_GoStruct):
    arm64: str = ""
    amd64: str = ""


class CaTaint(_GoStruct):
    key: str = ""
    value: str = ""
    effect: str = ""
    time_added: str | None = Field(None, alias="timeAdded")


class CaNodeConfig(_GoStruct):
    cloud_init: str = Field("", alias="cloudInit")
    placement_group: str = Field("", alias="placementGroup")
    taints: list[CaTaint] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    server_labels: dict[str, str] = Field(default_factory=dict, alias="serverLabels")
    images_for_arch: CaImageList | None = Field(None, alias="imagesForArch")
    subnet_ip_range: str = Field("", alias="subnetIPRange")
    firewalls: list[str] = Field(default_factory=list)


class CaClusterConfig(_GoStruct):
    images_for_arch: CaImageList = Field(default_factory=CaImageList, alias="imagesForArch")
    node_configs: dict[str, CaNodeConfig] = Field(default_factory=dict, alias="nodeConfigs")
    default_subnet_ip_range: str = Field("", alias="defaultSubnetIPRange")


_JSON_TYPES = {
    "string_type": "a string",
    "dict_type": "an object",
    "list_type": "a list",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def _path(loc: tuple[Any, ...]) -> str:
    """pydantic's location as the JSON path CA's users write (aliases are the JSON names)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def parse_cluster_config(text: str | bytes, field: str) -> CaClusterConfig:
    """The cluster config CA would decode, or CaSettingError naming the first bad setting."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CaSettingError(field, f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise CaSettingError(field, "must be a JSON object")
    try:
        return CaClusterConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = _path(err["loc"]) or field
        wanted = _JSON_TYPES.get(err["type"])
        got = type(err["input"]).__name__ if err.get("input") is not None else "null"
        got = {"dict": "an object", "list": "a list", "str": "a string", "int": "a number", "float": "a number"}.get(
            got, got
        )
        message = f"must be {wanted}, got {got}" if wanted else err["msg"]
        raise CaSettingError(where, f"{message} (Go's encoding/json refuses it and CA stops)") from None


def parse_priorities(text: str) -> list[tuple[int, list[Any]]]:
    """The priority expander's ConfigMap as CA reads it (sigs.k8s.io/yaml into
    map[int][]string, each entry compiled as RE2), highest priority first. Anything CA's
    parsePrioritiesYAMLString fails on makes CA ignore the whole ConfigMap: refused here,
    naming the entry."""
    if not text:
        raise CaSettingError("priorities", "is empty (CA ignores the ConfigMap)")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise CaSettingError("priorities", f"invalid YAML (CA ignores the whole ConfigMap): {e}") from None
    if not isinstance(data, dict) or not data:
        raise CaSettingError("priorities", "must map priorities to lists of regexes (CA ignores the ConfigMap)")
    options = re2.Options()
    options.log_errors = False
    out = []
    for key, regexes in data.items():
        prio = key if isinstance(key, int) and not isinstance(key, bool) else go_atoi(str(key))
        if prio is None or isinstance(key, bool):
            raise CaSettingError(f"priorities[{key!r}]", "a priority must be an integer (CA ignores the ConfigMap)")
        if prio < 0:
            raise CaSettingError(f"priorities[{key}]", "growth's priorities are at least 0")
        if regexes is None:
            regexes = []
        if not isinstance(regexes, list):
            raise CaSettingError(f"priorities[{key}]", "must be a list of regexes (CA ignores the ConfigMap)")
        compiled = []
        for i, r in enumerate(regexes):
            if not isinstance(r, str):
                raise CaSettingError(
                    f"priorities[{key}][{i}]", f"must be a string, got {r!r} (CA ignores the ConfigMap)"
                )
            try:
                compiled.append(re2.compile(r, options))
            except re2.error as e:
                why = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
                raise CaSettingError(
                    f"priorities[{key}][{i}]",
                    f"RE2 (Go's regexp) refuses {r!r}: {why}; CA ignores the whole ConfigMap with it",
                ) from None
        out.append((prio, compiled))
    return sorted(out, key=lambda kv: -kv[0])
