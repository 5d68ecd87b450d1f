"""The on-chip activation memory (``scratchpad.activations``, issue 18 item 4) in the hardware:
the Verilog without it, the traffic model, and a hand-written two-layer program on the RTL
whose intermediate result never leaves the chip.

The RTL tests share the Verilator model of the 4x4 output-pipeline accelerator with a 16 KiB
activation memory (and the two-layer program runs on its ``ecp5`` target's too).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tensorforge import requant as rq
from tensorforge.config import ACTIVATION_BASE, AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.errors import SimulationError
from tensorforge.isa import Buffer, Compute, ComputeMode, Finish, Load, Store
from tensorforge.sim.axi_traffic import bus_traffic
from tensorforge.units import Bytes

WINDOW = Bytes.kib(16)
CONFIG = AcceleratorConfig(
    array=ArrayConfig(rows=4, cols=4),
    scratchpad=ScratchpadConfig(capacity=2048, banks=4, accumulator=2048, activations=WINDOW),
    output_pipeline=True)
# DRAM image: A (4x4 int8) at 0, B1 at 16, B2 at 32, the output parameters (3 accumulator
# lines) at 48, the int32 result at 96; the program follows at 160.
A_AT, B1_AT, B2_AT, PARAMS_AT, OUT_AT, IMAGE_BYTES = 0, 16, 32, 48, 96, 160
MIDDLE = ACTIVATION_BASE + 0x1000 + 4  # the first layer's int8 output: in the window, unaligned


def two_layers() -> list:
    """``out = requant(A @ B1) @ B2``: the requantized middle goes to the window and comes
    back as the second GEMM's A operand. Spad lines: A 0-3, B1 4-7, B2 8-11, middle 12-15;
    accumulator lines: C 0-3, parameters 8-10."""
    return [
        Load(line=0, dram_addr=A_AT, rows=4, row_len=4, stride=4),
        Load(line=4, dram_addr=B1_AT, rows=4, row_len=4, stride=4),
        Load(line=8, dram_addr=B2_AT, rows=4, row_len=4, stride=4),
        Load(buffer=Buffer.ACC, line=8, dram_addr=PARAMS_AT, rows=3, row_len=4, stride=4,
             push_next=True),
        Compute(overwrite=True, a_base=0, b_base=4, pop_prev=True, push_next=True),
        Store(line=0, dram_addr=MIDDLE, rows=4, row_len=4, stride=4, requant=True, params=8,
              pop_prev=True, push_prev=True),
        # passes the STORE's token on to the load unit: the middle is read after it is written
        Compute(mode=ComputeMode.ZERO, acc_base=4, pop_next=True, push_prev=True),
        Load(line=12, dram_addr=MIDDLE, rows=4, row_len=4, stride=4, pop_next=True,
             push_next=True),
        Compute(overwrite=True, a_base=12, b_base=8, pop_prev=True, push_next=True),
        Store(line=0, dram_addr=OUT_AT, rows=4, row_len=4, stride=4, pop_prev=True),
        Finish(),
    ]


def _operands(seed: int):
    rng = np.random.default_rng(seed)
    a, b1, b2 = (rng.integers(-128, 128, (4, 4)) for _ in range(3))
    multipliers, shifts = zip(*(rq.quantize_multiplier(float(s))
                                for s in rng.uniform(0.002, 0.01, 4)), strict=True)
    params = rq.OutputParams.per_channel(
        4, bias=rng.integers(-2000, 2000, 4), multiplier=multipliers, shift=shifts,
        zero_point=rng.integers(-5, 5, 4), low=-128, high=127)
    block = rq.param_lines(params, np.arange(4), 8, 32)
    image = bytearray(IMAGE_BYTES)
    for at, matrix in ((A_AT, a), (B1_AT, b1), (B2_AT, b2)):
        image[at : at + 16] = matrix.astype("<i1").tobytes()
    image[PARAMS_AT : OUT_AT] = block.astype("<i4").tobytes()
    middle = rq.requantize_lines(a @ b1, block, 8, 32)
    return image, middle, middle @ b2


def test_the_middle_is_requantized_to_int8_that_spans_its_range():
    """The operands exercise the requantizer (not all clamped, not all zero)."""
    _, middle, _ = _operands(5)
    assert middle.min() >= -128 and middle.max() <= 127
    assert len(np.unique(middle)) > 8


def test_traffic_model_leaves_the_window_out():
    traffic = bus_traffic(CONFIG, two_layers(), IMAGE_BYTES)
    # 11 instructions fetched in 16-byte chunks; A, B1, B2 (16 B each) and the parameters
    # (48 B) read as whole 8-byte beats; the 64-byte result written. The middle's 16 B each
    # way are on chip.
    assert traffic.read == 11 * 16 + 16 * 3 + 48
    assert traffic.written == 64
    without = dataclasses.replace(CONFIG, scratchpad=dataclasses.replace(
        CONFIG.scratchpad, activations=Bytes(0)))
    # without a window the same addresses are DRAM: the middle's 16 B (unaligned: 3 beats)
    assert bus_traffic(without, two_layers(), IMAGE_BYTES).read == traffic.read + 24
    assert bus_traffic(without, two_layers(), IMAGE_BYTES).written == 64 + 24


@pytest.mark.rtl
@pytest.mark.parametrize("target", ["generic", "ecp5"])
def test_two_layers_through_the_window_on_rtl(target, random_seed):
    """The RTL computes numpy's result; its DRAM counters show only the DRAM transfers."""
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    image, _, expected = _operands(random_seed)
    program = RawProgram(tuple(two_layers()), bytes(image), writable=((OUT_AT, IMAGE_BYTES),))
    (counters, after), = run_instructions_on_rtl(CONFIG, [program], RunOptions(target=target))
    result = np.frombuffer(after[OUT_AT:IMAGE_BYTES], dtype="<i4").reshape(4, 4)
    np.testing.assert_array_equal(result, expected, err_msg=f"seed {random_seed}")
    assert counters["bytes_read"] == 11 * 16 + 16 * 3 + 48  # fetch, A, B1, B2, parameters
    assert counters["bytes_written"] == 64  # the result alone


@pytest.mark.rtl
@pytest.mark.parametrize("instruction", [
    Store(rows=1, row_len=4, dram_addr=ACTIVATION_BASE + WINDOW - 8),  # runs past the end
    Load(buffer=Buffer.ACC, rows=1, row_len=4, dram_addr=ACTIVATION_BASE + WINDOW),  # beyond
], ids=["store-straddling", "load-beyond"])
@pytest.mark.parametrize("target", ["generic", "ecp5"])
def test_a_transfer_past_the_window_sets_the_error_status(instruction, target):
    """The window answers SLVERR (a STORE's B, a LOAD's R beats), and the unit's sticky error
    reaches STATUS on both targets (``ecp5``: the load unit's R beats through its elastic
    buffer, the store's packer)."""
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    with pytest.raises(SimulationError, match="STATUS.error is set"):
        run_instructions_on_rtl(CONFIG, [RawProgram((instruction, Finish()), bytes(64))],
                                RunOptions(target=target))
