"""Minimal pingcap.com/v1alpha1 CRDs for TidbCluster and TidbClusterAutoScaler.

Names, scope and short names are tidb-operator's. Like its released CRDs, neither declares a
status subresource (the operator writes status with the object), so a client must handle both
cases. The schema only preserves unknown fields: the sim does not validate specs. Use the
full CRDs under deploy/crds/ when they exist; these are for tests and the sim's own process.
"""

from __future__ import annotations

from typing import Any

from sim.tidb.operator import GROUP, TAC_PLURAL, TC_PLURAL, VERSION


def _crd(plural: str, kind: str, short: str, status_subresource: bool) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "listKind": f"{kind}List",
                "shortNames": [short],
            },
            "versions": [version],
        },
    }


def tidb_crds(status_subresource: bool = False) -> list[dict[str, Any]]:
    return [
        _crd(TC_PLURAL, "TidbCluster", "tc", status_subresource),
        _crd(TAC_PLURAL, "TidbClusterAutoScaler", "ta", status_subresource),
    ]
