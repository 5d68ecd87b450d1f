"""Two-step matching (HASCO IV-B): every way an intrinsic can compute part of a workload.

A *tensorize choice* says which workload tensor plays each intrinsic operand and which workload
index runs along each intrinsic index; every other workload index becomes an outer software
loop. The choice fixes no sizes: tiling (HASCO Figure 4, choice #4) is a later split.

Step 1, index matching. Each intrinsic index that reaches an input must map to a distinct
workload index occurring exactly as often in the corresponding tensors (the operand mapping
tries both input orders, since ``A*B = B*A``). This alone enforces roles: an intrinsic
reduction index maps to an index of both inputs and not of the output, and so on. The leaf
occurrences then pair up one-to-one, HASCO's bijection between the intrinsic's leaves and a
leaf subset of the workload's tree.

Step 2, structure matching. For every two intrinsic leaves, the lowest common ancestor of their
images in the workload TST must be the same kind of node as theirs, and the ancestors must pair
up consistently. This is what rejects a mapping whose two indices share a workload dimension
(HASCO's ``s -> k`` example: ``y`` and ``s`` meet at the ``add`` of ``y+s``, not at the access)
and what demands a sliding window ``x+r`` for the CONV2D intrinsic's ``x+r``. Leaves inside an
intrinsic ``add`` must also keep their coefficient: the CONV2D hardware slides with stride 1, so
it does *not* match ``2*x+r`` (a stride-2 convolution) -- GEMM and GEMV still do, because a
lone index's coefficient is only a load stride. Dimension order is free: a permuted match is a
transposed operand (Figure 4, choice #3), non-adjacent dimensions are strided loads.

An index used twice in one tensor (``A[x,x]``) is never matched. Intrinsic indices that reach no
input (DOT's unit output axis ``o``) are not matched either: they only give a scalar a place.
Fusing several workload indices into one intrinsic index is the schedule's ``fuse``, applied
before tensorizing, so choices map index to index (and MTTKRP's GEMM covers three loops).

Workloads with three or more inputs are matched per product node of their TST (`tst.stages`):
a choice on an inner stage computes an intermediate such as MTTKRP's ``(A*B)[i,k,j]``.

Padding. Where no choice matches every intrinsic index (a depthwise convolution has no index
for GEMM's ``j``: its channel index is in all three tensors; a matrix product has no sliding
window for CONV2D's ``y+s``), the least wasteful choices that leave some intrinsic indices
*padded* are offered instead: a padded index runs at size 1, its other positions multiply
zeros (the LOADs fill them), and the array does proportionally less useful work. "Least
wasteful" is the smallest product of the padded indices' sizes on the nominal intrinsic,
then the fewest padded indices. An intrinsic index left alone in its ``add`` (CONV2D's ``y``
with ``s`` padded) no longer slides, so its coefficient is a load stride like a lone
index's: that is how a stride-2 convolution runs on CONV2D, one kernel tap per step. A
workload that matches without padding never gets padded choices, so none of its programs
change. A padded choice still computes the whole workload exactly: padding only decides how
much of the array each step uses.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tensorforge.compiler.tst import TST, Leaf, build_tst, stages
from tensorforge.compiler.workload import Access, Workload, parse_workload
from tensorforge.errors import WorkloadError


def intrinsic_workload(name: str, rows: int = 4, cols: int = 4) -> Workload:
    """Intrinsic ``name`` (dot, gemv, gemm, conv2d) as a workload, from `tensorforge.intrinsics`.

    The one place the matcher learns intrinsic texts; sizes do not affect matching.
    """
    from tensorforge.intrinsics import EXPRESSIONS, Intrinsic, intrinsic_sizes

    try:
        intrinsic = Intrinsic(name.lower())
    except ValueError:
        known = ", ".join(i.value for i in Intrinsic)
        raise WorkloadError(f"unknown intrinsic {name!r}; use one of {known}.") from None
    sizes = intrinsic_sizes(intrinsic, rows, cols)
    return parse_workload(EXPRESSIONS[intrinsic], sizes, name=intrinsic.value)


@dataclass(frozen=True)
class TensorizeChoice:
    """One legal way to run ``intrinsic`` inside ``workload`` (a HW/SW partition)."""

    intrinsic: str
    workload: str
    stage: int  # product node of the workload TST, innermost first (0 for two inputs)
    operands: tuple[tuple[str, Access], ...]  # intrinsic tensor -> workload access it reads
    indices: tuple[tuple[str, str], ...]  # intrinsic index -> workload index
    dims: tuple[tuple[str, int, int], ...]  # (intrinsic tensor, its dim, workload tensor dim)
    outer: tuple[str, ...]  # workload indices left to software loops, in workload order
    complete: bool  # the intrinsic plus outer loops compute the whole workload
    padded: tuple[str, ...] = ()  # intrinsic indices run at size 1 (module docstring)

    @property
    def operand_map(self) -> dict[str, str]:
        return {name: access.tensor for name, access in self.operands}

    @property
    def index_map(self) -> dict[str, str]:
        return dict(self.indices)

    @property
    def transposed(self) -> tuple[str, ...]:
        """Intrinsic tensors whose matched workload dimensions come in another order."""
        found = []
        for name, _ in self.operands:
            order = [d for t, _, d in self.dims if t == name]
            if order != sorted(order):
                found.append(name)
        return tuple(found)

    def describe(self) -> str:
        """One line: index mapping, operand mapping (with transposes) and outer loops."""
        indices = " ".join(f"{i}->{w}" for i, w in self.indices)
        flipped = set(self.transposed)
        operands = " ".join(
            f"{name}={access}{'^T' if name in flipped else ''}" for name, access in self.operands
        )
        stage = f" stage {self.stage}" if not self.complete else ""
        outer = ",".join(self.outer) or "none"
        padded = f" | padded to 1: {','.join(self.padded)}" if self.padded else ""
        return f"{self.intrinsic}{stage}: {indices} | {operands} | outer loops: {outer}{padded}"


def tensorize_choices(workload: Workload, intrinsic: Workload | str) -> list[TensorizeChoice]:
    """Every legal tensorize choice of ``intrinsic`` (a workload or a name) in ``workload``.

    A stage that no choice matches without padding gets its least wasteful padded choices
    (module docstring).
    """
    return list(_cached_choices(workload, _as_intrinsic(intrinsic)))


@functools.lru_cache(maxsize=4096)  # the software search asks again for every design point
def _cached_choices(workload: Workload, intrinsic: Workload) -> tuple[TensorizeChoice, ...]:
    choices: list[TensorizeChoice] = []
    parts = stages(workload)
    for position, stage in enumerate(parts):
        for level in _padding_levels(intrinsic, workload.reduction == "max"):
            found = [_choice(workload, intrinsic, parts, position, *matched, pads)
                     for pads in level for matched in _matches(stage, intrinsic, pads=pads)]
            if found:
                choices += found
                break
    return tuple(choices)


def _padding_levels(intrinsic: Workload, pad_reduction: bool = False
                    ) -> list[list[tuple[str, ...]]]:
    """Sets of intrinsic indices to pad, grouped by waste, least first: ``[[()], ...]``.

    Waste is the product of the padded indices' nominal sizes, then their count; sets of one
    level are tried together. Only indices that reach an input can be padded (the others are
    never matched anyway). ``pad_reduction`` (a ``max=`` workload) keeps only the sets that
    pad every intrinsic reduction index: the array sums over those, and a max must see one
    product per step (`tensorforge.isa`'s ``reduce``).
    """
    used = {i for a in intrinsic.inputs for i in a.indices}
    candidates = [i for i in intrinsic.indices if i in used]
    required = set(intrinsic.reduction_indices) if pad_reduction else set()
    sizes = intrinsic.sizes
    levels: dict[tuple[int, int], list[tuple[str, ...]]] = {}
    for count in range(len(candidates)):  # padding every index would match anything
        for pads in itertools.combinations(candidates, count):
            if not required <= set(pads):
                continue
            waste = math.prod(sizes[i] for i in pads)
            levels.setdefault((waste, count), []).append(pads)
    return [levels[key] for key in sorted(levels)]


def why_illegal(
    workload: Workload,
    intrinsic: Workload | str,
    operands: Mapping[str, str],
    indices: Mapping[str, str],
    stage: int = -1,
) -> str | None:
    """``None`` if the proposed choice is legal, else the reason the matching rejects it.

    ``operands`` maps intrinsic inputs to workload inputs, ``indices`` intrinsic indices to
    workload indices; this is how a hand-drawn choice (HASCO Figure 4) is checked.
    """
    intrinsic = _as_intrinsic(intrinsic)
    part = stages(workload)[stage]
    names = [a.tensor for a in part.inputs]
    try:
        order = tuple(names.index(operands[a.tensor]) for a in intrinsic.inputs)
    except (KeyError, ValueError):
        return f"operands {dict(operands)} do not map the intrinsic inputs onto {names}"
    reasons: list[str] = []
    for _ in _matches(part, intrinsic, order, dict(indices), reasons):
        return None
    return reasons[0] if reasons else "no matching found"


def why_no_choice(workload: Workload, intrinsic: Workload | str) -> str | None:
    """``None`` if the device can run ``workload`` on ``intrinsic`` (a choice on its first
    product, which is the stage the device runs), else why not, in one sentence."""
    intrinsic = _as_intrinsic(intrinsic)
    parts = stages(workload)
    if not parts:
        return f"{workload.text} multiplies no two tensors; the {intrinsic.name} intrinsic does"
    if any(c.stage == 0 for c in tensorize_choices(workload, intrinsic)):
        return None
    reasons: list[str] = []
    for level in _padding_levels(intrinsic):
        for pads in level:
            for _ in _matches(parts[0], intrinsic, reasons=reasons, pads=pads):
                pass
    detail = f": {reasons[-1]}" if reasons else ""
    return f"no tensorize choice of {intrinsic.name} matches {parts[0].text}{detail}"


# ---------------------------------------------------------------- the two steps


def _as_intrinsic(intrinsic: Workload | str) -> Workload:
    found = intrinsic_workload(intrinsic) if isinstance(intrinsic, str) else intrinsic
    if len(found.inputs) != 2:
        raise WorkloadError(f"intrinsic {found.name} must multiply two inputs, not {found.text}")
    return found


def _matches(
    stage: Workload,
    intrinsic: Workload,
    only_order: tuple[int, ...] | None = None,
    only_indices: dict[str, str] | None = None,
    reasons: list[str] | None = None,
    pads: tuple[str, ...] = (),
) -> Iterator[tuple[tuple[int, ...], dict[str, str], dict[Leaf, Leaf]]]:
    """(operand order, index mapping, leaf mapping) of each legal match on one stage, with
    the intrinsic indices ``pads`` left unmatched (padded)."""
    reasons = [] if reasons is None else reasons
    tree_i, tree_w = build_tst(intrinsic), build_tst(stage)
    inputs_used = {i for a in intrinsic.inputs for i in a.indices}
    matched = [i for i in intrinsic.indices if i in inputs_used and i not in pads]
    orders = [only_order] if only_order else list(itertools.permutations(range(2)))
    for order in orders:
        operand = {-1: -1, **dict(enumerate(order))}
        sig_i = _signatures(tree_i, operand)
        sig_w = _signatures(tree_w, {-1: -1, 0: 0, 1: 1})
        for mapping in _index_maps(matched, sig_i, sig_w, only_indices, reasons):
            for leaves in _leaf_maps(tree_i, tree_w, operand, mapping):
                problem = _structure_problem(tree_i, tree_w, leaves)
                if problem:
                    reasons.append(problem)
                    continue
                yield order, mapping, leaves


def _signatures(tree: TST, renumber: dict[int, int]) -> dict[str, tuple[int, int, int]]:
    """index -> occurrences in (output, first input, second input), operands renumbered."""
    counts: dict[str, list[int]] = {}
    for leaf in tree.leaves:
        counts.setdefault(leaf.index, [0, 0, 0])[renumber[leaf.operand] + 1] += 1
    return {index: tuple(c) for index, c in counts.items()}


def _index_maps(
    matched: list[str],
    sig_i: dict[str, tuple[int, int, int]],
    sig_w: dict[str, tuple[int, int, int]],
    only: dict[str, str] | None,
    reasons: list[str],
) -> Iterator[dict[str, str]]:
    """Step 1: injective index mappings whose occurrence counts agree tensor by tensor."""
    candidates = {}
    for index in matched:
        pool = [only[index]] if only and index in only else list(sig_w)
        fits = [w for w in pool if sig_w.get(w) == sig_i[index] and max(sig_i[index]) == 1]
        if not fits:
            reasons.append(_role_reason(index, sig_i[index], pool, sig_w))
            return
        candidates[index] = fits
    for combo in itertools.product(*(candidates[i] for i in matched)):
        if len(set(combo)) == len(combo):
            yield dict(zip(matched, combo, strict=True))


def _role_reason(index, sig, pool, sig_w) -> str:
    where = ["output", "first input", "second input"]
    want = ", ".join(w for w, n in zip(where, sig, strict=True) if n) or "nowhere"
    shown = ", ".join(
        f"{w} (in {', '.join(p for p, n in zip(where, sig_w.get(w, (0, 0, 0)), strict=True) if n)})"
        for w in pool
    )
    return (
        f"intrinsic index {index} occurs once in each of: {want} (under this operand mapping); "
        f"no workload index does: {shown}"
    )


def _leaf_maps(
    tree_i: TST, tree_w: TST, operand: dict[int, int], mapping: dict[str, str]
) -> Iterator[dict[Leaf, Leaf]]:
    """HASCO's bijection from the intrinsic leaves onto the workload leaves of mapped indices."""
    result = {}
    for leaf in tree_i.leaves:
        if leaf.index not in mapping:
            continue
        images = [
            w
            for w in tree_w.leaves
            if w.index == mapping[leaf.index] and w.operand == operand[leaf.operand]
        ]
        result[leaf] = images[0]  # counts are 1 on both sides after step 1
    images = Counter(result.values())
    if all(n == 1 for n in images.values()):
        yield result


def _structure_problem(tree_i: TST, tree_w: TST, leaves: dict[Leaf, Leaf]) -> str | None:
    """Step 2: lowest common ancestors must agree in kind and pair up one-to-one."""
    pairs: dict[tuple[int, ...], tuple[int, ...]] = {}
    for leaf, image in leaves.items():
        sliding = any(other.path[:-1] == leaf.path[:-1] for other in leaves if other is not leaf)
        if leaf.in_add and sliding and image.coef != leaf.coef:
            return (
                f"{image.index} has coefficient {image.coef} in {image.tensor} but the "
                f"intrinsic's {leaf.index} slides with coefficient {leaf.coef} (stride)"
            )
    for (first, first_image), (second, second_image) in itertools.combinations(leaves.items(), 2):
        node_i = tree_i.lca(first.path, second.path)
        node_w = tree_w.lca(first_image.path, second_image.path)
        kind_i, kind_w = tree_i.node(node_i).op, tree_w.node(node_w).op
        if kind_i != kind_w or pairs.setdefault(node_i, node_w) != node_w:
            return (
                f"{first_image.index} and {second_image.index} meet at an '{kind_w}' node in "
                f"the workload but the intrinsic's {first.index} and {second.index} meet at an "
                f"'{kind_i}' node"
            )
    if len(set(pairs.values())) != len(pairs):
        return "two intrinsic operations map onto one workload operation"
    return None


def _choice(
    workload: Workload,
    intrinsic: Workload,
    parts: tuple[Workload, ...],
    position: int,
    order: tuple[int, ...],
    mapping: dict[str, str],
    leaves: dict[Leaf, Leaf],
    padded: tuple[str, ...] = (),
) -> TensorizeChoice:
    stage = parts[position]
    operands = [(intrinsic.output.tensor, stage.output)]
    operands += [(a.tensor, stage.inputs[order[p]]) for p, a in enumerate(intrinsic.inputs)]
    dims = sorted({(leaf.tensor, leaf.dim, image.dim) for leaf, image in leaves.items()})
    ordered = [name for name, _ in operands]
    dims.sort(key=lambda d: (ordered.index(d[0]), d[1]))
    mapped = set(mapping.values())
    return TensorizeChoice(
        intrinsic=intrinsic.name,
        workload=workload.name,
        stage=position,
        operands=tuple(operands),
        indices=tuple(mapping.items()),
        dims=tuple(dims),
        outer=tuple(i for i in workload.indices if i not in mapped),
        complete=len(parts) == 1,
        padded=padded,
    )
