"""Golden model and random stimulus for COMPUTE, shared by the Amaranth-sim test and the bench.

`execute` is the numpy meaning of one COMPUTE instruction (the micro-loop of
`tensorforge.intrinsics.apply_intrinsic` steps, or zeroing, with the ``overwrite`` rule);
`random_program` draws instructions whose blocks stay inside ``spad_lines`` / ``acc_lines``
and `with_overwrite` sets the ``overwrite`` bit on some of them where it is legal.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tensorforge.config import AcceleratorConfig
from tensorforge.intrinsics import apply_intrinsic
from tensorforge.isa import Compute, ComputeMode


def execute(
    config: AcceleratorConfig, instruction: Compute, spad: np.ndarray, acc: np.ndarray
) -> None:
    """Apply ``instruction`` to the accumulator lines ``acc`` in place."""
    blocks = config.blocks
    for o in range(instruction.outer):
        for i in range(instruction.inner):
            c = instruction.acc_base + o * instruction.acc_outer + i * instruction.acc_inner
            c_lines = blocks["C"].lines
            if instruction.mode is ComputeMode.ZERO:
                acc[c : c + c_lines] = 0
                continue
            a = instruction.a_base + o * instruction.a_outer + i * instruction.a_inner
            b = instruction.b_base + o * instruction.b_outer + i * instruction.b_inner
            old = acc[c : c + c_lines]
            acc[c : c + c_lines] = apply_intrinsic(
                config.intrinsic,
                config.intrinsic_sizes,
                spad[a : a + blocks["A"].lines],
                spad[b : b + blocks["B"].lines],
                np.zeros_like(old) if instruction.overwrites(o, i) else old,
                config.precision.acc_bits,
            )


def random_program(
    config: AcceleratorConfig, rng: np.random.Generator, count: int, spad_lines: int, acc_lines: int
) -> list[Compute]:
    """``count`` random COMPUTE instructions (mostly MAC, some ZERO) with small micro-loops.

    Strides are drawn from 0 (the block stays: weight reuse, or accumulation into one C block)
    up to two blocks, so consecutive steps overlap, repeat or move on.
    """
    blocks = config.blocks
    program = []
    for _ in range(count):
        outer, inner = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        fields = {}
        for name, lines, limit in (
            ("acc", blocks["C"].lines, acc_lines),
            ("a", blocks["A"].lines, spad_lines),
            ("b", blocks["B"].lines, spad_lines),
        ):
            choices = [0, 1, lines, 2 * lines]
            step_outer = int(rng.choice(choices))
            step_inner = int(rng.choice(choices))
            reach = (outer - 1) * step_outer + (inner - 1) * step_inner + lines
            fields[f"{name}_base"] = int(rng.integers(0, max(1, limit - reach)))
            fields[f"{name}_outer"], fields[f"{name}_inner"] = step_outer, step_inner
        mode = ComputeMode.ZERO if rng.random() < 0.15 else ComputeMode.MAC
        program.append(Compute(mode=mode, outer=outer, inner=inner, **fields))
    return program


def with_overwrite(
    config: AcceleratorConfig, program: list[Compute], rng: np.random.Generator, share: float = 0.5
) -> list[Compute]:
    """``program`` with the ``overwrite`` bit set on about ``share`` of the MAC instructions it
    is legal on (no overwriting step touches a C line an earlier step of its instruction wrote)."""
    lines = config.blocks["C"].lines
    chosen = []
    for ins in program:
        candidate = replace(ins, overwrite=True)
        written: set[int] = set()
        legal = ins.mode is ComputeMode.MAC
        for o in range(ins.outer):
            for i in range(ins.inner):
                c = ins.acc_base + o * ins.acc_outer + i * ins.acc_inner
                if candidate.overwrites(o, i) and written & set(range(c, c + lines)):
                    legal = False
                written.update(range(c, c + lines))
        chosen.append(candidate if legal and rng.random() < share else ins)
    return chosen


def random_memories(
    config: AcceleratorConfig, rng: np.random.Generator, spad_lines: int, acc_lines: int
) -> tuple[np.ndarray, np.ndarray]:
    low, high = -(1 << (config.precision.in_bits - 1)), 1 << (config.precision.in_bits - 1)
    spad = rng.integers(low, high, (spad_lines, config.spad_line_elems))
    acc = rng.integers(-(1 << 20), 1 << 20, (acc_lines, config.acc_line_elems))
    return spad, acc
