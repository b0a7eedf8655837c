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
    nodes: tuple[Node, ...]
    _by_name: dict[str, Node] = field(init=False, repr=False, compare=False)
    _total: int = field(init=False, repr=False, compare=False)
    _memo: dict = field(init=False, repr=False, compare=False)  # derived views of the immutable shape

    def __post_init__(self) -> None:
        by_name = {n.name: n for n in self.nodes}
        if len(by_name) != len(self.nodes):
            raise InputError("cluster: duplicate node names")
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_total", sum(n.num_gpus for n in self.nodes))
        object.__setattr__(self, "_memo", {})
        for n in self.nodes:
            if n.num_gpus <= 0:
                raise InputError(f"cluster: node {n.name!r} has {n.num_gpus} GPUs (must be > 0)")

    def __reduce__(self) -> tuple[type[Cluster], tuple[tuple[Node, ...]]]:
        """Pickled as its nodes alone (bench children, the daemon's state): the memo is derived, and
        may hold views that do not pickle."""
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
        types = self._memo.get("gpu_types")
        if types is None:
            types = self._memo["gpu_types"] = tuple(sorted({n.gpu_type for n in self.nodes}))
        return types

    @property
    def node_types(self) -> Mapping[str, str]:
        """Node name -> GPU type (read only; the engine looks it up every round)."""
        types = self._memo.get("node_types")
        if types is None:
            types = self._memo["node_types"] = MappingProxyType({n.name: n.gpu_type for n in self.nodes})
        return types

    @property
    def shape(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """(node names, GPUs per node), in node order: the GPU layout of plans built as tables."""
        shape = self._memo.get("shape")
        if shape is None:
            shape = self._memo["shape"] = (tuple(n.name for n in self.nodes), tuple(n.num_gpus for n in self.nodes))
        return shape

    def memo(self) -> dict:
        """Scratch space for views of this (immutable) cluster that stages derive every round,
        e.g. consolidation's empty free map; keys are the deriving module's business."""
        return self._memo

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
