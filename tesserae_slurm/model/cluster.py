"""Cluster shape: nodes with an ordered list of GPUs of one type each."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import InputError


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    num_gpus: int
    gpu_type: str = "a100"


@dataclass(frozen=True)
class Cluster:
    """Nodes in order; the views the engine reads every round (by name, GPU types, shape) are
    derived once, at construction, from the immutable node tuple."""

    nodes: tuple[Node, ...]
    _by_name: Mapping[str, Node] = field(init=False, repr=False, compare=False)
    _total: int = field(init=False, repr=False, compare=False)
    _gpu_types: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _node_types: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _node_sizes: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _shape: tuple[tuple[str, ...], tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {n.name: n for n in self.nodes}
        if len(by_name) != len(self.nodes):
            raise InputError("cluster: duplicate node names")
        for n in self.nodes:
            if n.num_gpus <= 0:
                raise InputError(f"cluster: node {n.name!r} has {n.num_gpus} GPUs (must be > 0)")
        derived = {
            "_by_name": MappingProxyType(by_name),
            "_total": sum(n.num_gpus for n in self.nodes),
            "_gpu_types": tuple(sorted({n.gpu_type for n in self.nodes})),
            "_node_types": MappingProxyType({n.name: n.gpu_type for n in self.nodes}),
            "_node_sizes": MappingProxyType({n.name: n.num_gpus for n in self.nodes}),
            "_shape": (tuple(n.name for n in self.nodes), tuple(n.num_gpus for n in self.nodes)),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def __reduce__(self) -> tuple[type[Cluster], tuple[tuple[Node, ...]]]:
        """Pickled as its nodes alone (bench children, the daemon's state): the rest is derived."""
        return Cluster, (self.nodes,)

    @property
    def total_gpus(self) -> int:
        return self._total

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise InputError(f"unknown node {name!r}") from None

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return self._gpu_types

    @property
    def node_types(self) -> Mapping[str, str]:
        """Node name -> GPU type (read only)."""
        return self._node_types

    @property
    def node_sizes(self) -> Mapping[str, int]:
        """Node name -> GPUs (read only)."""
        return self._node_sizes

    @property
    def shape(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """(node names, GPUs per node), in node order: the GPU layout of plans built as tables."""
        return self._shape

    @staticmethod
    def from_spec(spec: str, prefix: str = "node") -> Cluster:
        """Parse ``20x4``, ``20x4:a100`` or ``4x4:v100,4x4:k80`` (NODESxGPUS[:TYPE], comma-joined)."""
        nodes: list[Node] = []
        for part in spec.split(","):
            m = re.fullmatch(r"\s*(\d+)x(\d+)(?::([A-Za-z0-9_.-]+))?\s*", part)
            if not m:
                raise InputError(f"bad cluster spec {part!r}: expected NODESxGPUS[:TYPE], e.g. 20x4:a100")
            count, gpus, gtype = int(m.group(1)), int(m.group(2)), (m.group(3) or "a100").lower()
            if count <= 0 or gpus <= 0:
                raise InputError(f"bad cluster spec {part!r}: counts must be positive")
            for _ in range(count):
                nodes.append(Node(f"{prefix}{len(nodes) + 1}", gpus, gtype))
        return Cluster(tuple(nodes))
