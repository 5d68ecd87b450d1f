"""Code generation edge cases: every program must reproduce the workload's numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from random_programs import random_cases

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping, device_choices, library_mapping
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.isa import Compute, ComputeMode, Load, Store, decode_program
from tensorforge.sim.functional import FunctionalSimulator, run_program

GEMM_4x4 = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4))
GEMV_4x4 = AcceleratorConfig(intrinsic="gemv", array=ArrayConfig(rows=4, cols=4, dataflow="os"))
# intrinsic sizes k=3, c=2, x=1, y=2, r=1, s=3 (taps)
CONV_2x3 = AcceleratorConfig(intrinsic="conv2d", array=ArrayConfig(rows=2, cols=3, dataflow="os"),
                             scratchpad=ScratchpadConfig(capacity=4096, accumulator=4096))
CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"
CASES = {
    "prime gemm": ("C[i,j] += A[i,k] * B[k,j]", "i=7,j=11,k=13"),
    "smaller than the array": ("C[i,j] += A[i,k] * B[k,j]", "i=2,j=3,k=3"),
    "degenerate dims": ("C[i,j] += A[i,k] * B[k,j]", "i=1,j=1,k=1"),
    "gemv": ("C[i] += A[i,k] * B[k]", "i=5,k=9"),
    "stride 2 with padding": ("C[k,x,y] += A[c,2*x+r-1,2*y+s-1] * B[k,c,r,s]",
                              "k=6,c=3,x=3,y=4,r=3,s=3,A=3x6x8"),
    "stride 4": ("C[k,x,y] += A[c,4*x+r,4*y+s] * B[k,c,r,s]", "k=5,c=2,x=2,y=3,r=2,s=3"),
    "dilation": ("C[k,x,y] += A[c,x+2*r,y+2*s] * B[k,c,r,s]", "k=3,c=2,x=3,y=3,r=2,s=2"),
    "depthwise": ("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "c=5,x=4,y=3,r=3,s=3"),
    "batched matmul": ("C[b,i,j] += A[b,i,k] * B[b,k,j]", "b=3,i=5,j=6,k=7"),
    "ttm": ("C[i,j,k] += A[i,j,l] * B[l,k]", "i=3,j=4,k=5,l=6"),
    "mttkrp": ("D[i,j] += A[i,k,l] * B[l,j] * C[k,j]", "i=3,j=5,k=4,l=6"),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mapper", [default_mapping, library_mapping])
def test_mappers_compile_every_kind_exactly(name, mapper):
    text, sizes = CASES[name]
    workload = parse_workload(text, sizes)
    # the matching finds no GEMM choice for these (no index only the second input uses)
    config = GEMV_4x4 if name in ("depthwise", "gemv") else GEMM_4x4
    program = generate(workload, mapper(workload, config), config)
    inputs = workload.random_inputs(np.random.default_rng(7))
    np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))


def test_binary_round_trips_and_tokens_balance():
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=17,j=9,k=30")
    mapping = default_mapping(workload, GEMM_4x4)
    program = generate(workload, mapping, GEMM_4x4)
    assert decode_program(program.encode()) == list(program.instructions)
    pushes = sum(ins.push_next for ins in program.instructions if isinstance(ins, Load))
    pops = sum(ins.pop_prev for ins in program.instructions if isinstance(ins, Compute))
    assert pushes == pops
    pushes = sum(ins.push_next for ins in program.instructions if isinstance(ins, Compute))
    pops = sum(ins.pop_prev for ins in program.instructions if isinstance(ins, Store))
    assert pushes == pops
    assert "FINISH" in program.disassemble().splitlines()[-1]


def test_packed_image_holds_the_program_and_unpacks_the_output():
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=6,j=5,k=4")
    mapping = _identity_mapping(workload, GEMM_4x4, workload.sizes, "ijk")
    program = generate(workload, mapping, GEMM_4x4)
    inputs = workload.random_inputs(np.random.default_rng(3))
    image = program.pack_inputs(inputs)
    assert bytes(image[program.instruction_base :]) == program.encode()
    from tensorforge.sim.functional import run_program

    run_program(GEMM_4x4, bytes(image[program.instruction_base :]), image)
    np.testing.assert_array_equal(program.unpack_output(image), workload.reference(inputs))
    stats = program.statistics()
    # tile-major output: the partial column block (1 of 4) is stored whole, padding included
    assert program.output.line_block == 4
    assert stats["dram_bytes_written"] == 6 * 8 * 4
    row_major = generate(workload, mapping, GEMM_4x4, tile_major=False)
    assert row_major.statistics()["dram_bytes_written"] == 6 * 5 * 4
    assert stats["instructions"]["STORE"] == sum(isinstance(i, Store) for i in
                                                 program.instructions)


@pytest.mark.parametrize("intrinsic, dataflow", [("dot", "os"), ("gemv", "os"),
                                                 ("conv2d", "os")])
def test_other_intrinsics_run_a_convolution(intrinsic, dataflow):
    config = AcceleratorConfig(intrinsic=intrinsic,
                               array=ArrayConfig(rows=4, cols=4, dataflow=dataflow))
    workload = parse_workload("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=5,c=3,x=3,y=6,r=3,s=2")
    program = generate(workload, default_mapping(workload, config), config)
    inputs = workload.random_inputs(np.random.default_rng(11))
    np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))


# ---------------------------------------------------------------------- partial and multi-block
# tiles on the intrinsic's line axes: every block an intrinsic step reads must hold exactly the
# tile's data, zeros where the tile is partial, whatever the buffers held before.


def _identity_mapping(workload, config, tiles, order):
    """The tensorize choice mapping every intrinsic index to the same-named workload index."""
    choice = next(c for c in device_choices(workload, config)
                  if all(iota == n for iota, n in c.index_map.items()))
    return Mapping(choice, tuple(tiles.items()), tuple(order))


def _earlier_program(config, text):
    """A larger program of the same kind, on extreme inputs, to run first and leave its data."""
    workload = parse_workload(text, "i=24,j=16,k=24" if "j" in text else "i=24,k=24"
                              if "i" in text else "k=8,x=3,y=8,c=8,r=2,s=3")
    program = generate(workload, default_mapping(workload, config), config)
    inputs = {name: np.full(workload.shapes[name], (127, -128)[n % 2])
              for n, name in enumerate(workload.input_names)}
    return program, inputs


LINE_AXIS_CASES = {
    # the property-test find: B's line axes are (r, s, c); with two blocks of c in a tile, the
    # blocks of c were interleaved in one strip, so a block read the next block's lines
    "conv: two c blocks, 2 of 3 taps": (CONV_2x3, CONV, "k=1,x=1,y=1,c=3,r=1,s=2",
                                        {}, "ykxcsr"),
    "conv: two full c blocks": (CONV_2x3, CONV, "k=1,x=1,y=1,c=4,r=1,s=3", {}, "ykxcsr"),
    "conv: partial y, s and c blocks": (CONV_2x3, CONV, "k=2,x=2,y=3,c=3,r=2,s=4", {}, "kxycrs"),
    "conv: partial last tile of c and r": (CONV_2x3, CONV, "k=4,x=1,y=2,c=5,r=3,s=2",
                                           {"c": 4, "r": 2}, "kxycrs"),
    "conv: partial last tile of y and k": (CONV_2x3, CONV, "k=4,x=2,y=5,c=2,r=1,s=3",
                                           {"y": 4, "k": 3}, "ykxcrs"),
    "gemm: partial i and k blocks": (GEMM_4x4, "C[i,j] += A[i,k] * B[k,j]", "i=6,j=3,k=7",
                                     {}, "ijk"),
    "gemm: partial last tile of i and k": (GEMM_4x4, "C[i,j] += A[i,k] * B[k,j]",
                                           "i=10,j=5,k=9", {"i": 8, "k": 4}, "ijk"),
    "gemv: partial i and k blocks": (GEMV_4x4, "C[i] += A[i,k] * B[k]", "i=6,k=5", {}, "ik"),
    "gemv: partial last tile of i": (GEMV_4x4, "C[i] += A[i,k] * B[k]", "i=11,k=6", {"i": 8},
                                     "ik"),
}


@pytest.mark.parametrize("name", sorted(LINE_AXIS_CASES))
def test_partial_line_axis_tiles_ignore_stale_buffers(name):
    config, text, sizes, tiles, order = LINE_AXIS_CASES[name]
    workload = parse_workload(text, sizes)
    tiles = {n: tiles.get(n, size) for n, size in workload.sizes.items()}
    program = generate(workload, _identity_mapping(workload, config, tiles, order), config)
    inputs = workload.random_inputs(np.random.default_rng(5))
    expected = workload.reference(inputs)
    # real SRAM keeps what earlier programs left: run after a program that filled the
    # scratchpad and accumulator with large values, and from random garbage
    simulator = FunctionalSimulator(config)
    earlier, earlier_inputs = _earlier_program(config, text)
    simulator.run(list(earlier.instructions), earlier.pack_inputs(earlier_inputs))
    used = max(i.line + i.rows + i.pad_after for i in program.instructions
               if isinstance(i, Load))
    assert np.count_nonzero(simulator.spad[:used]) > used  # it left data where we load
    image = program.pack_inputs(inputs)
    simulator.run(list(program.instructions), image)
    np.testing.assert_array_equal(program.unpack_output(image), expected)
    for seed in range(2):
        result = program.run_functional(inputs, garbage=np.random.default_rng(seed))
        np.testing.assert_array_equal(result, expected)


def test_multi_block_inner_line_axis_keeps_each_block_contiguous():
    # CONV2D's B block is (r, s, c) lines: the s-major strip of a c tile spanning two blocks
    # cannot hold both; each c block sits apart, whole, and its coefficient steps over it
    from tensorforge.compiler.tiling import build_tiling

    workload = parse_workload(CONV, "k=1,x=1,y=1,c=4,r=1,s=3")
    mapping = _identity_mapping(workload, CONV_2x3, workload.sizes, "ykxcsr")
    tile = build_tiling(workload, mapping.choice, mapping.tile_sizes, CONV_2x3).operand("B")
    block_lines = CONV_2x3.blocks["B"].lines
    assert block_lines == 1 * 3 * 2
    assert tile.lines == 2 * block_lines
    assert tile.coef["c"] == block_lines


# ---------------------------------------------------------------------- overlap


GEMM_8x8_WS = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": "32KiB", "banks": 8, "accumulator": "16KiB"},
    "dma": {"bus_bits": 128, "max_burst": 16}})


def _gemm_program(tiles: dict[str, int], sizes: str = "i=64,j=64,k=64"):
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", sizes)
    choice = next(c for c in device_choices(workload, GEMM_8x8_WS) if c.index_map["i"] == "i")
    mapping = Mapping(choice, tuple(tiles.items()), ("i", "j", "k"))
    return workload, generate(workload, mapping, GEMM_8x8_WS)


def test_micro_loop_keeps_the_stationary_block_for_the_inner_run():
    """Weight-stationary GEMM holds B: the inner loop walks A's rows (i) with B fixed, so each
    instruction changes the stationary block only ``outer`` times. Only the program's last
    two chunks, one block of i each (the last chunk of j cut again along i), have no rows to
    walk."""
    _, program = _gemm_program({"i": 16, "j": 64, "k": 64})
    macs = [ins for ins in program.instructions
            if isinstance(ins, Compute) and ins.mode.name == "MAC"]
    keeping = [ins for ins in macs if ins.b_inner == 0 and ins.a_inner != 0]
    assert macs and keeping == macs[:-2]


def test_first_and_last_steps_are_cut_into_chunks_with_their_own_tokens():
    """The first COMPUTE waits for a LOAD of one reduction block of one row block, not the
    whole first tile; the last STORE holds only one block of the last C tile; the program
    stays exact and hazard-free (the functional simulator checks every conflicting pair is
    ordered)."""
    workload, program = _gemm_program({"i": 64, "j": 16, "k": 64})
    instructions = program.instructions
    first_compute = next(p for p, ins in enumerate(instructions) if isinstance(ins, Compute))
    loaded = sum(ins.rows for ins in instructions[:first_compute] if isinstance(ins, Load))
    # one k block of B (both j blocks), one (i, k) block of A: 1/40 of the first tile's lines
    assert loaded == 2 * 8 + 8
    last_store = [ins for ins in instructions if isinstance(ins, Store)][-1]
    assert last_store.rows == 8  # one (i, j) block, of the 64 x 2 of the last C tile
    stores = [ins for ins in instructions if isinstance(ins, Store)]
    assert stores[-2].rows == 8 and stores[-2].dram_addr != last_store.dram_addr
    inputs = workload.random_inputs(np.random.default_rng(3))
    np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))


@pytest.mark.parametrize("tiles", [{"i": 64, "j": 64, "k": 64}, {"i": 24, "j": 40, "k": 24},
                                   {"i": 64, "j": 32, "k": 8}])
def test_chunked_programs_are_exact_from_garbage_buffers(tiles):
    workload, program = _gemm_program(tiles, "i=64,j=56,k=72")
    inputs = workload.random_inputs(np.random.default_rng(5))
    result = program.run_functional(inputs, garbage=np.random.default_rng(6))
    np.testing.assert_array_equal(result, workload.reference(inputs))


def _task_recorder():
    """An `Emitter` and a function that adds a one-instruction task to it (its number)."""
    from tensorforge.compiler.tokens import LOAD, Emitter
    from tensorforge.isa import Compute as ComputeInsn
    from tensorforge.isa import Load as LoadInsn

    emit = Emitter()

    def task(unit, reads=(), writes=()):
        emit.begin(unit)
        emit.add(unit, LoadInsn if unit == LOAD else ComputeInsn)
        emit.end(reads=list(reads), writes=list(writes))
        return len(emit.groups) - 1

    return emit, task


def test_emitter_orders_chunks_against_halves_and_other_cuts():
    """A chunk task waits for the whole half's last user and for chunks of another cut, but
    not for a disjoint chunk of the same cut; a whole-half task waits for every chunk."""
    from tensorforge.compiler.tokens import COMPUTE, LOAD

    emit, task = _task_recorder()
    first, second = ("A", 0, (("k", 0, 1),)), ("A", 0, (("k", 1, 1),))
    task(LOAD, writes=[first])
    task(LOAD, writes=[second])
    reader = task(COMPUTE, reads=[first])  # waits for the first chunk's LOAD only
    assert emit.waited[(COMPUTE, LOAD)] == 0
    task(COMPUTE, reads=[second])
    assert emit.waited[(COMPUTE, LOAD)] == 1
    task(LOAD, writes=[("A", 0, (("i", 0, 4),))])  # another cut overlaps both chunks
    assert emit.waited[(LOAD, COMPUTE)] == reader + 1


def test_emitter_orders_chunks_cut_twice():
    """A chunk cut along two indices overlaps another only where both cuts overlap: a
    sub-chunk of the first k block waits for no LOAD of another k block or another i block,
    and a task on the whole k block waits for each of its sub-chunks."""
    from tensorforge.compiler.tokens import COMPUTE, LOAD

    emit, task = _task_recorder()
    corner = ("A", 0, (("k", 0, 1), ("i", 0, 1)))
    task(LOAD, writes=[corner])
    task(LOAD, writes=[("A", 0, (("k", 0, 1), ("i", 1, 1)))])
    task(LOAD, writes=[("A", 0, (("k", 1, 1),))])
    reader = task(COMPUTE, reads=[corner])
    assert emit.waited[(COMPUTE, LOAD)] == 0  # neither the other i block nor the k block
    task(COMPUTE, reads=[("A", 0, (("k", 0, 1),))])
    assert emit.waited[(COMPUTE, LOAD)] == 1  # both sub-chunks of the k block
    task(LOAD, writes=[("A", 0, (("i", 0, 1),))])  # the corner and so the whole k block
    assert emit.waited[(LOAD, COMPUTE)] == reader + 1


# ---------------------------------------------------------------------- overwrite instead of ZERO


DOT_2x2 = AcceleratorConfig(intrinsic="dot", array=ArrayConfig(rows=2, cols=2, dataflow="os"))
OVERWRITE_KINDS = {  # workload, its indices, the accelerator
    "gemm": ("C[i,j] += A[i,k] * B[k,j]", "ijk", GEMM_4x4),
    "gemm 8x8 ws": ("C[i,j] += A[i,k] * B[k,j]", "ijk", GEMM_8x8_WS),
    "conv": (CONV, "kcxyrs", CONV_2x3),
    "conv as gemm": (CONV, "kcxyrs", GEMM_4x4),
    "gemv": ("C[i] += A[i,k] * B[k]", "ik", GEMV_4x4),
    "dot": ("C[] += A[k] * B[k]", "k", DOT_2x2),
}


def _zeros(program) -> int:
    return sum(isinstance(i, Compute) and i.mode is ComputeMode.ZERO
               for i in program.instructions)


@pytest.mark.parametrize("kind", sorted(OVERWRITE_KINDS))
def test_overwrite_replaces_zero_exactly_for_random_mappings(kind):
    """With ``overwrite``, random mappings of every tensorize choice emit no ZERO and stay
    exact from garbage accumulators: each C block's first MAC step writes it."""
    text, indices, config = OVERWRITE_KINDS[kind]
    for case in random_cases(text, indices, config, seeds=range(10), largest=12):
        program = generate(case.workload, case.mapping, config, overwrite=True)
        assert _zeros(program) == 0
        result = program.run_functional(case.inputs, garbage=np.random.default_rng(case.seed))
        assert np.array_equal(result, case.workload.reference(case.inputs)), (
            case.seed, case.sizes, case.choice.describe(), case.mapping.to_json())


def test_overwrite_writes_each_c_block_once_instead_of_zeroing_it():
    """GEMM 64^3 on 8x8 in 64x16x64 tiles (first and last steps chunked): ZERO cleared the
    4 C tiles' 512 lines; ``overwrite`` writes each of the 8 x 8 C blocks at its first of 8
    reduction steps instead, and the other 448 MAC steps accumulate."""
    workload, program = _gemm_program({"i": 64, "j": 16, "k": 64})
    mapping = program.mapping
    assert _zeros(generate(workload, mapping, GEMM_8x8_WS, overwrite=False)) == 4
    program = generate(workload, mapping, GEMM_8x8_WS, overwrite=True)
    assert _zeros(program) == 0
    inputs = workload.random_inputs(np.random.default_rng(4))
    image = program.pack_inputs(inputs)
    stats = run_program(GEMM_8x8_WS, list(program.instructions), image,
                        garbage=np.random.default_rng(5))
    np.testing.assert_array_equal(program.unpack_output(image), workload.reference(inputs))
    assert (stats.mac_steps, stats.overwrite_steps, stats.zero_steps) == (512, 64, 0)


def test_plans_the_overwrite_rule_cannot_express_fall_back_to_zero(monkeypatch):
    from tensorforge.compiler import mac_plan, tile_walk

    # an instruction revisiting block 0 (a later reduction step) while first visiting block 4
    loop = dict(outer=1, inner=2, acc_outer=0, acc_inner=4, a_outer=0, a_inner=4, b_outer=0,
                b_inner=0)
    assert mac_plan.overwrite_plan([(0, 0, 0, {**loop, "inner": 1})], 4) == [True]
    assert mac_plan.overwrite_plan([(0, 0, 0, {**loop, "inner": 1}), (0, 0, 0, loop)], 4) is None
    # forced everywhere, the fallback ZEROs the blocks each step visits first: still exact
    monkeypatch.setattr(tile_walk, "overwrite_plan", lambda plan, lines: None)
    workload, program = _gemm_program({"i": 24, "j": 40, "k": 24}, "i=64,j=56,k=72")
    program = generate(workload, program.mapping, GEMM_8x8_WS, overwrite=True)
    assert _zeros(program) > 0
    assert not any(i.overwrite for i in program.instructions if isinstance(i, Compute))
    inputs = workload.random_inputs(np.random.default_rng(5))
    result = program.run_functional(inputs, garbage=np.random.default_rng(6))
    np.testing.assert_array_equal(result, workload.reference(inputs))
