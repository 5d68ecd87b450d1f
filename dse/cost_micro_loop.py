"""The batch cost model's MAC COMPUTE micro-loop: how `compiler.mac_plan.micro_loop` loops a
tile step's blocks, and the mean cycles of a MAC step in that loop.

It exists so that one mirror of the code generator's micro-loop serves every place that
prices MAC steps: the batch model's tile steps (`cost_model`, `cost_tile_step`) and the
instruction-level timeline (`cost_trace`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from tensorforge.dse.cost_geometry import Geometry
from tensorforge.dse.cost_rows import SpaceRows, gathers
from tensorforge.dse.cost_space import StepPlan

I64 = np.int64


@dataclass(frozen=True)
class MicroLoops:
    """The MAC COMPUTE micro-loop of a full tile step, per mapping (`mac_plan.micro_loop`)."""

    instructions: np.ndarray  # MAC instructions per full tile step
    inner: np.ndarray  # inner extent in blocks (1 without an inner loop)
    run: np.ndarray  # steps per stationary block: 1, inner, or the whole instruction
    revisit: np.ndarray  # steps between two read-modify-writes of one C line; 0: none


def micro_loops(blocks: np.ndarray, rows: SpaceRows) -> MicroLoops:
    """Mirror `mac_plan.micro_loop` on tile steps of ``blocks`` (``n x D``) blocks per index:
    the inner loop runs over the index with the most blocks that the stationary operand does
    not use (else the one with the most), ties to an output index; the outer over the next
    with the most blocks; the rest unroll."""
    n = blocks.shape[0]
    every = np.arange(n)
    big = np.iinfo(I64).max
    c_uses = rows.uses(2)
    s_uses = rows.uses(0 if rows.step.stationary_role == "A" else 1)
    key = np.where(blocks > 1, 2 * -blocks + ~c_uses, big)  # lower first, index order on ties
    keep_key = np.where(s_uses, big, key)
    has_keep = keep_key.min(axis=1) < big
    inner_at = np.where(has_keep, np.argmin(keep_key, axis=1), np.argmin(key, axis=1))
    has_inner = key.min(axis=1) < big
    rest = key.copy()
    rest[every, inner_at] = big
    outer_at = np.argmin(rest, axis=1)
    has_outer = rest.min(axis=1) < big
    at_inner = gathers([blocks, s_uses, c_uses], inner_at)
    at_outer = gathers([blocks, s_uses, c_uses], outer_at)
    inner = np.where(has_inner, at_inner[0], 1)
    outer = np.where(has_outer, at_outer[0], 1)
    s_inner, s_outer = has_inner & at_inner[1], has_outer & at_outer[1]
    c_inner, c_outer = has_inner & at_inner[2], has_outer & at_outer[2]
    run = np.where(s_inner, 1, np.where(s_outer, inner, inner * outer))
    # a C line comes back each outer pass when only the inner loop moves C; where C stays
    # from step to step, os arrays add in the PEs, the others read-modify-write every step
    per_pass = np.where(c_inner & ~c_outer & (outer > 1), inner, 0)
    same_c = (~c_inner & (inner > 1)) | (~c_inner & ~c_outer & (outer > 1))
    revisit = per_pass if rows.step.groups_span_steps else np.where(same_c, 1, per_pass)
    return MicroLoops(np.prod(blocks, axis=1) // (inner * outer), inner, run, revisit)


def remainder_loops(g: Geometry, rows: SpaceRows, reload_step: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """MAC instructions and MAC step cycles of the whole program, tile step by tile step: a
    step's micro-loop follows its own blocks (a remainder tile has fewer, and may loop over
    another index), so every combination of full and remainder tiles of the indices is
    priced with its micro-loop and weighted by how many steps have it."""
    n, d = g.tile.shape
    instructions, cycles = np.zeros(n), np.zeros(n)
    for remainder in itertools.product((False, True), repeat=d):
        chosen = np.array(remainder)
        weight = np.prod(np.where(chosen, 1, g.count - 1), axis=1)
        if not weight.any():
            continue
        blocks = np.where(chosen, g.rem_blocks, g.full_blocks)
        loops = micro_loops(blocks, rows)
        instructions += weight * loops.instructions
        cycles += weight * np.prod(blocks, axis=1) * step_cycles(rows.step, loops,
                                                                 reload_step)
    return instructions, cycles


def step_cycles(step: StepPlan, loops: MicroLoops, first_step: np.ndarray) -> np.ndarray:
    """Mean cycles of a MAC step in its micro-loop.

    A run of ``run`` steps on one stationary block starts with ``first_step`` (its lines load
    on the other port while the last run streams) and streams a step every ``beats`` cycles.
    A bank of the ``stationary_banks`` takes the next block only ``bank_reuse_gap`` cycles
    after its last beat, so each bank serves one run per ``gap + lines + run beats - 1``
    cycles. A C line read-modify-written every ``revisit`` steps waits for its last write:
    ``revisit`` steps take at least `StepPlan.accumulate_round_trip` cycles.
    """
    run = loops.run
    streaming = first_step + (run - 1) * step.beats
    bank_cycle = (step.bank_reuse_gap + step.stationary_lines + run * step.beats - 1) / (
        step.stationary_banks)
    per_step = np.maximum(streaming, bank_cycle) / run
    hazard = np.where(loops.revisit > 0,
                      step.accumulate_round_trip / np.maximum(loops.revisit, 1), 0.0)
    return np.maximum(per_step, hazard)
