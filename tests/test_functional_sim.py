"""The functional simulator against hand-written programs and numpy."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tensorforge.config import AcceleratorConfig, ArrayConfig
from tensorforge.errors import SimulationError
from tensorforge.isa import Buffer, Compute, ComputeMode, Finish, Load, Store, encode_program
from tensorforge.sim.functional import FunctionalSimulator, run_program

CONFIG = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4))


def _gemm_program(flags: bool = True) -> list:
    return [
        Load(line=0, dram_addr=0, rows=4, row_len=4, stride=4, push_next=flags),
        Load(line=4, dram_addr=16, rows=3, row_len=4, stride=4, pad_after=1, push_next=flags),
        Compute(mode=ComputeMode.ZERO, pop_prev=flags),
        Compute(a_base=0, b_base=4, pop_prev=flags, push_next=flags),
        Store(line=0, dram_addr=32, rows=4, row_len=4, stride=4, pop_prev=flags),
        Finish(),
    ]


def _image(a: np.ndarray, b: np.ndarray) -> bytearray:
    dram = bytearray(32 + 64)
    dram[0:16] = a.astype("<i1").tobytes()
    dram[16:28] = b.astype("<i1").tobytes()
    return dram


def test_gemm_step_matches_numpy_and_counts():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (4, 4))
    b = rng.integers(-128, 128, (3, 4))
    dram = _image(a, b)
    stats = run_program(CONFIG, encode_program(_gemm_program()), dram)
    result = np.frombuffer(bytes(dram[32:]), dtype="<i4").reshape(4, 4)
    np.testing.assert_array_equal(result, a[:, :3] @ b)  # the pad line is zero
    assert stats.instructions == {"LOAD": 2, "COMPUTE": 2, "STORE": 1, "FINISH": 1}
    assert stats.dram_bytes_read == 28 and stats.dram_bytes_written == 64
    assert stats.macs == 64 and stats.mac_steps == 1 and stats.zero_steps == 1


def test_buffers_start_zeroed_or_from_seeded_garbage():
    assert not FunctionalSimulator(CONFIG).spad.any()
    assert not FunctionalSimulator(CONFIG).acc.any()
    first = FunctionalSimulator(CONFIG, garbage=np.random.default_rng(4))
    again = FunctionalSimulator(CONFIG, garbage=np.random.default_rng(4))
    np.testing.assert_array_equal(first.spad, again.spad)
    np.testing.assert_array_equal(first.acc, again.acc)
    in_half, acc_half = 1 << (CONFIG.precision.in_bits - 1), 1 << (CONFIG.precision.acc_bits - 1)
    assert -in_half <= first.spad.min() and first.spad.max() < in_half
    assert -acc_half <= first.acc.min() and first.acc.max() < acc_half
    assert np.count_nonzero(first.spad) > first.spad.size // 2
    assert first.acc.max() > in_half  # accumulator garbage is acc_bits wide


def test_load_pad_lines_and_zero_fill_overwrite_garbage():
    # the hand-written GEMM reads a pad line and a short row: both must be zero from the LOAD,
    # not from the buffer's initial state
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (4, 4))
    b = rng.integers(-128, 128, (3, 4))
    program = _gemm_program()
    program[0] = Load(line=0, dram_addr=0, rows=4, row_len=3, stride=4, push_next=True)
    for seed in range(3):
        dram = _image(a, b)
        run_program(CONFIG, program, dram, garbage=np.random.default_rng(seed))
        result = np.frombuffer(bytes(dram[32:]), dtype="<i4").reshape(4, 4)
        np.testing.assert_array_equal(result, a[:, :3] @ b)


def test_accumulator_wraps_to_acc_bits():
    a = np.full((4, 4), -128)
    b = np.full((4, 4), -128)
    dram = bytearray(32 + 64)
    dram[0:16] = a.astype("<i1").tobytes()
    dram[16:32] = b.astype("<i1").tobytes()
    dram[32:96] = np.full(16, 2**31 - 5, dtype="<i4").tobytes()  # a partial sum near the top
    program = [
        Load(line=0, dram_addr=0, rows=4, row_len=4, stride=4),
        Load(line=4, dram_addr=16, rows=4, row_len=4, stride=4),
        Load(buffer=Buffer.ACC, line=0, dram_addr=32, rows=4, row_len=4, stride=4,
             push_next=True),
        Compute(a_base=0, b_base=4, pop_prev=True, push_next=True),
        Store(line=0, dram_addr=32, rows=4, row_len=4, stride=4, pop_prev=True),
        Finish(),
    ]
    run_program(CONFIG, program, dram)
    wrapped = (2**31 - 5 + 4 * 128 * 128 + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(np.frombuffer(bytes(dram[32:96]), dtype="<i4"), wrapped)


def test_missing_token_is_an_unprotected_hazard():
    program = _gemm_program()
    program[4] = Store(line=0, dram_addr=32, rows=4, row_len=4, stride=4)
    with pytest.raises(SimulationError, match="unprotected hazard: instruction 4"):
        run_program(CONFIG, program, _image(np.ones((4, 4)), np.ones((3, 4))))


def test_pop_without_push_is_a_deadlock():
    program = _gemm_program()
    program[3] = Compute(a_base=0, b_base=4, pop_prev=True)
    with pytest.raises(SimulationError, match="(?s)deadlock.*instruction 4"):
        run_program(CONFIG, program, _image(np.ones((4, 4)), np.ones((3, 4))))


@pytest.mark.parametrize("bad, message", [
    (Load(line=CONFIG.spad_lines - 2, rows=4, row_len=4, stride=4), "past its"),
    (Load(line=0, dram_addr=90, rows=2, row_len=4, stride=4), "outside the"),
    (Compute(a_base=CONFIG.spad_lines - 1), "past the"),
    (Store(line=0, dram_addr=0, rows=1, row_len=5), "wider than"),
])
def test_out_of_range_accesses_name_the_instruction(bad, message):
    with pytest.raises(SimulationError, match=f"instruction 0 .*{message}"):
        run_program(CONFIG, [bad, Finish()], bytearray(96), check_hazards=False)


def test_program_must_end_with_finish():
    with pytest.raises(SimulationError, match="no FINISH"):
        run_program(CONFIG, [Load()], bytearray(16))
    with pytest.raises(SimulationError, match="follows FINISH"):
        run_program(CONFIG, [Finish(), Load()], bytearray(16))


# ---------------------------------------------------------------------- overwrite


def _overwrite_case(reduction: str):
    """Two output blocks x two reduction blocks of the 4x4 GEMM as one COMPUTE, with the
    reduction as the ``inner`` loop, the ``outer`` loop or both loops (then one output block).
    A block (output o, reduction r) sits at line 8*o + 4*r, B block r at 16 + 4*r, C block o
    at 4*o. Returns the instruction and its steps as ``(C block, A block, B block)``."""
    if reduction == "inner":
        fields = dict(outer=2, inner=2, a_outer=8, a_inner=4, b_inner=4, acc_outer=4)
        steps = [(o, 2 * o + r, r) for o in range(2) for r in range(2)]
    elif reduction == "outer":
        fields = dict(outer=2, inner=2, a_outer=4, a_inner=8, b_outer=4, acc_inner=4)
        steps = [(o, 2 * o + r, r) for r in range(2) for o in range(2)]
    else:  # outer and inner both walk the reduction of C block 0
        fields = dict(outer=2, inner=2, a_outer=4, a_inner=8, b_outer=4, b_inner=0)
        steps = [(0, 2 * i + o, o) for o in range(2) for i in range(2)]
    return Compute(a_base=0, b_base=16, acc_base=0, overwrite=True, **fields), steps


@pytest.mark.parametrize("reduction", ["inner", "outer", "both"])
def test_overwrite_starts_each_c_block_at_its_first_visit(reduction):
    """From garbage accumulators, ``overwrite`` leaves each C block the sum of the products of
    the steps visiting it (its first visit writes, the others add), and only those first
    visits count as overwrite steps; without the bit the garbage stays in the sum."""
    rng = np.random.default_rng(3)
    instruction, steps = _overwrite_case(reduction)
    a_blocks = rng.integers(-128, 128, (4, 4, 4))
    b_blocks = rng.integers(-128, 128, (2, 4, 4))
    for overwrite in (True, False):
        simulator = FunctionalSimulator(CONFIG, garbage=np.random.default_rng(9))
        simulator.spad[:16, :4] = a_blocks.reshape(16, 4)
        simulator.spad[16:24, :4] = b_blocks.reshape(8, 4)
        before = simulator.acc[:8].copy()
        stats = simulator.run([replace(instruction, overwrite=overwrite), Finish()],
                              bytearray())
        for c in {c for c, _, _ in steps}:
            total = sum(a_blocks[a] @ b_blocks[b] for cc, a, b in steps if cc == c)
            expected = total if overwrite else before[4 * c : 4 * c + 4, :4] + total
            np.testing.assert_array_equal(simulator.acc[4 * c : 4 * c + 4, :4], expected)
        visited = len({c for c, _, _ in steps})
        assert stats.mac_steps == 4 and stats.overwrite_steps == (visited if overwrite else 0)


def test_zero_ignores_the_overwrite_bit():
    simulator = FunctionalSimulator(CONFIG, garbage=np.random.default_rng(2))
    stats = simulator.run([Compute(mode=ComputeMode.ZERO, overwrite=True), Finish()], bytearray())
    assert not simulator.acc[:4].any() and stats.zero_steps == 1 and stats.overwrite_steps == 0


def test_overwriting_a_block_the_instruction_already_wrote_is_rejected():
    # C steps 4 and 4: step (1, 0) overwrites block 4, which step (0, 1) wrote just before
    aliasing = Compute(overwrite=True, outer=2, inner=2, acc_outer=4, acc_inner=4)
    with pytest.raises(SimulationError, match=r"instruction 0 .*step \(o=1, i=0\).*4\.\.7"):
        run_program(CONFIG, [aliasing, Finish()], bytearray())
