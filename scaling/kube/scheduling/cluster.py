"""The cluster as a prefilter reads it: nodes, the pods running on them, namespace labels and
volumes. Pods are grouped by (namespace, labels) with counts per node, so a prefilter matches a
selector once per distinct label set (a Deployment's pods share one), not once per pod."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from scaling.kube.models import NodeInfo, PodInfo
from scaling.kube.scheduling.terms import PodAffinityTerm
from scaling.kube.scheduling.volumes import Volumes

LabelSet = tuple[str, tuple[tuple[str, str], ...]]  # (namespace, sorted labels)


@dataclass
class Cluster:
    nodes: Sequence[NodeInfo]
    pods: Mapping[str, Sequence[PodInfo]] = field(default_factory=dict)  # node -> non-terminal pods on it
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # namespace -> labels
    volumes: Volumes = field(default_factory=Volumes)

    @cached_property
    def by_name(self) -> dict[str, NodeInfo]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def label_sets(self) -> dict[LabelSet, Counter[str]]:
        """Every pod's (namespace, labels) -> pods per node (InterPodAffinity counts them all)."""
        out: dict[LabelSet, Counter[str]] = {}
        for node, pods in self.pods.items():
            for p in pods:
                out.setdefault((p.namespace, tuple(sorted(p.labels.items()))), Counter())[node] += 1
        return out

    @cached_property
    def live_label_sets(self) -> dict[LabelSet, Counter[str]]:
        """As label_sets, without pods being deleted (PodTopologySpread skips them)."""
        out: dict[LabelSet, Counter[str]] = {}
        for node, pods in self.pods.items():
            for p in pods:
                if p.deletion_timestamp is None:
                    out.setdefault((p.namespace, tuple(sorted(p.labels.items()))), Counter())[node] += 1
        return out

    @cached_property
    def anti_terms(self) -> Counter[tuple[PodAffinityTerm, str]]:
        """Running pods' required anti-affinity terms, as (term, node) -> pods."""
        out: Counter[tuple[PodAffinityTerm, str]] = Counter()
        for node, pods in self.pods.items():
            for p in pods:
                for t in p.pod_anti_affinity:
                    out[(t, node)] += 1
        return out

    @cached_property
    def label_keys(self) -> frozenset[str]:
        """Label keys the running pods' anti-affinity selectors name (what of a pending pod's
        labels those terms can tell apart)."""
        return frozenset(k for t, _ in self.anti_terms for k in selector_keys(t))


def selector_keys(t: PodAffinityTerm) -> list[str]:
    if t.selector is None:
        return []
    return [k for k, _ in t.selector.match_labels] + [r.key for r in t.selector.match_expressions]
