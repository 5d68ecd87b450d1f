"""The flows on the constructs generated hardware really has: OpenSTA-hostile netlists, Amaranth
array views that trip ABC9, and memories kept as SRAM macros.

Each distinct synthesis runs once per module (module-scoped fixtures on a private store).
"""

from __future__ import annotations

import re

import pytest
from amaranth import Module, Signal
from amaranth.back import verilog as amaranth_verilog
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tensorforge.fpga import tools
from tensorforge.fpga.asic import synthesize_asic
from tensorforge.fpga.ecp5 import synthesize_ecp5
from tensorforge.fpga.sram import SramGeometry, characterize, liberty
from tensorforge.store import ResultStore

pytestmark = pytest.mark.synth

# These tests pin the OSU 0.18 um target: its cells and analytical macros (test_fpga_ihp.py
# has the IHP SG13G2 ones).
OSU = "osu018"

# Constant outputs (with x bits), a port that is another port, concatenated and swapped buses,
# and a bus whose bits go to non-adjacent places: the shapes behind "syntax error, unexpected
# '{'" from OpenSTA's Verilog reader on the DMA's netlist.
QUIRKS = """
module quirks(input clk, input [7:0] a, input [3:0] b,
              output [7:0] y, output [3:0] k, output [11:0] cat, output [7:0] same,
              output [3:0] swapped, output z);
  reg [7:0] r;
  wire [3:0] mid;
  always @(posedge clk) r <= a ^ {b, b};
  assign mid = {r[0], 1'b0, r[3], 1'bx};
  assign y = {r[7:4] & b, 4'b1010};
  assign k = {2'bx1, mid[3], mid[1]};
  assign cat = {b, r};
  assign same = a;
  assign swapped = {b[0], b[1], b[2], b[3]};
  assign z = 1'b1;
endmodule
"""


class MemoryBlock(wiring.Component):
    """One ``depth`` x 32 memory (one write, one synchronous read port) and an accumulator
    that adds every word read, so that the read data leads into logic and a register."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        super().__init__({
            "write_addr": In(range(depth)), "write_data": In(32), "write_en": In(1),
            "read_addr": In(range(depth)), "total": Out(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.store = store = Memory(shape=32, depth=self.depth, init=[])
        write, read = store.write_port(), store.read_port()
        m.d.comb += [write.addr.eq(self.write_addr), write.data.eq(self.write_data),
                     write.en.eq(self.write_en), read.addr.eq(self.read_addr)]
        total = Signal(32)
        m.d.sync += total.eq(total + read.data)
        m.d.comb += self.total.eq(total)
        return m


@pytest.fixture(scope="module")
def workspace(module_workspace):
    """A result store beside this module's private cache, for its synthesis runs."""
    return ResultStore(module_workspace / "results.sqlite")


def memory_verilog(depth: int) -> str:
    return amaranth_verilog.convert(MemoryBlock(depth), name="memblock")


@pytest.fixture(scope="module")
def memory_1k(workspace):
    return synthesize_asic(memory_verilog(1024), "memblock", tech=OSU, store=workspace)


@pytest.fixture(scope="module")
def memory_2k(workspace):
    return synthesize_asic(memory_verilog(2048), "memblock", tech=OSU, store=workspace)


def liberty_areas() -> dict[str, float]:
    text = tools.find_osu018_liberty().read_text()
    return {
        section.split(")", 1)[0].strip(): float(re.search(r"\barea : ([\d.]+);", section)[1])
        for section in re.split(r"\n\s*cell \(", text)[1:]
    }


def test_asic_accepts_constants_concatenations_and_port_aliases(workspace):
    report = synthesize_asic(QUIRKS, "quirks", tech=OSU, store=workspace)
    areas = liberty_areas()
    assert report.critical_path_ns > 0
    assert report.area_um2 == pytest.approx(
        sum(areas[name] * count for name, count in report.cells_by_type.items()), rel=1e-6)
    assert report.cells_by_type.get("DFFPOSX1", 0) == 8
    assert report.macros == []


def test_asic_times_the_dma_load_unit(workspace):
    from tensorforge.dse.calibrate import Design, _config, block_verilog

    text, top = block_verilog(Design("dma", _config(2, 2, bus_bits=32)))
    report = synthesize_asic(text, top, tech=OSU, store=workspace)
    assert report.area_um2 > 0
    assert 0 < report.critical_path_ns < report.clock_ns
    assert report.power_mw.total > 0


def enable_fanout_verilog(width: int) -> str:
    """One register (``en``) that enables ``width`` flip-flops: a net of ``width`` loads."""
    return f"""
module fanout(input clk, input rst, input go, input [{width - 1}:0] d,
              output [{width - 1}:0] q);
  reg en;
  reg [{width - 1}:0] r;
  always @(posedge clk) begin
    en <= go;
    if (rst) r <= 0; else if (en) r <= d;
  end
  assign q = r;
endmodule
"""


def test_asic_buffers_a_net_with_hundreds_of_loads(workspace):
    # Each flip-flop's path is the same mux after the enable register; only the enable's (and
    # the reset's) fanout differs. Unbuffered, one small cell drove every load and OpenSTA's
    # extrapolated delay grew with the count (17x here); a buffer tree adds a few stages.
    small = synthesize_asic(enable_fanout_verilog(8), "fanout", tech=OSU, store=workspace)
    large = synthesize_asic(enable_fanout_verilog(384), "fanout", tech=OSU, store=workspace)
    assert 0 < small.critical_path_ns <= large.critical_path_ns
    assert large.critical_path_ns < 2 * small.critical_path_ns


def test_ecp5_maps_a_pe_array_with_array_views_on_its_ports(workspace):
    from tensorforge.dse.calibrate import Design, _config, block_verilog

    text, top = block_verilog(Design("pe_array", _config(2, 2, "none")))
    assert "\\out__payload[0] " in text  # the alias wire that collided inside ABC9
    report = synthesize_ecp5(text, top, out_of_context=True, store=workspace)
    assert report.dsps == 4  # one multiplier per PE
    assert report.fmax_mhz is not None and report.fmax_mhz > 0


def test_memory_becomes_one_macro_of_its_size(memory_1k):
    assert memory_1k.memories == "macros"
    [macro] = memory_1k.macros
    assert (macro["words"], macro["bits"]) == (1024, 32)
    assert (macro["read_ports"], macro["write_ports"]) == (1, 1)
    assert memory_1k.cells_by_type[macro["cell"]] == 1
    assert memory_1k.area_um2 == pytest.approx(
        memory_1k.logic_area_um2 + memory_1k.macro_area_um2, rel=1e-9)
    # 32 accumulator bits; 32 Kib in flip-flops would be tens of thousands of cells.
    assert memory_1k.cells < 1000


def test_macro_area_follows_the_memory_size_and_logic_does_not(memory_1k, memory_2k):
    assert memory_2k.macro_area_um2 == pytest.approx(2 * memory_1k.macro_area_um2, rel=0.1)
    assert memory_2k.macro_area_um2 > 1.8 * memory_1k.macro_area_um2
    # One more address bit is all the logic gains.
    assert memory_2k.logic_area_um2 == pytest.approx(memory_1k.logic_area_um2, rel=0.05)


def test_logic_area_still_matches_the_liberty(memory_1k):
    areas = liberty_areas()
    standard = {n: c for n, c in memory_1k.cells_by_type.items() if n in areas}
    assert set(memory_1k.cells_by_type) - set(standard) == {memory_1k.macros[0]["cell"]}
    assert memory_1k.logic_area_um2 == pytest.approx(
        sum(areas[name] * count for name, count in standard.items()), rel=1e-6)


def test_macro_timing_and_power_are_in_the_report(memory_1k):
    macro = memory_1k.macros[0]
    # The read data feeds the accumulator's adder: OpenSTA's worst path starts at the macro.
    assert macro["cell"] in memory_1k.logs["sta"]
    assert memory_1k.critical_path_ns > macro["access_ns"]
    assert memory_1k.macro_access_ns == macro["access_ns"]
    power = memory_1k.power_mw
    assert memory_1k.macro_power_mw > 0
    assert power.total == pytest.approx(power.internal + power.switching + power.leakage,
                                        rel=1e-4)
    assert power.internal > memory_1k.macro_power_mw
    assert power.leakage >= macro["leakage_mw"]


def test_flops_option_builds_the_memory_from_flip_flops(workspace):
    report = synthesize_asic(memory_verilog(16), "memblock", tech=OSU, memories="flops",
                             store=workspace)
    flops = report.cells_by_type.get("DFFPOSX1", 0) + report.cells_by_type.get("DFFSR", 0)
    assert flops >= 16 * 32 + 32
    assert report.macros == [] and report.macro_area_um2 == 0
    assert report.logic_area_um2 == report.area_um2


def test_macro_model_scales_and_its_liberty_names_every_macro():
    small, large = (characterize(SramGeometry(words, 64)) for words in (4096, 8192))
    assert large.area_um2 / small.area_um2 == pytest.approx(2, rel=0.05)
    assert large.access_ns > small.access_ns
    assert large.leakage_nw == pytest.approx(2 * small.leakage_nw)
    assert large.write_pj > large.read_pj > small.read_pj
    text = liberty([small, large])
    assert text.count("cell (tf_sram_") == 2
    assert "tf_sram_8192x64_1r1w" in text
