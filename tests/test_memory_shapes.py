"""The memories `dse.memory_shapes` predicts from a configuration are the ones Yosys finds in the
generated RTL, and the flow picks the same macros for them: the area model's memory area is
exact only if this holds."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.memory_shapes import choose, memory_cost, memory_requests
from tensorforge.fpga.asic import COARSE_DESIGN, MEMORY_DUMP
from tensorforge.fpga.macro_picker import MemoryRequest
from tensorforge.fpga.memories import MemoryCell, parse_memories
from tensorforge.fpga.yosys import run_yosys

CONFIGS = {
    "2x2 systolic, 1 KiB / 2 banks": {
        "array": {"rows": 2, "cols": 2},
        "scratchpad": {"capacity": 1024, "banks": 2, "accumulator": 512}},
    "4x2 full, local store, 16 KiB / 8 banks, 128-bit bus": {
        "array": {"rows": 4, "cols": 2, "interconnect": "full", "local_bytes": 8},
        "scratchpad": {"capacity": 16384, "banks": 8, "accumulator": 4096},
        "dma": {"bus_bits": 128}},
    "4x4 none os, 64 KiB / 3 banks, 256-bit bus": {
        "array": {"rows": 4, "cols": 4, "interconnect": "none", "dataflow": "os"},
        "scratchpad": {"capacity": 65536, "banks": 3, "accumulator": 16384},
        "dma": {"bus_bits": 256}},
    "conv2d 4x4, local store, 8 KiB / 2 banks": {
        "intrinsic": "conv2d",
        "array": {"rows": 4, "cols": 4, "local_bytes": 8},
        "scratchpad": {"capacity": 8192, "banks": 2, "accumulator": 2048}},
}


def yosys_memories(config: AcceleratorConfig) -> list[MemoryCell]:
    """The ``$mem_v2`` cells of the generated accelerator after the ASIC flow's coarse step."""
    from tensorforge.dse.calibrate import Design, block_verilog

    verilog, top = block_verilog(Design("accelerator", config))
    run_dir = Path(tempfile.mkdtemp(prefix="memory-shapes-"))
    try:
        run_yosys(verilog, [f"synth -flatten -top {top} -run :fine",
                            f"tee -q -o {MEMORY_DUMP} dump t:$mem_v2",
                            f"write_rtlil {COARSE_DESIGN}"],
                  run_dir=run_dir, timeout_s=600, log_name="yosys-coarse")
        return parse_memories((run_dir / MEMORY_DUMP).read_text())
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _shape(request: MemoryRequest) -> tuple:
    return (request.words, request.bits, request.read_ports, request.write_ports,
            request.shared_address, request.synchronous_read)


@pytest.mark.synth
@pytest.mark.parametrize("name", list(CONFIGS))
def test_predicted_memories_are_the_ones_yosys_finds(name):
    config = AcceleratorConfig.from_dict(CONFIGS[name])
    found = yosys_memories(config)
    synchronous = {cell.name: cell.request() for cell in found if cell.synchronous_read}
    predicted = {m.instance: m.request for m in memory_requests(config)}
    assert {k: _shape(v) for k, v in predicted.items()} == \
        {k: _shape(v) for k, v in synchronous.items()}
    for instance, request in synchronous.items():  # write masks decide which macros may serve
        ours, flows = choose(predicted[instance]), choose(request)
        assert ours.reason == flows.reason, instance


def test_banks_and_accumulator_follow_the_configuration():
    """Hand-computed: 8x8 int8 lines are 8 B, so 64 KiB is 8192 lines, 2048 in each of 4
    banks; a 16 KiB accumulator of 8 x 32-bit lines (32 B) is 512 lines, read by two ports."""
    predicted = {m.instance: m.request for m in memory_requests(AcceleratorConfig())}
    assert [(predicted[f"scratchpad.bank{i}"].words, predicted[f"scratchpad.bank{i}"].bits)
            for i in range(4)] == [(2048, 64)] * 4
    accumulator = predicted["accumulator.memory"]
    assert (accumulator.words, accumulator.bits, accumulator.read_ports) == (512, 256, 2)


def test_memory_cost_is_the_sum_of_the_picked_macro_arrays():
    config = AcceleratorConfig()
    arrays = [choose(m.request).array for m in memory_requests(config)]
    total = sum(a.area_um2 for a in arrays if a is not None)
    cost = memory_cost(config)
    assert cost.macro_area_um2 == pytest.approx(total)
    assert cost.macro_area_um2 == pytest.approx(
        memory_cost(config, "scratchpad.").macro_area_um2
        + memory_cost(config, "accumulator.").macro_area_um2
        + memory_cost(config, "controller.").macro_area_um2)
    bigger = AcceleratorConfig.from_dict({"scratchpad": {"capacity": 128 * 1024}})
    assert memory_cost(bigger).macro_area_um2 > cost.macro_area_um2
