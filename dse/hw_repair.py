"""The conditional hardware space: moving a design point to the nearest one that can be built.

Some primitive combinations can never be an accelerator: a dataflow the intrinsic has no
schedule for, input-stationary on a non-square array, a weight-stationary CONV2D without
per-PE memory for its taps, buffers with more lines than the ISA addresses (512 KiB of 8 B
lines on an 8x8 GEMM) or too few for one intrinsic step. Drawing them wastes trials: the
sweep of issue 18 lost one of four mobilenet_v2 trials to a 512 KiB scratchpad. `HardwareRepair`
is the space's repair (`tensorforge.dse.space`): each rule below names the primitives that may
change to satisfy it, in order of preference, and the repair takes the nearest values (fewest
grid steps) that satisfy the rule and every earlier one. The last rule is `AcceleratorConfig`
itself, so a repaired point always builds; a point no allowed change can mend (a pruned space
with no legal combination left near it) is returned unchanged and fails as before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorforge.config import DATAFLOWS, Dataflow
from tensorforge.errors import ConfigError
from tensorforge.intrinsics import Intrinsic

Point = Mapping[str, Any]


def _dataflow_applies(point: Point) -> bool:
    return Dataflow(point["dataflow"]) in DATAFLOWS[Intrinsic(point["intrinsic"])]


def _input_stationary_is_square(point: Point) -> bool:
    return point["dataflow"] != Dataflow.INPUT_STATIONARY or point["rows"] == point["cols"]


def _conv_ws_holds_its_taps(point: Point) -> bool:
    return not (point["intrinsic"] == Intrinsic.CONV2D
                and point["dataflow"] == Dataflow.WEIGHT_STATIONARY
                and point["local_bytes"] < point["conv_taps"] * (point["in_bits"] // 8))


@dataclass(frozen=True)
class Rule:
    """A condition on a point, and the groups of primitives tried (in order) to meet it."""

    holds: Callable[[Point], bool]
    groups: tuple[tuple[str, ...], ...]


class HardwareRepair:
    """``n x d`` genomes of a hardware `Space` -> the nearest buildable ones (module docstring).

    ``to_config(point)`` is `HardwareSpace.to_config`: a point builds when it raises no
    `ConfigError`. Repairs are memoized per genome. Picklable (a `Problem` goes to workers).
    """

    def __init__(self, names: Sequence[str], domains: Sequence[Sequence[Any]],
                 to_config: Callable[[Point], Any]) -> None:
        self.names = tuple(names)
        self.to_config = to_config
        self.domains = {name: tuple(domain) for name, domain in zip(names, domains, strict=True)}
        self.rules = (
            Rule(_dataflow_applies, (("dataflow",), ("intrinsic",))),
            Rule(_input_stationary_is_square, (("cols",), ("rows",), ("dataflow",))),
            Rule(_conv_ws_holds_its_taps, (("local_bytes",), ("dataflow",))),
            Rule(self.builds, (("spad_kib",), ("acc_kib",), ("spad_kib", "acc_kib"), ("banks",),
                          ("spad_kib", "acc_kib", "banks"))),
        )
        self._memo: dict[tuple[int, ...], tuple[int, ...]] = {}

    def builds(self, point: Point) -> bool:
        try:
            self.to_config(point)
        except ConfigError:
            return False
        return True

    def __call__(self, genomes: np.ndarray) -> np.ndarray:
        rows = [self._repair_genome(tuple(row)) for row in np.asarray(genomes).tolist()]
        return np.array(rows, dtype=np.int64).reshape(np.shape(genomes))

    def _repair_genome(self, genome: tuple[int, ...]) -> tuple[int, ...]:
        repaired = self._memo.get(genome)
        if repaired is None:
            point = {name: self.domains[name][i] for name, i in zip(self.names, genome,
                                                                    strict=True)}
            fixed = self.repair_point(point)
            repaired = tuple(self.domains[name].index(fixed[name]) for name in self.names)
            self._memo[genome] = repaired
        return repaired

    def repair_point(self, point: Point) -> dict[str, Any]:
        """The nearest point to ``point`` that meets every rule (``point`` if none does)."""
        current = dict(point)
        for position, rule in enumerate(self.rules):
            if rule.holds(current):
                continue
            earlier = self.rules[:position]
            mended = next((candidate for group in rule.groups
                           for candidate in self._nearest(current, group)
                           if rule.holds(candidate) and all(r.holds(candidate) for r in earlier)),
                          None)
            if mended is None:
                return dict(point)
            current = mended
        return current

    def _nearest(self, point: dict[str, Any], group: tuple[str, ...]):
        """Points with the primitives of ``group`` changed, fewest grid steps first."""
        if not all(name in self.domains for name in group):
            return
        here = [self.domains[name].index(point[name]) for name in group]
        combos = itertools.product(*(range(len(self.domains[name])) for name in group))
        ordered = sorted(combos, key=lambda c: (sum(abs(a - b) for a, b in zip(c, here,
                                                                                  strict=True)),
                                                 c))
        for combo in ordered:
            if list(combo) != here:
                yield {**point, **{name: self.domains[name][i]
                                   for name, i in zip(group, combo, strict=True)}}
