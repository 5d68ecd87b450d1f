"""The banked scratchpad and the accumulator buffer against their reference models.

Every cycle of random concurrent traffic (two readers that often hit the same bank, a masked
writer, random response back-pressure) the design's ``ready``s, responses and conflict count
must equal `ScratchpadModel`'s: in Amaranth's simulator (fast, several bank counts) and on
Verilator through the cocotb bench.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from amaranth_bench import run_testbench

from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.hw.accumulator import AccumulatorBuffer
from tensorforge.hw.scratchpad import Scratchpad, ScratchpadModel, ScratchpadTraffic


def small_config(banks: int) -> AcceleratorConfig:
    # GEMM 2x4: scratchpad lines of 4 int8, 16 lines; accumulator lines of 4 int32, 8 lines.
    return AcceleratorConfig(
        array=ArrayConfig(rows=2, cols=4, dataflow="os"),
        scratchpad=ScratchpadConfig(capacity=64, banks=banks, accumulator=128),
    )



def _write_masked(memory, write) -> None:
    """The reference memory after a write ``(line, values, mask)``; None writes nothing."""
    if write is None:
        return
    line, values, mask = write
    for index, value in enumerate(values):
        if mask >> index & 1:
            memory[line][index] = value


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("read_every_cycle", [False, True], ids=["generic", "ecp5"])
@pytest.mark.parametrize("banks", [1, 2, 3, 4])
def test_scratchpad_matches_model_cycle_by_cycle(banks, read_every_cycle, random_seed):
    # read_every_cycle (the ECP5 target): the banks read whatever row is presented, every cycle
    seed = random_seed
    config = small_config(banks)
    rng = np.random.default_rng(seed)
    dut = Scratchpad(config, read_every_cycle=read_every_cycle)
    lines, elems = config.spad_lines, config.spad_line_elems
    model = ScratchpadModel(banks, lines, elems)
    traffic = ScratchpadTraffic(rng, lines, elems, config.precision.in_bits, banks)
    ports = {"a": dut.a_read, "b": dut.b_read}

    async def testbench(ctx):
        for cycle in range(1500):
            for name, port in ports.items():
                line = traffic.requests[name]
                ctx.set(port.req.valid, line is not None)
                ctx.set(port.req.payload, line or 0)
                ctx.set(port.resp.ready, traffic.resp_ready[name])
            ctx.set(dut.write.req.valid, traffic.write is not None)
            if traffic.write is not None:
                line, elements, mask = traffic.write
                ctx.set(dut.write.req.payload, {"addr": line, "data": elements, "mask": mask})
            granted = model.ready(traffic.requests, traffic.resp_ready)
            where = f"seed {seed}, cycle {cycle}"
            for name, port in ports.items():
                assert ctx.get(port.req.ready) == granted[name], f"{where}: {name} ready"
                valid, expected = model.response(name)
                assert ctx.get(port.resp.valid) == valid, f"{where}: {name} resp.valid"
                if valid:
                    observed = tuple(ctx.get(port.resp.payload))
                    assert observed == expected, f"{where}: {name} read {observed}"
            assert ctx.get(dut.conflict) == granted["conflict"], f"{where}: conflict"
            model.clock(traffic.requests, traffic.resp_ready, traffic.write)
            traffic.advance(granted)
            await ctx.tick()
        assert ctx.get(dut.conflicts) == model.conflicts, f"seed {seed}"
        assert model.conflicts > 50, f"seed {seed}: traffic too tame to test arbitration"

    run_testbench(dut, testbench)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("read_every_cycle, registered_writes",
                         [(False, False), (True, False), (True, True)],
                         ids=["generic", "ecp5-every-cycle", "ecp5-registered-writes"])
def test_accumulator_masked_writes_and_write_priority(read_every_cycle, registered_writes,
                                                      random_seed):
    # Random read requests and response back-pressure: a response not taken stays on the port
    # (unchanged) while the memory reads other lines; with read_every_cycle (the ECP5 target)
    # the memory reads every cycle, whether or not a request is accepted; with
    # registered_writes (the ECP5 target) a write reaches the memory a cycle later and the
    # reads are transparent to it, so a read in the cycle after a write still sees it.
    seed = random_seed
    config = small_config(2)
    rng = np.random.default_rng(seed)
    dut = AccumulatorBuffer(config, read_every_cycle=read_every_cycle,
                            registered_writes=registered_writes)
    lines, elems = config.acc_lines, config.acc_line_elems
    memory = [[0] * elems for _ in range(lines)]
    writers = {"compute": dut.compute_write, "dma": dut.dma_write}
    readers = {"compute": dut.compute_read, "dma": dut.dma_read}

    async def testbench(ctx):
        pending = {name: None for name in readers}  # the line owed on resp, if any
        stalled = 0
        for cycle in range(1200):
            where = f"seed {seed}, cycle {cycle}"
            writes = {}
            for name, port in writers.items():
                write = None
                if rng.random() < 0.5:
                    values = [int(v) for v in rng.integers(-(1 << 31), 1 << 31, elems)]
                    write = (int(rng.integers(0, lines)), values, int(rng.integers(0, 1 << elems)))
                    ctx.set(
                        port.req.payload, {"addr": write[0], "data": write[1], "mask": write[2]}
                    )
                ctx.set(port.req.valid, write is not None)
                writes[name] = write
            accepted = {}
            for name, port in readers.items():
                valid = bool(rng.random() < 0.8)
                line = int(rng.integers(0, lines))
                resp_ready = bool(rng.random() < 0.6)
                ctx.set(port.req.valid, valid)
                ctx.set(port.req.payload, line)
                ctx.set(port.resp.ready, resp_ready)
                owed = pending[name]
                assert ctx.get(port.resp.valid) == (owed is not None), f"{where}: {name} valid"
                if owed is not None:
                    observed = list(ctx.get(port.resp.payload))
                    assert observed == owed, f"{where}: {name} read {observed}"
                    stalled += not resp_ready
                ready = owed is None or resp_ready
                assert ctx.get(port.req.ready) == ready, f"{where}: {name} req.ready"
                accepted[name] = line if valid and ready else None
                if owed is not None and resp_ready:
                    pending[name] = None
            dma_taken = ctx.get(dut.dma_write.req.ready)
            assert dma_taken == (writes["compute"] is None), f"seed {seed}: priority"
            for name, line in accepted.items():
                if line is not None:
                    pending[name] = list(memory[line])  # old line: read before write
            _write_masked(memory, writes["compute"] or writes["dma"])
            await ctx.tick()
        assert stalled > 100, f"seed {seed}: too few stalled responses to test holding"

    run_testbench(dut, testbench)


@functools.cache
def scratchpad_model(banks: int):
    from tensorforge.sim.rtl_harness import build_model

    return build_model(Scratchpad(small_config(banks)), top="scratchpad")


@pytest.mark.rtl
@pytest.mark.parametrize("banks", [3, 4])
def test_scratchpad_on_verilator(banks, tmp_path, cocotb_benches, random_seed):
    config = small_config(banks)
    seed = random_seed
    results = scratchpad_model(banks).run(
        cocotb_benches / "bench_scratchpad.py",
        test_dir=tmp_path,
        config={"accelerator": config.to_dict(), "cycles": 3000},
        seed=seed,
    )
    assert len(results.passed) == 1, f"seed {seed}"


def _late_read_bench(dut, readers, write_port, lines, elems, rng, seed, low, high, banks=None,
                     latency=2, owned=3):
    """Random requests, writes and back-pressure against ``registered_reads`` buffers: each
    port answers its accepted reads in order, each with the line as of its acceptance,
    ``latency`` cycles after it at the earliest, and one line per cycle while its consumer is
    ready, owning at most ``owned`` lines."""
    memory = [[0] * elems for _ in range(lines)]
    owed = {name: [] for name in readers}  # (line, cycle accepted), oldest first
    streak = {name: 0 for name in readers}  # cycles in a row with a line taken

    async def testbench(ctx):
        for cycle in range(1500):
            where = f"seed {seed}, cycle {cycle}"
            full_speed = cycle < 300  # always ready, every cycle a request: full throughput
            write = None
            if rng.random() < 0.5:
                write = (int(rng.integers(0, lines)), [int(v) for v in
                         rng.integers(low, high, elems)], int(rng.integers(0, 1 << elems)))
                ctx.set(write_port.req.payload,
                        {"addr": write[0], "data": write[1], "mask": write[2]})
            ctx.set(write_port.req.valid, write is not None)
            requests, readies = {}, {}
            for name, port in readers.items():
                requests[name] = (int(rng.integers(0, lines))
                                  if full_speed or rng.random() < 0.8 else None)
                readies[name] = full_speed or bool(rng.random() < 0.6)
                ctx.set(port.req.valid, requests[name] is not None)
                ctx.set(port.req.payload, requests[name] or 0)
                ctx.set(port.resp.ready, readies[name])
            if write is not None and not ctx.get(write_port.req.ready):
                write = None
            for name, port in readers.items():
                valid = ctx.get(port.resp.valid)
                ready_ok = owed[name] and owed[name][0][1] <= cycle - latency
                assert valid == bool(ready_ok), f"{where}: {name} resp.valid"
                if valid:
                    line = list(ctx.get(port.resp.payload))
                    assert line == owed[name][0][0], f"{where}: {name} read {line}"
                    if readies[name]:
                        owed[name].pop(0)
                streak[name] = streak[name] + 1 if valid and readies[name] else 0
                if full_speed and cycle >= 2 + latency:
                    assert streak[name] > 0 or banks is not None, f"{where}: {name} stalled"
                if ctx.get(port.req.ready) and requests[name] is not None:
                    owed[name].append((list(memory[requests[name]]), cycle))
                assert len(owed[name]) <= owned, f"{where}: {name} owns {len(owed[name])}"
            _write_masked(memory, write)
            await ctx.tick()
        assert max(len(o) for o in owed.values()) <= owned

    run_testbench(dut, testbench)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("registered_addresses", [False, True], ids=["data", "addresses"])
@pytest.mark.parametrize("banks", [1, 2, 4])
def test_scratchpad_registered_reads(banks, registered_addresses, random_seed):
    config = small_config(banks)
    rng = np.random.default_rng(random_seed)
    dut = Scratchpad(config, read_every_cycle=True, registered_reads=True,
                     registered_addresses=registered_addresses)
    latency = dut.read_latency
    assert latency == (3 if registered_addresses else 2)
    low, high = -(1 << (config.precision.in_bits - 1)), 1 << (config.precision.in_bits - 1)
    _late_read_bench(dut, {"a": dut.a_read, "b": dut.b_read}, dut.write, config.spad_lines,
                     config.spad_line_elems, rng, random_seed, low, high, banks=banks,
                     latency=latency, owned=latency + 1 + registered_addresses)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("port", ["compute", "dma"])  # registered_reads, registered_dma_reads
@pytest.mark.parametrize("registered_writes", [False, True], ids=["writes", "registered-writes"])
def test_accumulator_registered_reads(port, registered_writes, random_seed):
    config = small_config(2)
    rng = np.random.default_rng(random_seed)
    dut = AccumulatorBuffer(config, read_every_cycle=True, registered_reads=port == "compute",
                            registered_writes=registered_writes,
                            registered_dma_reads=port == "dma")
    # the other port keeps ReadSlot; its writes come from the compute unit's port either way
    _late_read_bench(dut, {port: getattr(dut, f"{port}_read")}, dut.compute_write,
                     config.acc_lines, config.acc_line_elems, rng, random_seed,
                     -(1 << 31), 1 << 31)


@pytest.mark.amaranth_sim
@pytest.mark.parametrize("registered_addresses", [False, True], ids=["data", "addresses"])
def test_scratchpad_registered_reads_answer_a_line_per_cycle(registered_addresses):
    """One port reading every cycle from a consumer always ready gets a line every cycle once
    the first has come back: the buffers own enough lines for their latency (``blind``
    included, whose room is counted as if no line left in the cycle)."""
    config = small_config(2)
    dut = Scratchpad(config, read_every_cycle=True, registered_reads=True,
                     registered_addresses=registered_addresses)
    answered = []

    async def testbench(ctx):
        ctx.set(dut.a_read.resp.ready, 1)
        for cycle in range(60):
            ctx.set(dut.a_read.req.valid, 1)
            ctx.set(dut.a_read.req.payload, cycle % config.spad_lines)
            answered.append(ctx.get(dut.a_read.resp.valid))
            await ctx.tick()

    run_testbench(dut, testbench)
    first = answered.index(1)
    assert first == dut.read_latency
    assert all(answered[first:]), f"a gap in the answers: {answered}"
