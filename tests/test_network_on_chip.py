"""The on-chip activation memory (issue 18 item 4) in the software: DMA addresses in the
configuration's activation window never reach DRAM. The functional simulator serves them from
its own bytes; whole-network programs keep the activations passed between layers there
(`compiler.activation_memory`), with outputs bit-identical to the same network through DRAM
and DRAM traffic smaller by exactly the bytes those layers store."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from network_configs import CONV2D_2x3, PIPELINE_4x4
from test_network import small_cnn
from test_residual import Projection, TwoBlocks, block

from tensorforge.compiler.activation_memory import first_fit
from tensorforge.compiler.network import compile_network
from tensorforge.compiler.quantize import quantize_model
from tensorforge.config import ACTIVATION_BASE, AcceleratorConfig, ScratchpadConfig
from tensorforge.errors import MappingError, SimulationError
from tensorforge.isa import Buffer, Compute, ComputeMode, Finish, Load, Store
from tensorforge.network_reference import reference_output
from tensorforge.sim.functional import run_program


def windowed(config: AcceleratorConfig, nbytes: int) -> AcceleratorConfig:
    return replace(config, scratchpad=replace(config.scratchpad, activations=nbytes))


WINDOW = windowed(PIPELINE_4x4, 1024)


# ----------------------------------------------------------------- the functional simulator

def _round_trip(window_addr: int) -> list:
    """4 int32 lines DRAM -> accumulator -> window -> other lines -> DRAM, token-ordered."""
    return [
        Load(buffer=Buffer.ACC, line=0, dram_addr=0, rows=4, row_len=4, stride=4,
             push_next=True),
        Compute(mode=ComputeMode.ZERO, acc_base=8, pop_prev=True, push_next=True),
        Store(line=0, dram_addr=window_addr, rows=4, row_len=4, stride=4, pop_prev=True,
              push_prev=True),
        Compute(mode=ComputeMode.ZERO, acc_base=8, pop_next=True, push_prev=True),
        Load(buffer=Buffer.ACC, line=4, dram_addr=window_addr, rows=4, row_len=4, stride=4,
             pop_next=True, push_next=True),
        Compute(mode=ComputeMode.ZERO, acc_base=8, pop_prev=True, push_next=True),
        Store(line=4, dram_addr=64, rows=4, row_len=4, stride=4, pop_prev=True),
        Finish(),
    ]


def test_window_addresses_are_on_chip_memory_not_dram():
    values = np.arange(-8, 8, dtype="<i4")
    dram = bytearray(128)
    dram[:64] = values.tobytes()
    stats = run_program(WINDOW, _round_trip(ACTIVATION_BASE + 960), dram)
    np.testing.assert_array_equal(np.frombuffer(bytes(dram[64:]), "<i4"), values)
    assert (stats.dram_bytes_read, stats.dram_bytes_written) == (64, 64)
    assert (stats.window_bytes_read, stats.window_bytes_written) == (64, 64)
    assert stats.as_dict()["window_bytes_read"] == 64
    # the same program through DRAM: the window counts are absent, as before the window
    dram = bytearray(256)
    dram[:64] = values.tobytes()
    stats = run_program(WINDOW, _round_trip(128), dram)
    assert dram[128:192] == values.tobytes() and stats.dram_bytes_read == 128
    assert "window_bytes_read" not in stats.as_dict()


@pytest.mark.parametrize(("config", "address", "message"), [
    (WINDOW, ACTIVATION_BASE + 1000, "straddle the end of the 1024-byte activation window"),
    (PIPELINE_4x4, ACTIVATION_BASE, "no activation memory"),
])
def test_window_misuse_is_named(config, address, message):
    dram = bytearray(128)
    with pytest.raises(SimulationError, match=message):
        run_program(config, _round_trip(address), dram)


def test_reading_window_bytes_nobody_wrote_is_an_error():
    program = [Load(line=0, dram_addr=ACTIVATION_BASE, rows=1, row_len=4), Finish()]
    with pytest.raises(SimulationError, match="no STORE wrote.*undefined"):
        run_program(WINDOW, program, bytearray(0))


def test_the_hardware_tests_program_runs_alike_on_the_functional_simulator():
    """tests/test_activation_memory.py's two-layer program (its middle unaligned in the
    window), which the RTL runs: numpy's result, 16 B each way on chip, none in DRAM."""
    from test_activation_memory import CONFIG, OUT_AT, _operands, two_layers

    image, _, expected = _operands(5)
    stats = run_program(CONFIG, two_layers(), image, garbage=np.random.default_rng(1))
    np.testing.assert_array_equal(
        np.frombuffer(bytes(image[OUT_AT:OUT_AT + 64]), "<i4").reshape(4, 4), expected)
    assert (stats.window_bytes_read, stats.window_bytes_written) == (16, 16)
    assert (stats.dram_bytes_read, stats.dram_bytes_written) == (3 * 16 + 48, 64)


# ----------------------------------------------------------------- the allocator

def test_first_fit_never_overlaps_live_regions():
    rng = np.random.default_rng(18)
    for _ in range(200):
        lifetimes = []
        for _ in range(rng.integers(1, 12)):
            first = int(rng.integers(0, 10))
            lifetimes.append((first, first + int(rng.integers(0, 4)),
                              64 * int(rng.integers(1, 6))))
        lifetimes.sort()
        capacity = 64 * int(rng.integers(1, 12))
        offsets = first_fit(lifetimes, capacity)
        placed = [(f, la, o, n) for (f, la, n), o in zip(lifetimes, offsets, strict=True)
                  if o is not None]
        for f, la, o, n in placed:
            assert 0 <= o and o + n <= capacity and o % 64 == 0
            for g, lb, p, m in placed:
                if (f, la, o, n) != (g, lb, p, m) and f <= lb and g <= la:
                    assert o + n <= p or p + m <= o, (lifetimes, offsets)
        # a region left out did not fit beside those live with it
        for (f, la, n), o in zip(lifetimes, offsets, strict=True):
            if o is None:
                assert n > capacity or any(g <= la and f <= lb for g, lb, _, _ in placed)


def _graph_lifetimes(segment) -> list[tuple[int, int, int, int]]:
    """Per on-chip region: (first writer, last reader, window address, bytes), the readers
    found from the layer graph (a layer reads its predecessor's output, or its ``inputs``'
    unless it is an add, whose predecessor writes into the skip's region)."""
    names = [layer.name for layer in segment.layers]
    source = [names.index(layer.inputs[0]) if layer.inputs and layer.kind != "add" and p
              else p - 1 for p, layer in enumerate(segment.layers)]
    found = []
    for region in segment.on_chip:
        writers = [names.index(name) for name in region.layers]
        readers = [p for p in range(1, len(names)) if source[p] in writers]
        found.append((min(writers), max(readers), region.base, region.nbytes))
    return found


@pytest.mark.parametrize("net", ["block", "two_blocks", "projection"])
def test_live_regions_never_share_window_bytes(net):
    torch.manual_seed(1)
    module, inputs = {"block": lambda: block(3),
                      "two_blocks": lambda: (TwoBlocks().eval(), (torch.randn(1, 3, 6, 6),)),
                      "projection": lambda: (Projection().eval(),
                                             (torch.randn(1, 3, 8, 8),))}[net]()
    program = compile_network(quantize_model(module, inputs), windowed(PIPELINE_4x4, 4096))
    (segment,) = program.segments
    lives = _graph_lifetimes(segment)
    assert len(lives) >= 3
    for f, la, o, n in lives:
        assert ACTIVATION_BASE <= o and o + n <= ACTIVATION_BASE + 4096
        for g, lb, p, m in lives:
            if (f, o) != (g, p) and f <= lb and g <= la:
                assert o + n <= p or p + m <= o, lives
    if net != "projection":  # there the stem's output lives until the shortcut, the end
        assert len({o for _, _, o, _ in lives}) < len(lives)  # dead regions' bytes reused


# ----------------------------------------------------------------- whole networks

def _run(module, inputs, config):
    """The program's output, its integer reference and each segment's `Statistics`."""
    network = quantize_model(module, inputs)
    program = compile_network(network, config)
    q = network.quantize_input(inputs[0])
    stats = []

    def device(segment, image):
        stats.append(run_program(config, list(segment.instructions), image,
                                 garbage=np.random.default_rng(5)))
        return image, None

    output, _ = program.run(q, device)
    return program, np.asarray(output), reference_output(network, q), stats


def _traffic(stats) -> tuple[int, int, int, int]:
    return tuple(sum(getattr(s, f"{memory}_bytes_{way}") for s in stats)
                 for memory in ("dram", "window") for way in ("read", "written"))


# the int8 outputs the on-chip layers STORE, by hand: small_cnn on 3x8x8 is conv 8x8x8,
# depthwise/s2 8x4x4, pointwise 16x4x4, pool 16 (the linear's 10, the output, stays in DRAM);
# the block's stem, conv1, conv2 and add 8x8x8 each and its pool 8
@pytest.mark.parametrize(("net", "window", "on_chip", "stored"), [
    ("cnn", 64 * 1024, ("_0", "_2", "_4", "_6"), 512 + 128 + 256 + 16),
    ("cnn", 512, ("_2", "_4", "_6"), 128 + 256 + 16),  # conv's padded 648 B do not fit
    ("block", 64 * 1024, ("stem", "conv1", "add", "pool"), 4 * 512 + 8),
    ("block", 1024, ("conv1", "add", "pool"), 2 * 512 + 8),  # the 1600 B skip+residual
])
def test_activations_on_chip_are_exact_and_leave_dram(net, window, on_chip, stored):
    module, inputs = small_cnn(7) if net == "cnn" else block(3)
    _, before, expected, plain = _run(module, inputs, PIPELINE_4x4)
    program, after, _, kept = _run(module, inputs, windowed(PIPELINE_4x4, window))
    np.testing.assert_array_equal(before, expected)
    np.testing.assert_array_equal(after, before)
    (segment,) = program.segments
    assert tuple(region.layers[0] for region in segment.on_chip) == on_chip
    read, written, _, _ = _traffic(plain)
    dram_read, dram_written, window_read, window_written = _traffic(kept)
    assert dram_written == written - stored
    assert dram_read + window_read == read and window_read >= stored
    # the cleared padded regions are written once more, on chip
    assert window_written == stored + sum(-(-r.nbytes // 64) * 64 for r in segment.on_chip
                                          if r.cleared)
    assert segment.activation_bytes[0] == sum(r.nbytes for r in segment.on_chip)


def test_outputs_the_host_reads_stay_in_dram():
    """On the conv2d array the add's input is stacked by the host from the skip (the stem's
    output) and the residual: both stay in DRAM, the rest moves; still exact."""
    module, inputs = block(7)
    program, output, expected, _ = _run(module, inputs, windowed(CONV2D_2x3, 64 * 1024))
    np.testing.assert_array_equal(output, expected)
    assert "stack (add)" in [str(op) for op in program.host_ops]
    first = program.segments[0]
    stem = [layer.name for layer in first.layers].index("stem")
    assert not first.holds_on_chip(stem) and first.on_chip
    moved = [layer.name for layer in first.layers].index(first.on_chip[0].layers[0])
    with pytest.raises(MappingError, match="activation window"):
        first.unpack(bytearray(first.data_bytes), moved)


def test_without_a_window_nothing_moves():
    module, inputs = block(3)
    program = compile_network(quantize_model(module, inputs), PIPELINE_4x4)
    (segment,) = program.segments
    assert segment.on_chip == () and all(
        address < ACTIVATION_BASE for region in segment.regions for address in region.values())
    assert ScratchpadConfig().activations == 0 and not PIPELINE_4x4.activation_window


def _rtl_run(program, q):
    """``program`` on the RTL: its output, and per segment the counters and the timeline's
    cycles (the first layer's step plan, `rtl_parameters` of the default memory)."""
    from tensorforge.dse.cost_model import rtl_parameters
    from tensorforge.dse.cost_space import build_space
    from tensorforge.dse.cost_trace import trace_cycles
    from tensorforge.memory import DEFAULT_MEMORY
    from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

    config, runs = program.config, []

    def device(segment, image):
        raw = RawProgram(segment.instructions, bytes(image), (segment.writable,))
        ((counters, after),) = run_instructions_on_rtl(config, [raw],
                                                       RunOptions(memory=DEFAULT_MEMORY))
        first = segment.programs[0]
        step = build_space(first.workload, first.mapping.choice, config,
                           first.mapping.groups).step
        model = trace_cycles(list(segment.instructions), config, step,
                             rtl_parameters(DEFAULT_MEMORY, config))
        runs.append((counters, model))
        return after, counters["cycles"]

    output, _ = program.run(q, device)
    return np.asarray(output), runs


@pytest.mark.rtl
def test_basic_block_keeps_its_activations_on_chip_on_the_rtl():
    """The basic block on the 4x4 pipeline RTL with a 16 KiB window (the model
    tests/test_activation_memory.py builds): exact, its DRAM counters (which count DRAM
    only) what `bus_traffic` predicts and far below the run through DRAM, and the timeline
    within 5% of the RTL's cycles (measured: 13,129 vs 13,386, -1.9%; through DRAM -8.8%)."""
    from tensorforge.sim.axi_traffic import bus_traffic

    module, inputs = block(3)
    network = quantize_model(module, inputs)
    q = network.quantize_input(inputs[0])
    results = {}
    for window in (0, 16 * 1024):
        program = compile_network(network, windowed(PIPELINE_4x4, window))
        output, ((counters, model),) = _rtl_run(program, q)
        np.testing.assert_array_equal(output.reshape(-1), reference_output(network, q)
                                      .reshape(-1))
        (segment,) = program.segments
        traffic = bus_traffic(program.config, segment.instructions, segment.data_bytes)
        assert (counters["bytes_read"], counters["bytes_written"]) == (traffic.read,
                                                                       traffic.written)
        results[window] = counters, model
    (plain, _), (kept, model) = results[0], results[16 * 1024]
    assert kept["bytes_written"] < plain["bytes_written"] // 100  # only the 5-byte output
    assert kept["bytes_read"] < plain["bytes_read"] * 0.6
    assert abs(model - kept["cycles"]) <= 0.05 * kept["cycles"], (model, kept["cycles"])


def test_compile_reports_the_activations_it_keeps_on_chip(capsys):
    """`compile --workload dqn --activations 16KiB`: the first convolution's output (16
    channels of 20x20, the second's input) stays on chip, the program still equals the
    chained references; without the flag the summary has no such entry."""
    from tensorforge.cli import main

    flags = ["compile", "--workload", "dqn", "--pe", "4x4", "--output-pipeline", "--json"]
    assert main([*flags, "--activations", "16KiB", "--check"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["check"]["equal"]
    (segment,) = summary["segments"]
    assert segment["activations_on_chip"] == 16 * 20 * 20
    assert "16 KiB activation memory" in summary["config"]
    assert main(flags) == 0
    assert "activations_on_chip" not in json.loads(capsys.readouterr().out)["segments"][0]


def test_simulate_model_reports_the_activation_bytes():
    """`simulate_model` with a 64 KiB window: exact, and its result says which output bytes
    stayed on chip (the four intermediate layers': 648 + 128 + 256 + 16, the first padded)
    and which went to DRAM (the linear layer's 10)."""
    from tensorforge.api import simulate_model

    module, inputs = small_cnn(7)
    result = simulate_model(module, inputs, windowed(PIPELINE_4x4, 64 * 1024),
                            backend="functional", seed=7)
    assert result.match and result.activation_bytes == (648 + 128 + 256 + 16, 10)
    assert result.summary()["activation_bytes_on_chip"] == 1048


@pytest.mark.slow
def test_resnet50_first_stage_keeps_every_intermediate_on_chip():
    """ResNet-50's stem and first stage (three bottlenecks, a projection shortcut) at 16x16
    on the 4x4 pipeline with a 64 KiB window: exact, and the only DRAM write left is the fc's
    1,000 int8 outputs (41,192 B through DRAM); about a minute."""
    from tensorforge.compiler.zoo_graphs import resnet50

    net, inputs = resnet50(seed=0, resolution=16, blocks=(3,))
    program, output, expected, stats = _run(net, inputs, windowed(PIPELINE_4x4, 64 * 1024))
    np.testing.assert_array_equal(output, expected)
    (segment,) = program.segments
    assert _traffic(stats)[1] == 1000 and segment.activation_bytes[1] == 1000
    assert len(segment.on_chip) >= 10
