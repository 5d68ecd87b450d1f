"""Direct convolution with input reuse: a tile holds the input window once, halo included, and
COMPUTE walks the kernel taps by line offsets into it (`compiler.tiling.sliding_windows`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping, device_choices
from tensorforge.compiler.mapping import Mapping, check_mapping
from tensorforge.compiler.tiling import build_tiling
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.dse.cost_mapping import mapping_arrays
from tensorforge.dse.cost_model import evaluate
from tensorforge.dse.cost_space import build_space
from tensorforge.errors import MappingError
from tensorforge.isa import Load, expand
from tensorforge.sim.functional import run_program

GEMM_4x4 = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4),
                             scratchpad=ScratchpadConfig(capacity=8192, banks=2,
                                                         accumulator=4096))
CONVS = {
    "valid 3x3": ("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=5,c=6,x=5,y=7,r=3,s=3"),
    "padded 3x3": ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "k=4,c=3,x=6,y=5,r=3,s=3"),
    "odd 2x5 kernel": ("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=3,c=5,x=3,y=9,r=2,s=5"),
    "strided rows": ("C[k,x,y] += A[c,2*x+r,y+s] * B[k,c,r,s]", "k=4,c=3,x=3,y=6,r=3,s=3"),
}
# the direct choice with the output pixels of a row on the array's rows (i) and the input
# channels along a line (k): its A tile is one strip of input lines per channel block
DIRECT = "i->y j->k k->c"


def _direct(workload, config=GEMM_4x4):
    return next(c for c in device_choices(workload, config) if DIRECT in c.describe())


def _mappings(workload):
    """Direct mappings with whole kernel taps: partial tiles of x and y, split channels."""
    choice, sizes = _direct(workload), workload.sizes
    for x, y, c in ((2, 4, 4), (sizes["x"], 4, sizes["c"]), (1, sizes["y"], 4)):
        tiles = {**sizes, "x": x, "y": y, "c": c, "k": 4}
        yield Mapping(choice, tuple(tiles.items()), ("x", "y", "k", "c", "r", "s"))


def test_a_tile_holds_the_input_window_once():
    """No line per kernel tap: (x + R - 1) rows of (y + S - 1) lines per channel block."""
    workload = parse_workload(*CONVS["valid 3x3"])
    tiles = {"k": 4, "c": 6, "x": 2, "y": 4, "r": 3, "s": 3}
    tiling = build_tiling(workload, _direct(workload), tiles, GEMM_4x4)
    a = tiling.operand("A")
    assert a.lines == (2 + 2) * 2 * (4 + 2)  # 2 blocks of 4 channels
    assert [d.kind for d in a.dims] == ["axis", "group", "axis"]
    coef = a.coef
    assert coef["r"] == coef["x"] == 2 * (4 + 2) and coef["s"] == 1 and coef["y"] == 4


@pytest.mark.parametrize("name", sorted(CONVS))
def test_direct_programs_match_numpy(name):
    workload = parse_workload(*CONVS[name])
    rng = np.random.default_rng(sum(map(ord, name)))
    inputs = workload.random_inputs(rng)
    for mapping in _mappings(workload):
        program = generate(workload, mapping, GEMM_4x4)
        np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs),
                                      err_msg=f"{name}: {dict(mapping.tiles)}")


@pytest.mark.parametrize("name", sorted(CONVS))
def test_the_input_is_read_once_per_tile_with_its_halo(name):
    """The A bytes the LOADs read: each tile's window once (no copy per tap, no im2col)."""
    workload = parse_workload(*CONVS[name])
    for mapping in _mappings(workload):
        program = generate(workload, mapping, GEMM_4x4)
        layout = program.operands[0]
        read = sum(i.rows * i.row_len for i in _runs(program)
                   if isinstance(i, Load) and i.rows and layout.base <= i.dram_addr < layout.end)
        tiles, sizes = mapping.tile_sizes, workload.sizes
        assert layout.kind == "dense"
        expected = 0
        for x0 in range(0, sizes["x"], tiles["x"]):
            for y0 in range(0, sizes["y"], tiles["y"]):
                for c0 in range(0, sizes["c"], tiles["c"]):
                    x = min(tiles["x"], sizes["x"] - x0)
                    y = min(tiles["y"], sizes["y"] - y0)
                    c = min(tiles["c"], sizes["c"] - c0)
                    stride = 2 if name == "strided rows" else 1
                    rows = ((x - 1) * stride + sizes["r"]) if stride == 1 else x * sizes["r"]
                    expected += rows * (y + sizes["s"] - 1) * -(-c // 4) * 4
        # k loops outside c: a tile of A comes back per k tile where c has several
        reloads = -(-sizes["k"] // tiles["k"]) if tiles["c"] < sizes["c"] else 1
        assert read == expected * reloads, name


@pytest.mark.parametrize("name", sorted(CONVS))
def test_cost_model_counts_the_simulated_dram_bytes(name):
    """The batch model (with the code generator's transfer counts, as reported figures use)
    reads the bytes the program reads in the functional simulator, and its closed form
    (which ranks a search's mappings) counts the same MAC steps."""
    workload = parse_workload(*CONVS[name])
    rng = np.random.default_rng(3)
    for mapping in _mappings(workload):
        program = generate(workload, mapping, GEMM_4x4)
        stats = run_program(GEMM_4x4, list(program.instructions),
                            program.pack_inputs(workload.random_inputs(rng)))
        space = build_space(workload, mapping.choice, GEMM_4x4)
        arrays = mapping_arrays(space, mapping.tile_sizes, mapping.order)
        exact = evaluate(space, *arrays, exact=True)
        closed = evaluate(space, *arrays)
        assert exact.legal[0]
        assert exact.dram_read_bytes[0] == stats.dram_bytes_read
        assert exact.mac_steps[0] == closed.mac_steps[0] == stats.mac_steps


def test_default_mapper_keeps_a_convolutions_input_reuse():
    """ResNet-50's conv2_1b on an 8x8 GEMM array maps directly (no im2col, whole kernel taps)
    and reads under 4x its unique input and weight bytes from DRAM (its im2col program read
    33x, 8,297,808 B)."""
    from tensorforge.compiler.zoo import load_workload
    from tensorforge.sim.axi_traffic import bus_traffic

    workload = load_workload("resnet50:conv2_1b")
    config = AcceleratorConfig(array=ArrayConfig(rows=8, cols=8),
                               scratchpad=ScratchpadConfig(banks=8))
    mapping = default_mapping(workload, config)
    assert not mapping.groups
    assert mapping.tile_sizes["r"] == 3 and mapping.tile_sizes["s"] == 3
    program = generate(workload, mapping, config)
    traffic = bus_traffic(config, program.instructions, program.instruction_base)
    unique = sum(math.prod(workload.shapes[a.tensor]) for a in workload.inputs)
    assert unique == 252_160 and traffic.read < 4 * unique


def test_estimate_ranks_direct_tilings_as_the_timeline_does():
    """The mapper's estimate counts the in-order dispatch behind a C tile's STOREs
    (`Estimate._dispatch_stalls`): on conv2_1b it orders three direct tilings as the
    instruction-level timeline (checked against the RTL) does, and within 5% of it."""
    from tensorforge.compiler.mapping_estimate import Estimate, TileBursts
    from tensorforge.compiler.zoo import load_workload
    from tensorforge.dse.cost_model import rtl_parameters
    from tensorforge.dse.cost_space import step_plan
    from tensorforge.dse.cost_trace import trace_cycles
    from tensorforge.memory import DEFAULT_MEMORY

    workload = load_workload("resnet50:conv2_1b")
    config = AcceleratorConfig(array=ArrayConfig(rows=8, cols=8),
                               scratchpad=ScratchpadConfig(banks=8))
    choice = _direct(workload, config)
    bursts = TileBursts(workload, choice, config)
    estimates, traced = [], []
    for k, x, y, order in ((8, 32, 8, "xykcrs"), (64, 4, 8, "xykcrs"), (8, 4, 56, "xkycrs")):
        tiles = {**workload.sizes, "k": k, "x": x, "y": y}
        estimates.append(Estimate(workload, build_tiling(workload, choice, tiles, config),
                                  config, DEFAULT_MEMORY, bursts)(tuple(order)))
        program = generate(workload, Mapping(choice, tuple(tiles.items()), tuple(order)),
                           config)
        traced.append(trace_cycles(program.instructions, config, step_plan(config),
                                   rtl_parameters(DEFAULT_MEMORY, config)))
    assert np.argsort(estimates).tolist() == np.argsort(traced).tolist()
    np.testing.assert_allclose(estimates, traced, rtol=0.05)


@pytest.mark.rtl
def test_direct_convolutions_match_numpy_on_rtl(tmp_path):
    """On the regression suite's 4x4 GEMM build (shared): padded, odd and strided direct
    convolutions, partial tiles, bit-exact, with the AXI counters as the program predicts."""
    from tensorforge.sim.rtl_matrix import REGRESSION_CONFIGS
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    config = REGRESSION_CONFIGS["gemm4x4-systolic-ws"]
    cases = []
    for number, name in enumerate(("padded 3x3", "odd 2x5 kernel", "strided rows")):
        workload = parse_workload(*CONVS[name])
        choice = next(c for c in device_choices(workload, config) if DIRECT in c.describe())
        tiles = {**workload.sizes, "x": 2, "y": 4, "k": 4}
        build_tiling(workload, choice, tiles, config)  # fits the suite's buffers
        mapping = Mapping(choice, tuple(tiles.items()), ("x", "y", "k", "c", "r", "s"))
        cases.append(RtlCase(workload, mapping, seed=40 + number))
    results = run_programs_on_rtl(config, cases, RunOptions(test_dir=tmp_path, seed=40))
    for case, result in zip(cases, results, strict=True):
        assert result.match, f"{case.workload}: {result.mismatch_count} wrong"
        assert result.traffic_consistent, case.workload


# ---------------------------------------------------------------------- held weights


def _held(workload, tiles, config=GEMM_4x4, order=("x", "y", "k", "c", "r", "s")):
    """A direct mapping whose B tile (the weights) holds every output channel."""
    choice = _direct(workload, config)
    return Mapping(choice, tuple({**workload.sizes, **tiles}.items()), order, (),
                   (("B", ("k",)),))


def _load_bytes(program, layout):
    return sum(i.rows * i.row_len * layout.elem_bytes for i in _runs(program)
               if isinstance(i, Load) and i.rows and layout.base <= i.dram_addr < layout.end)


def _runs(program):
    """The program's LOADs and STOREs as the units run them (repeats expanded)."""
    precision = program.config.precision
    return expand(program.instructions, precision.in_bytes, precision.acc_bytes)


@pytest.mark.parametrize("name", sorted(CONVS))
def test_held_weights_are_read_once_and_programs_match_numpy(name):
    """With the weights held for every output channel (`build_tiling`'s holds), the loops
    walk k blocks inside each spatial tile: each input window is loaded once for all of
    them and the weights once for the whole layer, and the output still equals numpy's."""
    workload = parse_workload(*CONVS[name])
    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    inputs = workload.random_inputs(rng)
    sizes = workload.sizes
    for x, y in ((2, 4), (1, sizes["y"])):
        mapping = _held(workload, {"k": 4, "x": x, "y": y})
        program = generate(workload, mapping, GEMM_4x4)
        np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs),
                                      err_msg=f"{name}: {dict(mapping.tiles)}")
        weights = program.operands[1]
        # every byte of the weights' region once (k padded to whole 4-element lines)
        assert weights.end - weights.base == sizes["c"] * sizes["r"] * sizes["s"] * 4 * -(
            -sizes["k"] // 4)
        assert _load_bytes(program, weights) == weights.end - weights.base, name
        # each spatial tile's window once, for all k blocks (strided rows: no shared halo, a
        # row per x and r)
        rows = ((lambda w: w * sizes["r"]) if name == "strided rows"
                else (lambda w: w + sizes["r"] - 1))
        window = sum(rows(min(x, sizes["x"] - x0)) * (min(y, sizes["y"] - y0) + sizes["s"] - 1)
                     for x0 in range(0, sizes["x"], x) for y0 in range(0, sizes["y"], y))
        assert _load_bytes(program, program.operands[0]) == window * -(-sizes["c"] // 4) * 4


def test_holds_round_trip_and_are_checked():
    workload = parse_workload(*CONVS["valid 3x3"])
    mapping = _held(workload, {"k": 4, "x": 2, "y": 4})
    again = Mapping.from_json(mapping.to_json(), workload)
    assert again == mapping and again.holds == (("B", ("k",)),)
    plain = Mapping(mapping.choice, mapping.tiles, mapping.order)
    assert "holds" not in plain.to_dict()  # left out: existing mappings' hashes stay
    assert ("hold", "B", ["k"]) in mapping.primitives(workload)
    assert not any(p[0] == "hold" for p in plain.primitives(workload))
    tiling = build_tiling(workload, mapping.choice, mapping.tile_sizes, GEMM_4x4, mapping.holds)
    assert tiling.operand("B").lines == 2 * tiling.count("k") * plain_b_lines(workload, plain)
    assert dict(tiling.slots)["B"] == 1 and tiling.keys("B") == ("c", "r", "s")
    for holds, message in (((("C", ("k",)),), "input operands"),
                           ((("B", ("x",)),), "only indices it uses")):
        with pytest.raises(MappingError, match=message):
            build_tiling(workload, mapping.choice, mapping.tile_sizes, GEMM_4x4, holds)


def plain_b_lines(workload, mapping):
    return build_tiling(workload, mapping.choice, mapping.tile_sizes,
                        GEMM_4x4).operand("B").lines // 2


def test_conv2_1b_with_held_weights_loads_under_one_and_a_half_times_its_unique_bytes():
    """ResNet-50 conv2_1b on 8x8 with the weights held and 10x16 spatial tiles: the LOADs
    read the 36,864 weight bytes once and each input window (tile plus its 2-line halo in
    x and y, of the 58x58x64 pre-padded input) once: 36,864 + 68 x 64 rows x 64 channels
    = 315,392 B, 1.33x the layer's unique 237,568 (56x56x64 input + 3x3x64x64 weights).
    (The RTL's read counter adds the instruction fetch, 16 B per instruction.)"""
    from tensorforge.compiler.zoo import load_workload

    workload = load_workload("resnet50:conv2_1b")
    config = AcceleratorConfig(array=ArrayConfig(rows=8, cols=8),
                               scratchpad=ScratchpadConfig(banks=8))
    mapping = _held(workload, {"k": 8, "x": 10, "y": 16}, config)
    program = generate(workload, mapping, config)
    unique = 56 * 56 * 64 + 3 * 3 * 64 * 64
    assert unique == 237_568
    # x tiles 10,10,10,10,10,6 -> 12*5 + 8 = 68 input rows; y tiles 16,16,16,8 -> 18*3 + 10
    assert _load_bytes(program, program.operands[1]) == 36_864
    assert _load_bytes(program, program.operands[0]) == 68 * 64 * 64
    read = program.statistics()["dram_bytes_read"]
    assert read == 315_392 and read <= 1.5 * unique


def test_estimate_prices_held_weights_as_one_load():
    """The mapper's estimate reloads an operand only when a tile loop it is not held along
    advances: the held weights' beats count once, the input's once per spatial tile."""
    from tensorforge.compiler.mapping_estimate import Estimate

    workload = parse_workload(*CONVS["valid 3x3"])
    mapping = _held(workload, {"k": 4, "x": 2, "y": 4})
    tiling = build_tiling(workload, mapping.choice, mapping.tile_sizes, GEMM_4x4, mapping.holds)
    plain = build_tiling(workload, mapping.choice, mapping.tile_sizes, GEMM_4x4)
    held, free = Estimate(workload, tiling, GEMM_4x4), Estimate(workload, plain, GEMM_4x4)
    order = mapping.order
    assert held.steps == free.steps == 3 * 2 * 2
    spatial = 3 * 2
    assert held.steps // held._period(held.transfers["B"][0], order) == 1
    assert free.steps // free._period(free.transfers["B"][0], order) == free.steps
    assert held.steps // held._period(held.transfers["A"][0], order) == spatial


def test_default_mapper_holds_conv2_1b_weights():
    """On conv2_1b (8x8) the default mapper holds the weights: the program reads them once,
    and under 2x the layer's unique 237,568 B, fetch included (468,560 B when written; the
    mapping without held weights read 922,112, 3.66x)."""
    from tensorforge.compiler.zoo import load_workload
    from tensorforge.sim.axi_traffic import bus_traffic

    workload = load_workload("resnet50:conv2_1b")
    config = AcceleratorConfig(array=ArrayConfig(rows=8, cols=8),
                               scratchpad=ScratchpadConfig(banks=8))
    mapping = default_mapping(workload, config)
    assert mapping.holds == (("B", ("k",)),)
    program = generate(workload, mapping, config)
    assert _load_bytes(program, program.operands[1]) == 36_864
    traffic = bus_traffic(config, program.instructions, program.instruction_base)
    assert traffic.read < 2 * 237_568


@pytest.mark.rtl
def test_held_weights_match_numpy_on_rtl(tmp_path):
    """On the regression suite's 4x4 GEMM build (shared): direct convolutions with the
    weights held for every output channel while the loops walk 2x4 spatial tiles (the
    conv2_1b mapping's structure), bit-exact, AXI counters as the program predicts."""
    from tensorforge.sim.rtl_matrix import REGRESSION_CONFIGS
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    config = REGRESSION_CONFIGS["gemm4x4-systolic-ws"]
    cases = []
    for number, name in enumerate(("valid 3x3", "padded 3x3")):
        workload = parse_workload(*CONVS[name])
        mapping = _held(workload, {"k": 4, "x": 2, "y": 4}, config)
        check_mapping(workload, mapping, config)  # fits the suite's buffers
        cases.append(RtlCase(workload, mapping, seed=60 + number))
    results = run_programs_on_rtl(config, cases, RunOptions(test_dir=tmp_path, seed=60))
    for case, result in zip(cases, results, strict=True):
        assert result.match, f"{case.workload}: {result.mismatch_count} wrong"
        assert result.traffic_consistent, case.workload
