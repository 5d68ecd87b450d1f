"""The wrappers that build a memory from IHP macros behave as the memory, in simulation.

Each case picks a macro array as the flow would, writes its wrapper, and runs it under
Verilator with behavioural models of the macros written after the PDK's own
(``RM_IHPSG13_2P_core_behavioral_bm_bist_ideal.v``: writes under the bit mask when ``MEN`` and
``WEN`` are high, reads into a register when ``MEN`` and ``REN`` are), against a dict.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tensorforge.fpga import ihp_sg13g2
from tensorforge.fpga.ihp_wrappers import MASK_BUFFER, NET_BUFFER, stub_verilog, wrapper_verilog
from tensorforge.fpga.macro_picker import pick
from tensorforge.fpga.memories import MemoryCell
from tensorforge.sim.rtl_harness import build_model

pytestmark = pytest.mark.rtl

BENCH = Path(__file__).parent / "cocotb_benches" / "ihp_memory_bench.py"


def behavioural_model(model: ihp_sg13g2.MacroModel) -> str:
    macro, names = model.macro, {pin for pin, _, _ in model.pins}
    lines = [stub_verilog(macro.cell, model.pins).replace("(* blackbox *)\n", "").rsplit(
        "endmodule", 1)[0], f"  reg [{macro.bits - 1}:0] array [0:{macro.words - 1}];"]
    for side in ("A", "B"):
        if f"{side}_CLK" not in names:
            continue
        mask = f"{side}_BM" if f"{side}_BM" in names else f"{{{macro.bits}{{1'b1}}}}"
        lines += [
            f"  reg [{macro.bits - 1}:0] {side}_q;",
            f"  assign {side}_DOUT = {side}_q;",
            f"  wire [{macro.bits - 1}:0] {side}_merged = "
            f"(array[{side}_ADDR] & ~{mask}) | ({side}_DIN & {mask});",
            f"  always @(posedge {side}_CLK)",
            f"    if ({side}_MEN & {side}_WEN) begin",
            f"      array[{side}_ADDR] <= {side}_merged;",
            f"      if ({side}_REN) {side}_q <= {side}_merged;",
            f"    end else if ({side}_MEN & {side}_REN) {side}_q <= array[{side}_ADDR];",
        ]
    return "\n".join([*lines, "endmodule\n"])


def memory_cell(words: int, bits: int, reads: int, groups: list[int], shared: bool):
    abits = max(1, (words - 1).bit_length())
    enables = "{ " + " ".join(f"\\en [{g}]" for g in reversed(groups)) + " }"
    addresses = {"RD_ADDR": "\\a", "WR_ADDR": "\\a"} if shared else {}
    return MemoryCell("memory", {
        "SIZE": str(words), "WIDTH": str(bits), "ABITS": str(abits), "RD_PORTS": str(reads),
        "WR_PORTS": "1", "RD_CLK_ENABLE": f"{reads}'" + "1" * reads,
    }, {"WR_EN": enables, **addresses}), abits


@functools.cache
def memcheck(words: int, bits: int, reads: int, groups: tuple[int, ...], shared: bool):
    cell, abits = memory_cell(words, bits, reads, list(groups), shared)
    models = {model.macro.cell: model for model in ihp_sg13g2.catalogue()}
    choice = pick(cell.request(), [m.macro for m in models.values()], ihp_sg13g2.flop_cost())
    model = models[choice.array.macro.cell]
    top = f"""
module memcheck(input clk, input [{reads - 1}:0] ren, input [{reads * abits - 1}:0] raddr,
                output [{reads * bits - 1}:0] rdata, input [{bits - 1}:0] wen,
                input [{abits - 1}:0] waddr, input [{bits - 1}:0] wdata);
  tf_ihp_mem0 memory(.RD_CLK({{{reads}{{clk}}}}), .RD_EN(ren), .RD_ARST({reads}'b0),
    .RD_SRST({reads}'b0), .RD_ADDR(raddr), .RD_DATA(rdata), .WR_CLK(clk), .WR_EN(wen),
    .WR_ADDR(waddr), .WR_DATA(wdata));
endmodule
module {MASK_BUFFER}(input A, output X);
  assign X = A;
endmodule
module {NET_BUFFER}(input A, output X);
  assign X = A;
endmodule
"""
    verilog = (wrapper_verilog("tf_ihp_mem0", cell, choice.array, model.pins)
               + behavioural_model(model) + top)
    return choice.array, build_model(verilog, top="memcheck")


@pytest.mark.parametrize("words, bits, reads, groups, shared, cell, shape", [
    # deeper than any two-port macro: two stacked rows, one enable (mask tied high)
    (2048, 32, 1, (0,) * 32, False, "RM_IHPSG13_2P_1024x32_c2_bm_bist", (2, 1, 1)),
    # odd depth and width, byte enables, two read ports: rows x columns x copies, padding
    (3000, 40, 2, tuple(i // 8 for i in range(40)), False,
     "RM_IHPSG13_2P_1024x16_c2_bm_bist", (3, 3, 2)),
    # one address for reads and writes: a one-port macro
    (1024, 32, 1, tuple(i // 8 for i in range(32)), True,
     "RM_IHPSG13_1P_1024x32_c2_bm_bist", (1, 1, 1)),
])
def test_macro_array_behaves_as_the_memory(tmp_path, words, bits, reads, groups, shared,
                                           cell, shape):
    array, model = memcheck(words, bits, reads, groups, shared)
    assert array.macro.cell == cell
    assert (array.rows, array.cols, array.copies) == shape
    results = model.run(BENCH, test_dir=tmp_path, seed=12345, config={
        "words": words, "bits": bits, "reads": reads, "groups": list(groups),
        "shared": shared, "cycles": 3000})
    assert len(results.passed) == 1
