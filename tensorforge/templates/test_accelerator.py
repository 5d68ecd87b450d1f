"""cocotb test written by `tensorforge compile --out DIR`: run the program on accelerator.v.

It does what host software does on a real system, with only cocotb and cocotbext-axi (no
tensorforge): put ``dram_image.bin`` in a RAM on the accelerator's AXI4 manager port
(``m_axi``), write the values of ``registers.json`` to the AXI4-Lite control registers
(``s_axil``), wait for ``irq`` (STATUS.done), then compare the output region of the RAM with
``expected_dram_output.bin``: the bytes of the numpy reference of the packed inputs, in the
device layout ``image.json`` describes. The files are read from ``$TENSORFORGE_ARTIFACTS``,
or from this file's folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

CLOCK_NS = 10
RESET_CYCLES = 4
GUARD_BYTES = 4096  # RAM past the image: the last burst may reach past its end


def artifacts() -> Path:
    return Path(os.environ.get("TENSORFORGE_ARTIFACTS", Path(__file__).resolve().parent))


@cocotb.test()
async def program_output_matches_the_reference(dut) -> None:
    """The program finishes without STATUS.error and writes exactly the expected bytes."""
    folder = artifacts()
    image = (folder / "dram_image.bin").read_bytes()
    registers = json.loads((folder / "registers.json").read_text())
    layout = json.loads((folder / "image.json").read_text())
    expected = (folder / "expected_dram_output.bin").read_bytes()

    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    bus_bytes = len(dut.m_axi__wdata) // 8
    ram_bytes = -(-len(image) // bus_bytes) * bus_bytes + GUARD_BYTES
    ram = AxiRam(AxiBus.from_prefix(dut, "m_axi", bus_separator="__"), dut.clk, dut.rst,
                 size=ram_bytes)
    ram.write(0, image)
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk,
                         dut.rst)

    dut.rst.value = 1
    await ClockCycles(dut.clk, RESET_CYCLES)
    dut.rst.value = 0
    await RisingEdge(dut.clk)

    for write in registers["writes"]:  # insn_addr, insn_count, then control (start)
        await host.write_dword(write["offset"], write["value"])
    limit = registers["max_cycles"]
    await First(RisingEdge(dut.irq), ClockCycles(dut.clk, limit))
    status = await host.read_dword(registers["status"]["offset"])
    cycles = await host.read_dword(registers["cycles"]["offset"])
    dut._log.info("status %#x after %d cycles", status, cycles)
    assert status & registers["status"]["done"], f"not done after {limit} cycles"
    assert not status & registers["status"]["error"], "STATUS.error: a bad access or token"

    output = layout["output"]
    produced = ram.read(output["base"], output["bytes"])
    width = output["elem_bytes"]
    wrong = [i for i in range(0, len(expected), width)
             if produced[i : i + width] != expected[i : i + width]]
    assert not wrong, (f"{len(wrong)} of {len(expected) // width} output elements differ, "
                       f"first at byte offset {output['base'] + wrong[0]:#x}")
