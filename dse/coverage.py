"""How much of a network the accelerators of a design space run, before and after a sweep.

Before: `space_coverage` asks, for every layer and every intrinsic the space can choose,
whether the device has a tensorize choice for it (as written or after im2col), whether that
choice is padded (part of the array idles, `tensorforge.compiler.matching`), and if there is
none, why. The matcher pads rather than gives up, so a two-input contraction always has a
choice; what remains (a tensor indexed twice by one index, a single-input workload) is listed
with the matcher's reason.

During: a layer the trial's intrinsic has no choice for is priced on the host
(`host_layer`) at a stated cost, so the sweep still prices the whole network instead of
failing the design; its entry keeps the reason. (A layer that has a choice but fails for
another reason, say no tiling fits, still fails its trial: that is the design's fault.)

After: `trial_coverage` reads one evaluated trial and counts the MACs of the network (every
layer times its count) that ran on the device, and how many of those ran through padded
choices; the report states both, so 100% is a number and not an assumption.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tensorforge.compiler.lowering import device_choices
from tensorforge.compiler.matching import why_no_choice
from tensorforge.compiler.workload import Workload
from tensorforge.errors import MappingError

#: The host that runs a layer no intrinsic can: stated, not measured. A core with 128-bit
#: int8 SIMD at the accelerator's clock (16 MACs a cycle), paying an instruction's overhead
#: per 16 MACs (Horowitz, ISSCC 2014: ~70 pJ per instruction at 45 nm; ~5 pJ a MAC).
HOST_MACS_PER_CYCLE = 16
HOST_PJ_PER_MAC = 5.0
HOST_NOTE = f"priced at {HOST_MACS_PER_CYCLE} MACs a cycle and {HOST_PJ_PER_MAC:g} pJ a MAC"


@dataclass(frozen=True)
class LayerCoverage:
    """One layer on one intrinsic: how many device choices it has, padded or not, and why not."""

    layer: str
    intrinsic: str
    macs: int  # per inference: the layer's MACs times its count
    choices: int
    padded: bool  # every choice it has is padded
    reason: str = ""  # why it has none

    @property
    def covered(self) -> bool:
        return self.choices > 0


def layer_coverage(name: str, workload: Workload, count: int, intrinsic: str) -> LayerCoverage:
    """`LayerCoverage` of one layer, over the workload as written and its im2col lowering."""
    from tensorforge.compiler.mappers import im2col_groups  # the mapper owns the lowering

    found = []
    for groups in {(), im2col_groups(workload)}:
        try:
            found += device_choices(workload, intrinsic, groups)
        except MappingError:
            continue
    reason = "" if found else (why_no_choice(workload, intrinsic) or "no runnable stage-0 choice")
    padded = bool(found) and all(choice.padded for choice in found)
    return LayerCoverage(name, intrinsic, count * workload.macs, len(found), padded, reason)


def space_coverage(layers: Iterable[Any], intrinsics: Iterable[str]) -> list[LayerCoverage]:
    """`layer_coverage` of each layer (``.name``, ``.workload``, ``.count``) per intrinsic."""
    layers = list(layers)
    return [layer_coverage(layer.name, layer.workload, layer.count, intrinsic)
            for intrinsic in intrinsics for layer in layers]


def covered_share(rows: Sequence[LayerCoverage], intrinsic: str) -> float:
    """Share of the MACs of ``rows`` that ``intrinsic`` has a choice for."""
    mine = [row for row in rows if row.intrinsic == intrinsic]
    total = sum(row.macs for row in mine)
    return sum(row.macs for row in mine if row.covered) / total if total else 1.0


def describe_space_coverage(rows: Sequence[LayerCoverage]) -> list[str]:
    """One line per intrinsic (share of MACs it can run, share only padded) and one per layer
    it cannot run, with the reason."""
    lines = []
    for intrinsic in dict.fromkeys(row.intrinsic for row in rows):
        mine = [row for row in rows if row.intrinsic == intrinsic]
        total = sum(row.macs for row in mine) or 1
        padded = sum(row.macs for row in mine if row.padded) / total
        lines.append(f"{intrinsic}: runs {covered_share(rows, intrinsic):.0%} of the MACs "
                     f"({padded:.0%} only through padded choices)")
        lines += [f"  {row.layer} cannot run on {intrinsic}: {row.reason}"
                  for row in mine if not row.covered]
    return lines


def host_layer(workload: Workload, intrinsic: str) -> dict[str, Any] | None:
    """`LayerMetrics` (as a dict) of ``workload`` run on the host, if ``intrinsic`` has no
    tensorize choice for it; None if it has one (its failure is then the design's)."""
    found = layer_coverage(workload.name, workload, 1, intrinsic)
    if found.covered:
        return None
    return {
        "cycles": max(1, -(-workload.macs // HOST_MACS_PER_CYCLE)),
        "energy_pj": workload.macs * HOST_PJ_PER_MAC,
        "mapping": {"host": found.reason},
        "details": {"host_macs_per_cycle": float(HOST_MACS_PER_CYCLE)},
    }


@dataclass(frozen=True)
class TrialCoverage:
    """MACs of one inference that a trial evaluated on the device, and through padding."""

    total_macs: int
    device_macs: int
    padded_macs: int

    @property
    def share(self) -> float:
        return self.device_macs / self.total_macs if self.total_macs else 1.0

    def describe(self) -> str:
        padded = self.padded_macs / self.total_macs if self.total_macs else 0.0
        host = f"; the rest on the host, {HOST_NOTE}" if self.share < 1.0 else ""
        return (f"{self.share:.0%} of the workload's {self.total_macs:,} MACs evaluated on the "
                f"device ({padded:.0%} through padded tensorize choices){host}")


def trial_coverage(layers: Sequence[Any], trial_layers: Sequence[dict[str, Any]],
                   intrinsic: str | None = None) -> TrialCoverage:
    """Coverage of a trial whose per-layer entries (`TrialRecord.layers`) follow ``layers``.

    A layer counts as padded if its stored mapping says so (`Mapping.to_dict`); an evaluator
    that stores no tensorize choice (the first-order one) ran it padded if ``intrinsic`` (the
    trial's) has only padded choices for it.
    """
    total = device = padded = 0
    for layer, entry in zip(layers, trial_layers, strict=True):
        macs = layer.count * layer.workload.macs
        total += macs
        if "error" in entry or "cycles" not in entry or "host" in entry.get("mapping", {}):
            continue
        device += macs
        choice = entry.get("mapping", {}).get("choice")
        if isinstance(choice, dict):
            padded += macs if choice.get("padded") else 0
        elif intrinsic is not None:
            padded += macs if layer_coverage("", layer.workload, 1, intrinsic).padded else 0
    return TrialCoverage(total, device, padded)
