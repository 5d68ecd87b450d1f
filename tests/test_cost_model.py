"""The analytical cost model against the compiled program and by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mapping import Mapping, check_mapping, output_first_order
from tensorforge.compiler.matching import tensorize_choices
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_mapping import mapping_arrays
from tensorforge.dse.cost_model import CostParameters, evaluate
from tensorforge.dse.cost_parameters import fetch_cycles
from tensorforge.dse.cost_space import build_space
from tensorforge.errors import MappingError
from tensorforge.hw.compute_unit import step_latency
from tensorforge.hw.pe_array import array_latency
from tensorforge.isa import Compute, ComputeMode
from tensorforge.sim.functional import run_program

CONV = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"


def small(intrinsic="gemm", **array) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "intrinsic": intrinsic,
        "array": {"rows": 4, "cols": 4, **array},
        "scratchpad": {"capacity": 8192, "banks": 2, "accumulator": 4096},
    })


CASES = [
    ("C[i,j] += A[i,k] * B[k,j]", "i=8,j=12,k=10", small(),
     [dict(i=4, j=4, k=4), dict(i=8, j=8, k=8), dict(i=4, j=12, k=4), {}]),
    (CONV, "k=8,c=4,x=5,y=6,r=3,s=3", small(),
     [dict(k=4, x=4, y=4, c=4), dict(k=8, x=2, y=4), dict(x=1, y=4, r=1, s=1, k=4)]),
    ("C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]", "k=4,c=4,x=3,y=4,r=3,s=3", small(),
     [dict(k=4, x=2, y=4, c=4), dict(x=1, y=1, r=1)]),
    (CONV, "k=8,c=4,x=5,y=6,r=3,s=3", small("conv2d", local_bytes=16),
     [dict(k=4, x=4, y=4, c=4), dict(k=8, x=2, y=4)]),
    ("C[i,j] += A[i,k] * B[k,j]", "i=8,j=6,k=10", small("gemv", dataflow="os"),
     [dict(i=4, j=4, k=4), dict(i=8, j=2, k=8)]),
]


@pytest.mark.parametrize("text,sizes,config,tilings", CASES)
def test_counts_equal_the_functional_simulator(text, sizes, config, tilings):
    """MAC/ZERO steps and DRAM bytes of the model equal the simulated program's, for every
    tensorize choice and several tilings (partial tiles, halos, strides included)."""
    workload = parse_workload(text, sizes)
    rng = np.random.default_rng(7)
    checked = 0
    for choice in tensorize_choices(workload, config.intrinsic.value):
        if choice.stage:
            continue
        space = build_space(workload, choice, config)
        for tiles in tilings:
            tiles = {n: tiles.get(n, workload.sizes[n]) for n in workload.indices}
            order = output_first_order(workload, list(rng.permutation(workload.indices)))
            mapping = Mapping(choice, tuple(tiles.items()), order)
            try:
                check_mapping(workload, mapping, config)
                program = generate(workload, mapping, config)
            except MappingError:
                continue
            image = program.pack_inputs(workload.random_inputs(rng))
            stats = run_program(config, list(program.instructions), image)
            model = evaluate(space, *mapping_arrays(space, tiles, order), exact=True)
            assert model.legal[0]
            assert model.mac_steps[0] == stats.mac_steps
            assert model.zero_steps[0] == stats.zero_steps
            assert model.dram_read_bytes[0] == stats.dram_bytes_read
            assert model.dram_write_bytes[0] == stats.dram_bytes_written
            checked += 1
    assert checked >= 2


def one_tile_gemm(m: int, n: int, k: int):
    config = small()
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", f"i={m},j={n},k={k}")
    choice = next(c for c in tensorize_choices(workload, "gemm")
                  if dict(c.indices) == {"i": "i", "k": "k", "j": "j"})
    space = build_space(workload, choice, config)
    return config, space, evaluate(space, *mapping_arrays(space, workload.sizes, ("i", "j", "k")),
                                   exact=True)


def test_one_tile_by_hand():
    """4x4x4 GEMM on a 4x4 array, one tile, 64-bit bus, 2 banks, everything serial."""
    config, space, result = one_tile_gemm(4, 4, 4)
    p = CostParameters()
    # LOAD A (and B): 4 rows of 4 int8, back to back in the tile-major layout, so one run of
    # 16 bytes = two beats of one burst, written as 4 lines at a line a cycle
    # (hw/load_unit.py); one instruction: its issue and fixed cost. The DRAM latency is a
    # delay, not the unit's work: the data of the last LOAD arrives that much later
    load = max(2, 4) + p.issue_cycles + p.load_fixed_cycles
    # STORE C: 4 rows of 4 int32 = 64 bytes = 8 beats, read as 4 lines; one instruction; its
    # response comes a DRAM latency after its data
    store = max(8, 4) + p.issue_cycles + p.store_fixed_cycles
    # one MAC step: 4 beats while the 4 stationary lines load; A at line 0, B at line 4: the
    # same bank every cycle (2 banks) -> 4 conflict cycles, of which the RTL pays a share;
    # the instruction's fill and issue; no ZERO (the MAC's overwrite bit clears C), but the C
    # tile's first MAC waits for a drained array: one isolated step and its issue
    latency = array_latency(config)
    compute = ((4 + 4 * p.reload_conflict_share)
               + (p.instruction_fill_cycles + p.issue_cycles)
               + step_latency(config) + p.issue_cycles)
    assert result.mac_steps[0] == 1 and result.zero_steps[0] == 0
    assert result.compute_cycles[0] == compute
    assert result.dram_read_bytes[0] == 32 and result.dram_write_bytes[0] == 64
    # the load and store units' gates hand each command over a gate latency after the unit
    # goes idle (hw/controller.py), not counted in their busy cycles; nothing starts before
    # the controller has fetched the first instruction (the others are fetched meanwhile);
    # the compute waits a DRAM latency for B's data, the end a DRAM latency for C's response
    dram = p.dram_latency_cycles
    assert result.cycles[0] == np.ceil(fetch_cycles(config, p) + 2 * (load + p.gate_cycles)
                                       + dram + compute + store + p.gate_cycles + dram
                                       + latency)


def dot_one_tile(interconnect: str):
    """gemv i=2, k=16 on an output-stationary DOT 8, one tile: one MAC COMPUTE, outer 2 over
    k (C stays), inner 2 over i (C moves), A (stationary) changing every step."""
    config = AcceleratorConfig.from_dict({
        "intrinsic": "dot",
        "array": {"rows": 8, "cols": 1, "interconnect": interconnect, "dataflow": "os"},
        "scratchpad": {"capacity": 8192, "banks": 2, "accumulator": 4096}})
    workload = parse_workload("C[i] += A[i,k] * B[k]", "i=2,k=16")
    choice = tensorize_choices(workload, "dot")[0]
    mapping = Mapping(choice, (("i", 2), ("k", 16)), ("i", "k"))
    (mac,) = [i for i in generate(workload, mapping, config).instructions
              if isinstance(i, Compute) and i.mode is ComputeMode.MAC]
    assert (mac.outer, mac.inner, mac.acc_outer, mac.acc_inner, mac.a_inner) == (2, 2, 0, 1, 2)
    space = build_space(workload, choice, config)
    return config, evaluate(space, *mapping_arrays(space, dict(mapping.tile_sizes), ("i", "k")))


def test_revisited_c_line_waits_for_its_write_by_hand():
    """DOT 8 without interconnect (bank reuse gap 1): each C line is read-modify-written every
    2 steps, and a line's writes are at least read latency 1 + 2 = 3 cycles apart (pending
    entry clears, old line read, writer FIFO), so the 4 one-beat steps take 3/2 cycles each
    (Amaranth sim of the compute unit: 1.53 a step on a long such loop, 1.09 with C lines
    4 steps apart)."""
    config, result = dot_one_tile("none")
    p = CostParameters()
    compute = (4 * 3 / 2 + (p.instruction_fill_cycles + p.issue_cycles)
               + step_latency(config) + p.issue_cycles)
    assert result.mac_steps[0] == 4
    assert result.compute_cycles[0] == compute


def test_stationary_bank_reuse_gap_by_hand():
    """Systolic DOT 8: a PE store bank takes its next A line only 8 cycles (the bank reuse
    gap: the beat reaches the last PE 8 hops down) after its last beat, and A changes every
    step, so two banks serve a step each per 8 + 1 line + 1 beat - 1 = 9 cycles: 4.5 a step
    (Amaranth sim: 4.5 a step on a long such loop), above the accumulate round trip (1.5)."""
    config, result = dot_one_tile("systolic")
    p = CostParameters()
    compute = (4 * 9 / 2 + (p.instruction_fill_cycles + p.issue_cycles)
               + step_latency(config) + p.issue_cycles)
    assert result.compute_cycles[0] == compute


def test_memory_bound_and_compute_bound():
    """One resident 128x128x256 tile reuses every operand line 32 times: compute-bound. A
    skinny GEMM (k=8) with 4x4 tiles loads two tiles for every step and stores a C tile every
    other step: memory-bound (the DMA units' time, the gates' gap before each command
    included, exceeds the compute unit's)."""
    config = AcceleratorConfig.from_dict({
        "array": {"rows": 4, "cols": 4},
        "scratchpad": {"capacity": 64 * 1024, "banks": 2, "accumulator": 64 * 1024}})
    for sizes, tiles, compute_bound in (("i=128,j=128,k=256", {"i": 128, "j": 128, "k": 256},
                                         True),
                                        ("i=64,j=64,k=8", {"i": 4, "j": 4, "k": 4}, False)):
        workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", sizes)
        choice = next(c for c in tensorize_choices(workload, "gemm")
                      if dict(c.indices) == {"i": "i", "k": "k", "j": "j"})
        space = build_space(workload, choice, config)
        result = evaluate(space, *mapping_arrays(space, tiles, ("i", "j", "k")))
        memory = result.load_cycles[0] + result.store_cycles[0]
        gaps = CostParameters().gate_cycles * result.extra["transfer_instructions"][0]
        assert bool(result.compute_cycles[0] > memory + gaps) is compute_bound
        # the overlap never beats the slowest unit and never exceeds running them serially
        # (with the gate's gap before each LOAD and STORE)
        assert max(result.compute_cycles[0], result.load_cycles[0]) <= result.cycles[0]
        assert result.cycles[0] <= result.compute_cycles[0] + memory + gaps + 100


def random_batch(space, count: int, rng, multiple: int):
    tiles = np.stack([np.minimum(n, multiple * rng.integers(1, max(2, -(-n // multiple)) + 1,
                                                            size=count))
                      for n in space.sizes], axis=1)
    outs = np.flatnonzero(space.output_mask)
    reds = np.flatnonzero(~space.output_mask)
    order = np.array([np.concatenate([rng.permutation(outs), rng.permutation(reds)])
                      for _ in range(count)])
    return tiles, order


def test_more_bandwidth_never_slower():
    workload = parse_workload(CONV, "k=32,c=16,x=12,y=12,r=3,s=3")
    rng = np.random.default_rng(3)
    results = []
    for bits in (32, 64, 128, 256):
        config = AcceleratorConfig.from_dict({
            "array": {"rows": 8, "cols": 8},
            "scratchpad": {"capacity": 64 * 1024, "banks": 4, "accumulator": 16 * 1024},
            "dma": {"bus_bits": bits}})
        choice = tensorize_choices(workload, "gemm")[0]
        space = build_space(workload, choice, config)
        if not results:
            batch = random_batch(space, 500, rng, 8)
        results.append(evaluate(space, *batch))
    legal = results[0].legal
    assert legal.sum() > 50
    for slower, faster in zip(results, results[1:], strict=False):
        assert np.all(faster.cycles[legal] <= slower.cycles[legal])


def test_more_pes_never_slower_at_equal_mapping():
    """Tiles that are multiples of 16 are legal on 8x8 and 16x16 arrays alike."""
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=96,j=80,k=112")
    rng = np.random.default_rng(5)
    results = []
    for side in (8, 16):
        config = AcceleratorConfig.from_dict({
            "array": {"rows": side, "cols": side},
            "scratchpad": {"capacity": 128 * 1024, "banks": 4, "accumulator": 64 * 1024},
            "dma": {"bus_bits": 128}})
        choice = next(c for c in tensorize_choices(workload, "gemm")
                      if dict(c.indices) == {"i": "i", "k": "k", "j": "j"})
        space = build_space(workload, choice, config)
        if not results:
            batch = random_batch(space, 300, rng, 16)
        results.append(evaluate(space, *batch))
    legal = results[0].legal & results[1].legal
    assert legal.sum() > 30
    assert np.all(results[1].cycles[legal] <= results[0].cycles[legal])


def test_illegal_tiles_are_infinite():
    _, space, _ = one_tile_gemm(8, 8, 8)
    result = evaluate(space, np.array([[3, 8, 8], [8, 8, 8]]), np.array([[0, 1, 2]] * 2))
    assert list(result.legal) == [False, True]
    assert np.isinf(result.cycles[0]) and np.isfinite(result.cycles[1])


def os_config(intrinsic: str, pe: tuple[int, int], link: str) -> AcceleratorConfig:
    """Output-stationary configurations of the RTL regression suite (and of
    benchmarks/check_cost_model_rtl.py), so their Verilator models are shared."""
    return AcceleratorConfig.from_dict({
        "intrinsic": intrinsic,
        "array": {"rows": pe[0], "cols": pe[1], "interconnect": link, "dataflow": "os"},
        "scratchpad": {"capacity": 2048, "banks": 4, "accumulator": 1024},
        "dma": {"bus_bits": 64, "max_burst": 16},
    })


OS_GEMM = [os_config("gemv", (4, 6), "none"), os_config("dot", (8, 1), "systolic")]


@pytest.mark.parametrize("config", OS_GEMM, ids=["gemv-4x6", "dot-8"])
def test_split_steps_follow_the_program(config):
    """gemm 16x16x16 on output-stationary arrays: two or four tile steps, the first cut along
    k and the last along an output index into chunks with their own LOADs, micro-loops and
    STOREs. The model's MAC and LOAD/STORE instruction counts are the compiled program's
    (the old model priced both steps whole: 4 MAC and 40 LOAD/STORE instructions on DOT 8,
    against 10 and 104)."""
    from tensorforge.compiler.mappers import default_mapping
    from tensorforge.dse.cost_model import evaluate_mapping
    from tensorforge.isa import Load, Store

    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16")
    mapping = default_mapping(workload, config)
    space = build_space(workload, mapping.choice, config)
    model = evaluate(space, *mapping_arrays(space, mapping.tile_sizes, mapping.order),
                     exact=True)
    program = generate(workload, mapping, config).instructions
    macs = sum(isinstance(i, Compute) and i.mode is ComputeMode.MAC for i in program)
    transfers = sum(isinstance(i, Load | Store) for i in program)
    assert model.extra["tile_steps"][0] > 1
    assert model.extra["mac_instructions"][0] == macs
    assert model.extra["transfer_instructions"][0] == transfers
    assert evaluate_mapping(workload, mapping, config)["mac_steps"] == model.mac_steps[0]


def test_pricing_distinct_rows_once_changes_nothing():
    """Boundary-step chunks are priced once per distinct row: the same numbers as pricing
    every row (rows drawn with many repeats, as the chunks of a batch have)."""
    from tensorforge.dse import cost_tile_step

    workload = parse_workload(CONV, "k=16,c=8,x=10,y=12,r=3,s=3")
    layer = build_space(workload, tensorize_choices(workload, "gemm")[0], small())
    rng = np.random.default_rng(3)
    pool = rng.integers(1, layer.sizes + 1, size=(40, layer.dims))
    valid = pool[rng.integers(0, len(pool), 500)]
    tiles = np.minimum(layer.sizes, valid * rng.integers(1, 3, size=(500, 1)))
    reload_step = rng.choice([4.0, 6.5], size=500)
    which = np.zeros(500, dtype=np.int64)
    rows = layer.stack.rows(which)
    valid, _ = layer.stack.widen(which, valid, np.argsort(valid, axis=1))
    tiles, _ = layer.stack.widen(which, tiles, np.argsort(tiles, axis=1))
    once = cost_tile_step.distinct_tile_costs(rows, CostParameters(), valid, tiles, reload_step)
    every = cost_tile_step.tile_costs(rows, CostParameters(), valid, tiles, reload_step)
    assert once.keys() == every.keys()
    for role in every:
        for got, want in zip(once[role], every[role], strict=True):
            np.testing.assert_array_equal(got, want)


def test_large_batches_evaluate_in_slices_with_the_same_results(monkeypatch):
    """A batch above `SLICE_ROWS` is evaluated slice by slice and joined in order."""
    from tensorforge.dse import cost_model
    from tensorforge.dse.sw_space import SoftwareSpace

    space = SoftwareSpace.build(parse_workload(CONV, "k=16,c=8,x=10,y=12,r=3,s=3"), small())
    batch = space.random(300, np.random.default_rng(5))
    cycles, energy, extra = space.evaluate(batch)
    assert np.isfinite(cycles).sum() > 50  # enough legal mappings to compare
    monkeypatch.setattr(cost_model, "SLICE_ROWS", 7)
    sliced_cycles, sliced_energy, sliced_extra = space.evaluate(batch)
    np.testing.assert_array_equal(sliced_cycles, cycles)
    np.testing.assert_array_equal(sliced_energy, energy)
    for name, values in extra.items():
        np.testing.assert_array_equal(sliced_extra[name], values)


def test_cost_model_doc_quotes_the_current_model():
    """docs/cost_model.md's RTL table (``benchmarks/check_cost_model_rtl.py --write``) quotes
    the model as it is: each row's model cycles are what the model gives that calibration
    program now, so a model change without a regenerated table fails here (as docs/isa.md's
    test does for the ISA)."""
    import re
    from pathlib import Path

    from tensorforge.dse.fidelity import model_prediction
    from tensorforge.dse.fidelity_cases import CALIBRATION_CONFIGS, calibration_cases

    text = (Path(__file__).resolve().parent.parent / "docs" / "cost_model.md").read_text()
    section = text[text.index("<!-- rtl-check:begin -->"):text.index("<!-- rtl-check:end -->")]
    latency = int(re.search(r"simulated DRAM latency (\d+) cycles", section)[1])
    cases = {(c.config_name, f"{c.kind} {c.sizes}"): c for c in calibration_cases()
             if c.dram_latency == latency}
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in section.splitlines()
            if line.startswith("| ")]
    quoted = {(row[0], row[1]): float(row[3].replace(",", "")) for row in rows
              if len(row) == 10 and row[0] in CALIBRATION_CONFIGS}
    assert set(quoted) == set(cases), "the calibration programs changed: regenerate the table"
    for key, cycles in quoted.items():
        case = cases[key]
        now = model_prediction(case.workload(), case.resolve_mapping(), case.config,
                               case.memory())["accelerator_cycles"]
        assert round(now) == cycles, (
            f"{key}: the model now gives {now:.0f} cycles, docs/cost_model.md {cycles:.0f}: "
            "run `python benchmarks/check_cost_model_rtl.py --write`")
