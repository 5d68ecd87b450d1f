"""The MAC COMPUTE instructions of one tile step: which two indices form the affine
micro-loop (`micro_loop`), the instructions that cover the step's blocks (`mac_plan`), and
which of them carry the ``overwrite`` bit (`overwrite_plan`).

It exists apart from the walk over tile steps (`tile_walk`) because it depends only on a
step's block counts and the tiling, and the cost model mirrors it (`dse.cost_micro_loop`,
`compiler.mapping_estimate`).
"""

from __future__ import annotations

import itertools

from tensorforge.compiler.field_limits import MAX_EXTENT, MAX_STEP
from tensorforge.compiler.tiling import Tiling
from tensorforge.isa import Compute


def micro_loop(counts: dict[str, int], coefs: dict[str, dict[str, int]], stationary: str
                ) -> tuple[str | None, str | None]:
    """``(inner, outer)`` indices of a tile step's COMPUTE micro-loop.

    The inner loop runs over an index the stationary operand does not use, so its block stays
    in the PEs for a whole inner run instead of being reloaded every step; among those (and
    then among the rest, for the outer loop) the one with the most blocks makes the longest
    instructions. On a tie an output index goes first: it gives each step its own C block, so
    consecutive steps do not wait for each other's accumulator writes.
    """
    loopable = [n for n in counts if counts[n] > 1
                and all(coefs[r].get(n, 0) <= MAX_STEP for r in coefs)]
    loopable.sort(key=lambda n: (-counts[n], n not in coefs["C"]))
    keeps = [n for n in loopable if coefs[stationary].get(n, 0) == 0]
    inner = keeps[0] if keeps else (loopable[0] if loopable else None)
    outer = next((n for n in loopable if n != inner), None)
    return inner, outer


def mac_plan(counts: dict[str, int], tiling: Tiling, stationary: str
             ) -> list[tuple[int, int, int, dict]]:
    """MAC COMPUTEs of a tile step with ``counts`` blocks per index, as ``(C, A, B block
    offsets from the buffer bases, the other fields)``.

    The micro-loop comes from `micro_loop`; the other indices unroll into separate
    instructions.
    """
    coefs = {r: tiling.operand(r).coef for r in ("C", "A", "B")}
    inner, outer = micro_loop(counts, coefs, stationary)
    rest = [n for n in counts if n not in (inner, outer)]
    plan = []
    for coords in itertools.product(*(range(counts[n]) for n in rest)):
        start = dict(zip(rest, coords, strict=True))
        for o0 in range(0, counts.get(outer, 1), MAX_EXTENT):
            for i0 in range(0, counts.get(inner, 1), MAX_EXTENT):
                at = {**start, **({outer: o0} if outer else {}),
                      **({inner: i0} if inner else {})}
                acc, a, b = (sum(at.get(n, 0) * c for n, c in coefs[r].items())
                             for r in ("C", "A", "B"))
                plan.append((acc, a, b, {
                    "outer": min(MAX_EXTENT, counts[outer] - o0) if outer else 1,
                    "inner": min(MAX_EXTENT, counts[inner] - i0) if inner else 1,
                    "acc_outer": coefs["C"].get(outer, 0),
                    "acc_inner": coefs["C"].get(inner, 0),
                    "a_outer": coefs["A"].get(outer, 0), "a_inner": coefs["A"].get(inner, 0),
                    "b_outer": coefs["B"].get(outer, 0), "b_inner": coefs["B"].get(inner, 0),
                }))
    return plan


def mac_visits(plan: list):
    """``(C block offset, (instruction, step))`` of every MAC step of ``plan``, in order."""
    for number, (acc, _, _, loop) in enumerate(plan):
        for o in range(loop["outer"]):
            for i in range(loop["inner"]):
                yield acc + o * loop["acc_outer"] + i * loop["acc_inner"], (number, o, i)


def overwrite_plan(plan: list, block_lines: int) -> list[bool] | None:
    """The ``overwrite`` bit of each instruction of ``plan``, so that exactly the first visit
    of each C block writes it (`Compute.overwrites`); None if the rule cannot express that
    (an instruction both first-visits a block and revisits one at an overwriting step, or C
    blocks overlap partially)."""
    written: set[int] = set()  # C lines an earlier step of the plan wrote
    first_steps: list[set] = [set() for _ in plan]
    for acc, (number, o, i) in mac_visits(plan):
        lines = range(acc, acc + block_lines)
        fresh = [line not in written for line in lines]
        if any(fresh) and not all(fresh):
            return None
        if all(fresh):
            first_steps[number].add((o, i))
            written.update(lines)
    flags = []
    for (_, _, _, loop), firsts in zip(plan, first_steps, strict=True):
        probe = Compute(overwrite=True, outer=loop["outer"], inner=loop["inner"],
                        acc_outer=loop["acc_outer"], acc_inner=loop["acc_inner"])
        ruled = {(o, i) for o in range(loop["outer"]) for i in range(loop["inner"])
                 if probe.overwrites(o, i)}
        if firsts and firsts != ruled:
            return None
        flags.append(bool(firsts))
    return flags
