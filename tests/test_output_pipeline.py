"""The output pipeline (bias, requantization, activation at STORE; issue 18 item 1).

The reference (`tensorforge.requant`) against hand-computed values and an independent
transcription of gemmlowp's arithmetic in exact fractions; the hardware `Requantizer`
(Amaranth's simulator) and the functional simulator against the reference; whole programs on
the RTL against it, bit for bit.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from network_configs import PIPELINE_4x4
from random_programs import random_cases, random_sizes

from tensorforge import requant as rq
from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping, device_choices, library_mapping
from tensorforge.compiler.mapping import random_mapping
from tensorforge.compiler.output_stage import OutputStage, ParamRoomError
from tensorforge.compiler.tiling import build_tiling
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, PrecisionConfig, ScratchpadConfig
from tensorforge.errors import ConfigError, MappingError, SimulationError
from tensorforge.isa import Buffer, Finish, Load, Store, decode
from tensorforge.sim.functional import run_program

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=7,j=11,k=13", name="gemm")
CONV = parse_workload("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=6,c=3,x=4,y=5,r=3,s=3",
                      name="conv")


# ------------------------------------------------------------------ the formula


def test_hand_computed_cases():
    # 1000 + 24 = 1024; x 0.5 (2**30 in Q31) = 512; / 2**3 = 64; + zero point -10 = 54
    assert rq.requantize(1000, 24, 1 << 30, 3, -10, -128, 127, acc_bits=32) == 54
    # -1005 x 0.5 = -502.5 -> -502 (round half away from zero in gemmlowp's doubling
    # high multiply: (ab + 1 - 2**30) / 2**31 truncated); / 4 = -125.5 -> -126
    assert rq.requantize(-1000, -5, 1 << 30, 2, 0, -128, 127, acc_bits=32) == -126
    assert rq.requantize(-1000, -5, 1 << 30, 2, 0, 0, 127, acc_bits=32) == 0  # ReLU
    # the one saturating product: MIN x MIN -> MAX; / 2**24 = 127.99.. -> 128 -> clamp 127
    assert rq.requantize(INT32_MIN, 0, INT32_MIN, 24, 0, -128, 127, acc_bits=32) == 127
    # the sum wraps at acc_bits before the multiply, as a 32-bit accumulator does
    assert rq.requantize(INT32_MAX, 1, 1 << 30, 24, 0, -128, 127, acc_bits=32) == -64


def _gemmlowp(x: int, multiplier: int, shift: int) -> int:
    """gemmlowp's SaturatingRoundingDoublingHighMul + RoundingDivideByPOT, transcribed with
    exact fractions (an independent check of `requant`'s shift-only rewriting)."""
    if x == multiplier == INT32_MIN:
        high = INT32_MAX
    else:
        product = x * multiplier
        nudge = (1 << 30) if product >= 0 else 1 - (1 << 30)
        high = math.trunc(Fraction(product + nudge, 1 << 31))
    exact = Fraction(high, 1 << shift)
    magnitude = math.floor(abs(exact) + Fraction(1, 2))
    return magnitude if exact >= 0 else -magnitude


@given(x=st.integers(INT32_MIN, INT32_MAX), bias=st.integers(-(1 << 20), 1 << 20),
       multiplier=st.integers(INT32_MIN, INT32_MAX), shift=st.integers(0, 31),
       zero_point=st.integers(-128, 127), bounds=st.tuples(st.integers(-128, 127),
                                                           st.integers(-128, 127)))
def test_formula_is_gemmlowps(x, bias, multiplier, shift, zero_point, bounds):
    low, high = min(bounds), max(bounds)
    t = ((x + bias + (1 << 31)) % (1 << 32)) - (1 << 31)
    v = _gemmlowp(t, multiplier, shift) + zero_point
    expected = min(max(v, low), high)
    got = rq.requantize(x, bias, multiplier, shift, zero_point, low, high, acc_bits=32)
    assert got == expected
    assert low <= got <= high


@given(scale=st.floats(1e-9, 0.999999, allow_nan=False))
def test_quantize_multiplier_represents_the_scale(scale):
    multiplier, shift = rq.quantize_multiplier(scale)
    assert (1 << 30) <= multiplier < (1 << 31) and 0 <= shift < 32
    assert abs(multiplier / 2 ** 31 / 2 ** shift - scale) <= scale * 2 ** -30


@given(shift=st.integers(0, 31), zero_point=st.integers(-128, 127),
       low=st.integers(-128, 127), high=st.integers(-128, 127))
def test_packed_lane_round_trips(shift, zero_point, low, high):
    packed = rq.pack_lane(shift, zero_point, low, high, 8)
    lane = rq.wrap(packed, 32)  # as an int32 accumulator element holds it
    assert [int(v) for v in rq.unpack_lane(lane, 8)] == [shift, zero_point, low, high]


def test_params_from_scales_follow_the_float_layer():
    """A float layer's per-channel scales and bias, quantized: the integer pipeline is within
    one output step of round(relu6(acc * s_in * s_w + bias) / s_out) + zero point."""
    rng = np.random.default_rng(3)
    weight_scales = rng.uniform(0.002, 0.02, 5)
    bias = rng.normal(0, 0.5, 5)
    params = rq.params_from_scales(0.05, weight_scales, 0.04, bias=bias, zero_point=-7,
                                   activation="relu6")
    acc = rng.integers(-4000, 4000, (200, 5))
    real = np.clip(acc * 0.05 * weight_scales + bias, 0, 6)
    expected = np.clip(np.round(real / 0.04) - 7, -128, 127)
    got = params.apply(acc, 1, 32)
    assert np.abs(got - expected).max() <= 1
    assert got.min() == -7 and got.max() <= -7 + round(6 / 0.04)


def test_activation_ranges():
    assert rq.activation_range("none", 8) == (-128, 127)
    assert rq.activation_range("relu", 8, zero_point=-5) == (-5, 127)
    assert rq.activation_range("relu6", 8, zero_point=-5, scale=0.1) == (-5, 55)
    with pytest.raises(ConfigError, match="ReLU6 needs"):
        rq.activation_range("relu6", 8)


# ------------------------------------------------------------------ ISA and configuration


def test_store_encoding_unchanged_without_requant():
    plain = Store(line=3, dram_addr=0x1234, rows=2, row_len=4, stride=4, pop_prev=True)
    assert plain.encode() < 1 << 96  # the fields every STORE had end at bit 96
    assert "requant" not in plain.describe()
    requant = Store(line=3, rows=1, row_len=4, requant=True, params=77)
    assert decode(requant.encode()) == requant
    assert "params=77" in requant.describe()


def test_config_field_and_its_checks():
    assert "output_pipeline" not in AcceleratorConfig().to_dict()  # hashes of old configs stay
    assert AcceleratorConfig.from_dict(PIPELINE_4x4.to_dict()) == PIPELINE_4x4
    with pytest.raises(ConfigError, match="acc_bits must be at least 56"):
        AcceleratorConfig(precision=PrecisionConfig(in_bits=16, acc_bits=32),
                          output_pipeline=True)


# ------------------------------------------------------------------ hardware lane


def _random_params(rng, channels: int, in_bits: int = 8, acc_bits: int = 32) -> rq.OutputParams:
    qmin, qmax = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
    bounds = np.sort(rng.integers(qmin, qmax + 1, (2, channels)), axis=0)
    top = 1 << (acc_bits - 1)
    return rq.OutputParams(
        bias=rng.integers(-(1 << 20), 1 << 20, channels),
        multiplier=rng.integers(-top, top, channels, dtype=np.int64),
        shift=rng.integers(0, acc_bits, channels), zero_point=rng.integers(qmin, qmax + 1,
                                                                           channels),
        low=bounds[0], high=bounds[1])


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("in_bits, acc_bits", [(8, 32), (16, 64)])
def test_requantizer_matches_the_reference(in_bits, acc_bits, random_seed):
    from amaranth.sim import Simulator

    from tensorforge.hw.output_pipeline import Requantizer

    config = AcceleratorConfig(array=ArrayConfig(rows=2, cols=4), output_pipeline=True,
                               precision=PrecisionConfig(in_bits=in_bits, acc_bits=acc_bits))
    dut = Requantizer(config)
    lanes = config.acc_line_elems
    rng = np.random.default_rng(random_seed)
    top = 1 << (acc_bits - 1)
    failures = []

    async def bench(ctx):
        for trial in range(150):
            params = _random_params(rng, lanes, in_bits, acc_bits)
            x = rng.integers(-top, top, lanes, dtype=np.int64)
            if trial % 3 == 0:  # small sums: the results that are not all clamped
                x = rng.integers(-5000, 5000, lanes)
                params = rq.OutputParams(params.bias, rng.integers(top // 2, top, lanes),
                                         rng.integers(0, 12, lanes), params.zero_point,
                                         params.low, params.high)
            if trial % 10 == 0:  # the saturating product
                x[0], params.multiplier[0], params.bias[0] = -top, -top, 0
            block = rq.param_lines(params, np.arange(lanes), in_bits, acc_bits)
            for e in range(lanes):
                ctx.set(dut.line[e], int(x[e]))
                for k in range(rq.PARAM_LINES):
                    ctx.set(getattr(dut, f"param_{k}")[e], int(block[k][e]))
            narrow = ctx.get(dut.narrow)
            got = rq.wrap(np.array([(narrow >> (e * in_bits)) & ((1 << in_bits) - 1)
                                    for e in range(lanes)]), in_bits)
            want = rq.requantize_lines(x[None, :], block, in_bits, acc_bits)[0]
            if not np.array_equal(got, want):
                failures.append((trial, x, block, want, got))

    simulator = Simulator(dut)
    simulator.add_testbench(bench)
    simulator.run()
    assert not failures, failures[0]


# ------------------------------------------------------------------ compiler and simulator


def _stage(workload, channel: str, rng) -> OutputStage:
    n = workload.sizes[channel]
    pairs = [rq.quantize_multiplier(s) for s in rng.uniform(0.002, 0.03, n)]
    low, high = rq.activation_range("relu6", 8, zero_point=-3, scale=0.05)
    params = rq.OutputParams.per_channel(
        n, bias=rng.integers(-400, 400, n), multiplier=[m for m, _ in pairs],
        shift=[s for _, s in pairs], zero_point=-3, low=low, high=high)
    return OutputStage(params, channel)


CASES = [(GEMM, "j"), (GEMM, "i"), (CONV, "k")]


@pytest.mark.parametrize("workload, channel", CASES)
@pytest.mark.parametrize("mapper", [default_mapping, library_mapping])
def test_functional_simulator_matches_the_reference(workload, channel, mapper, random_seed):
    rng = np.random.default_rng(random_seed)
    stage = _stage(workload, channel, rng)
    program = generate(workload, mapper(workload, PIPELINE_4x4), PIPELINE_4x4, output=stage)
    inputs = workload.random_inputs(rng)
    expected = stage.params.apply(workload.reference(inputs),
                                  workload.output.indices.index(channel), 32)
    assert len(np.unique(expected)) > 5  # not all clamped
    got = program.run_functional(inputs, garbage=np.random.default_rng(random_seed))
    np.testing.assert_array_equal(got, expected)
    stores = [i for i in program.instructions if isinstance(i, Store)]
    assert stores and all(s.requant for s in stores)
    # int8 out: a quarter of the int32 bytes of the same program without the stage
    plain = generate(workload, mapper(workload, PIPELINE_4x4), PIPELINE_4x4)
    assert program.statistics()["dram_bytes_written"] * 4 == plain.statistics()[
        "dram_bytes_written"]


def test_channel_across_lines_gives_per_row_stores():
    """The library mapping puts i across the accumulator lines: each STORE row is one channel,
    so STOREs are per_row, over more rows than a block has lanes (the hardware reads the next
    block mid-STORE), not a STORE per row."""
    stage = _stage(GEMM, "i", np.random.default_rng(1))
    program = generate(GEMM, library_mapping(GEMM, PIPELINE_4x4), PIPELINE_4x4, output=stage)
    stores = [i for i in program.instructions if isinstance(i, Store)]
    assert all(s.per_row for s in stores)
    assert max(s.rows for s in stores) > PIPELINE_4x4.acc_line_elems


def test_output_stage_needs_the_pipeline_and_matching_channels():
    rng = np.random.default_rng(0)
    plain = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4))
    with pytest.raises(MappingError, match="output pipeline"):
        generate(GEMM, default_mapping(GEMM, plain), plain, output=_stage(GEMM, "j", rng))
    with pytest.raises(MappingError, match="has 11"):
        generate(GEMM, default_mapping(GEMM, PIPELINE_4x4), PIPELINE_4x4,
                 output=OutputStage(_stage(GEMM, "i", rng).params, "j"))
    with pytest.raises(SimulationError, match="no output pipeline"):
        run_program(plain, [Store(rows=1, row_len=4, requant=True), Finish()], bytearray(64))


# ------------------------------------------------------------------ RTL


@pytest.mark.rtl
@pytest.mark.parametrize("target", ["generic", "ecp5"])  # ecp5: the requantizer's stages
def test_rtl_matches_the_reference(target, random_seed):
    """Requantizing programs (channel along the accumulator line, across it: per-row STOREs
    over several blocks, a convolution) and a plain int32 one, in one run of the pipeline
    accelerator's model."""
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    rng = np.random.default_rng(random_seed)
    cases = []
    for (workload, channel), mapper in zip([*CASES, (GEMM, "i")],
                                           [default_mapping] * len(CASES) + [library_mapping],
                                           strict=True):
        stage = _stage(workload, channel, rng)
        program = generate(workload, mapper(workload, PIPELINE_4x4), PIPELINE_4x4,
                           output=stage)
        cases.append(RtlCase(workload, program=program, seed=random_seed))
    for kind in ("gemm", "conv"):  # random mappings and channels, as in the test below
        text, indices, _ = RANDOM_KINDS[kind]
        workload = parse_workload(text, random_sizes(indices, rng, largest=10))
        for choice in device_choices(workload, PIPELINE_4x4)[:2]:
            channel = workload.output.indices[rng.integers(len(workload.output.indices))]
            program = generate(workload, random_mapping(workload, choice, PIPELINE_4x4, rng),
                               PIPELINE_4x4, output=_stage(workload, channel, rng))
            cases.append(RtlCase(workload, program=program, seed=random_seed))
    cases.append(RtlCase(GEMM, seed=random_seed))  # STOREs without requant: int32 as before
    results = run_programs_on_rtl(PIPELINE_4x4, cases, RunOptions(seed=random_seed, target=target))
    for case, result in zip(cases, results, strict=True):
        assert result.match, (case.workload, result.mismatches)
        assert result.dram_bytes_written == result.expected_traffic.written


def test_compile_leaves_room_for_the_parameters():
    """The default mapper fills this accumulator with C tiles; compile_workload maps for one
    with the parameter blocks' lines set aside."""
    from tensorforge.api import compile_workload

    config = AcceleratorConfig(
        array=ArrayConfig(rows=4, cols=4),
        scratchpad=ScratchpadConfig(capacity=4096, banks=4, accumulator=1024),
        output_pipeline=True)
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=40,j=36,k=8")
    rng = np.random.default_rng(11)
    stage = _stage(workload, "j", rng)
    with pytest.raises(ParamRoomError, match="past its 64"):
        generate(workload, default_mapping(workload, config), config, output=stage)
    program = compile_workload(workload, config, output=stage)
    inputs = workload.random_inputs(rng)
    np.testing.assert_array_equal(program.run_functional(inputs),
                                  program.expected_output(inputs))


RANDOM_KINDS = {
    "gemm": ("C[i,j] += A[i,k] * B[k,j]", "ijk", PIPELINE_4x4),
    "conv": ("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "kcxyrs", PIPELINE_4x4),
    "conv2d intrinsic": ("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "kcxyrs",
                         AcceleratorConfig(intrinsic="conv2d",
                                           array=ArrayConfig(rows=2, cols=3, dataflow="os"),
                                           scratchpad=ScratchpadConfig(capacity=4096,
                                                                       accumulator=4096),
                                           output_pipeline=True)),
}


@pytest.mark.parametrize("kind", sorted(RANDOM_KINDS))
def test_random_mappings_and_channels_are_exact(kind):
    """Random sizes, every tensorize choice, random tiles and orders, each output index as the
    channel: the functional simulator, from garbage buffers, equals the reference."""
    text, indices, config = RANDOM_KINDS[kind]
    for case in random_cases(text, indices, config, seeds=range(6), largest=10):
        workload, rng = case.workload, case.rng
        channel = workload.output.indices[rng.integers(len(workload.output.indices))]
        stage = _stage(workload, channel, rng)
        try:
            program = generate(workload, case.mapping, config, output=stage)
        except MappingError as error:  # only the parameters' room may be missing
            assert "parameter block" in str(error)
            continue
        result = program.run_functional(case.inputs, garbage=np.random.default_rng(case.seed))
        assert np.array_equal(result, program.expected_output(case.inputs)), (
            case.seed, case.sizes, channel, case.choice.describe(), case.mapping.to_json())


# layers with more channels than the 128-line accumulator of PIPELINE_4x4 holds parameter
# blocks for (a block of 3 lines per 4 channels along a line, per channel across lines):
# their blocks are LOADed per output tile (`param_reload`)
WIDE_LAYERS = [
    ("C[i,j] += A[i,k] * B[k,j]", "i=20,j=200,k=8", "j"),  # channel along the line
    ("C[i,j] += A[i,k] * B[k,j]", "i=200,j=12,k=8", "i"),  # across lines
    ("C[k,x,y] += A[k,x+r,y+s] * B[k,r,s]", "k=96,x=6,y=6,r=3,s=3", "k"),  # depthwise
]


def _wide_program(text: str, sizes: str, channel: str, seed: int):
    from tensorforge.api import compile_workload

    workload = parse_workload(text, sizes)
    rng = np.random.default_rng(seed)
    program = compile_workload(workload, PIPELINE_4x4, output=_stage(workload, channel, rng))
    return program, workload.random_inputs(rng)


@pytest.mark.parametrize("text, sizes, channel", WIDE_LAYERS)
def test_wide_layers_reload_parameters_per_tile(text, sizes, channel):
    """The blocks do not fit beside the tiles all at once: each output tile's are LOADed
    ahead of it into a rotating slot (a tile whose blocks are resident loads none), past
    the C tiles, and the program is exact from garbage buffers with every line ordered."""
    program, inputs = _wide_program(text, sizes, channel, seed=2)
    with pytest.raises(ParamRoomError):  # all at the start, they do not fit
        generate(program.workload, program.mapping, PIPELINE_4x4,
                 output=program.output_stage, reload_params=False)
    transfers = program.params.transfers
    assert len(transfers) > 1
    parameter_loads = [i for i in program.instructions
                       if isinstance(i, Load) and i.buffer is Buffer.ACC]
    assert len(parameter_loads) == len(transfers)  # real LOADs: the cost model sees them
    tiling = build_tiling(program.lowering.device, program.mapping.choice,
                          program.mapping.tile_sizes, PIPELINE_4x4, program.mapping.holds)
    assert min(line for line, _, _ in transfers) >= tiling.acc_lines()  # past the C tiles
    assert max(line + lines for line, _, lines in transfers) <= PIPELINE_4x4.acc_lines
    got = program.run_functional(inputs, garbage=np.random.default_rng(1))
    np.testing.assert_array_equal(got, program.expected_output(inputs))


@pytest.mark.parametrize("kind", sorted(RANDOM_KINDS))
def test_parameters_reloaded_per_tile_are_exact(kind):
    """Random mappings, every tensorize choice and channel, with the blocks LOADed per
    output tile even where they would all fit (``reload_params=True``)."""
    text, indices, config = RANDOM_KINDS[kind]
    for case in random_cases(text, indices, config, seeds=range(6, 12), largest=12):
        workload, rng = case.workload, case.rng
        channel = workload.output.indices[rng.integers(len(workload.output.indices))]
        try:
            program = generate(workload, case.mapping, config,
                               output=_stage(workload, channel, rng), reload_params=True)
        except MappingError as error:  # the C tiles fill the accumulator
            assert "parameter" in str(error)
            continue
        result = program.run_functional(case.inputs, garbage=np.random.default_rng(case.seed))
        assert np.array_equal(result, program.expected_output(case.inputs)), (
            case.seed, case.sizes, channel, case.choice.describe(), case.mapping.to_json())


def test_blocks_that_fit_are_loaded_once_at_the_start():
    """Where they fit beside the tiles, the blocks stay one LOAD at the start (the program
    as before per-tile reloading)."""
    program = generate(GEMM, default_mapping(GEMM, PIPELINE_4x4), PIPELINE_4x4,
                       output=_stage(GEMM, "j", np.random.default_rng(0)))
    assert len(program.params.transfers) == 1
    assert isinstance(program.instructions[0], Load)
    assert program.instructions[0].buffer is Buffer.ACC
    assert sum(isinstance(i, Load) and i.buffer is Buffer.ACC
               for i in program.instructions) == 1


@pytest.mark.rtl
def test_rtl_reloads_parameters_per_tile(random_seed):
    """Wide layers whose blocks are LOADed per output tile, on the RTL, bit for bit."""
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    cases = []
    for text, sizes, channel in WIDE_LAYERS[:2] + [
            ("C[k,x,y] += A[k,x+r,y+s] * B[k,r,s]", "k=48,x=4,y=4,r=3,s=3", "k")]:
        program, _ = _wide_program(text, sizes, channel, seed=random_seed)
        assert len(program.params.transfers) > 1
        cases.append(RtlCase(program.workload, program=program, seed=random_seed))
    results = run_programs_on_rtl(PIPELINE_4x4, cases, RunOptions(seed=random_seed))
    for case, result in zip(cases, results, strict=True):
        assert result.match, (case.workload, result.mismatches)
        assert result.dram_bytes_written == result.expected_traffic.written


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("in_bits, acc_bits", [(8, 32), (16, 64)])
def test_pipelined_requantizer_matches_the_reference(in_bits, acc_bits, random_seed):
    """The ``ecp5`` target's requantizer: a new line (and new parameters) every cycle, each
    result ``latency`` cycles later with its tag and the line as it came in, equal to numpy."""
    from amaranth.sim import Simulator

    from tensorforge.hw.output_pipeline import PipelinedRequantizer

    config = AcceleratorConfig(array=ArrayConfig(rows=2, cols=4), output_pipeline=True,
                               precision=PrecisionConfig(in_bits=in_bits, acc_bits=acc_bits))
    dut = PipelinedRequantizer(config, tag_bits=5)
    lanes = config.acc_line_elems
    rng = np.random.default_rng(random_seed)
    top = 1 << (acc_bits - 1)
    sent, got = [], []

    async def bench(ctx):
        for trial in range(120 + dut.latency):
            if trial < 120:
                params = _random_params(rng, lanes, in_bits, acc_bits)
                x = rng.integers(-top, top, lanes, dtype=np.int64)
                if trial % 3 == 0:
                    x = rng.integers(-5000, 5000, lanes)
                    params = rq.OutputParams(params.bias, rng.integers(top // 2, top, lanes),
                                             rng.integers(0, 12, lanes), params.zero_point,
                                             params.low, params.high)
                if trial % 10 == 0:
                    x[0], params.multiplier[0], params.bias[0] = -top, -top, 0
                block = rq.param_lines(params, np.arange(lanes), in_bits, acc_bits)
                valid = trial % 7 != 3  # a gap now and then
                for e in range(lanes):
                    ctx.set(dut.line[e], int(x[e]))
                    for k in range(rq.PARAM_LINES):
                        ctx.set(getattr(dut, f"param_{k}")[e], int(block[k][e]))
                ctx.set(dut.valid, valid)
                ctx.set(dut.tag, trial % 32)
                if valid:
                    sent.append((trial % 32, x.copy(),
                                 rq.requantize_lines(x[None, :], block, in_bits, acc_bits)[0]))
            else:
                ctx.set(dut.valid, 0)
            await ctx.tick()
            if ctx.get(dut.valid_out):
                narrow = ctx.get(dut.narrow)
                got.append((ctx.get(dut.tag_out),
                            np.array([ctx.get(dut.line_out[e]) for e in range(lanes)]),
                            rq.wrap(np.array([(narrow >> (e * in_bits)) & ((1 << in_bits) - 1)
                                              for e in range(lanes)]), in_bits)))

    simulator = Simulator(dut)
    simulator.add_clock(1e-6)
    simulator.add_testbench(bench)
    simulator.run()
    assert len(got) == len(sent)
    for (tag, x, want), (got_tag, got_x, result) in zip(sent, got, strict=True):
        assert got_tag == tag and np.array_equal(got_x, x) and np.array_equal(result, want)
