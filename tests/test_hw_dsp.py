"""The ECP5 target's PE (MULT18X18D with its own registers) against the generic PE.

The DSP variant must be cycle-for-cycle the generic PE: checked on Verilator with the
primitive's simulation model (``sim/mult18x18d.v``) over random seeded stimulus, with the
array's freeze (``advance``) toggling. The default target's Verilog must not change at all.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from amaranth import Module
from amaranth.hdl import EnableInserter
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.hw.dsp import check_operand_bits
from tensorforge.hw.pe import ProcessingElement
from tensorforge.hw.targets import Target, parse_target
from tensorforge.sim.rtl_harness import build_model, design_verilog

SEED = 1717


class PePair(wiring.Component):
    """A generic and an ECP5 PE on the same inputs, both frozen while ``advance`` is low."""

    def __init__(self, in_bits: int, acc_bits: int, slots: int, banks: int) -> None:
        self.generic = ProcessingElement(in_bits, acc_bits, slots, banks)
        self.dsp = ProcessingElement(in_bits, acc_bits, slots, banks, Target.ECP5)
        inputs = {name: member for name, member in self.generic.signature.members.items()
                  if member.flow is In}
        super().__init__({
            **inputs, "advance": In(1),
            "acc_generic": Out(acc_bits), "acc_dsp": Out(acc_bits),
            "done_generic": Out(1), "done_dsp": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.generic = EnableInserter(self.advance)(self.generic)
        m.submodules.dsp = EnableInserter(self.advance)(self.dsp)
        for name, member in self.generic.signature.members.items():
            if member.flow is In:
                m.d.comb += [getattr(self.generic, name).eq(getattr(self, name)),
                             getattr(self.dsp, name).eq(getattr(self, name))]
        m.d.comb += [self.dsp.advance.eq(self.advance),
                     self.acc_generic.eq(self.generic.acc), self.acc_dsp.eq(self.dsp.acc),
                     self.done_generic.eq(self.generic.done), self.done_dsp.eq(self.dsp.done)]
        return m


@pytest.mark.rtl
@pytest.mark.parametrize("in_bits,slots,banks", [(8, 2, 2), (18, 1, 2), (4, 3, 1)])
def test_dsp_pe_equals_generic_pe_cycle_for_cycle(cocotb_benches: Path, tmp_path: Path,
                                                  in_bits, slots, banks) -> None:
    model = build_model(PePair(in_bits, 32 if in_bits < 16 else 40, slots, banks), top="pe_pair")
    config = {"in_bits": in_bits, "slots": slots, "banks": banks, "cycles": 2000}
    results = model.run(cocotb_benches / "pe_dsp_bench.py", test_dir=tmp_path, config=config,
                        seed=SEED + in_bits)
    assert [t.name for t in results.passed] == ["dsp_pe_matches_generic_pe"]
    assert "cycles equal" in results.log_path.read_text()


def test_ecp5_pe_instantiates_one_registered_dsp_and_generic_none() -> None:
    dsp = design_verilog(ProcessingElement(8, 32, 2, 2, "ecp5"), "pe")
    generic = design_verilog(ProcessingElement(8, 32, 2, 2), "pe")
    assert dsp.count("MULT18X18D #(") == 1 and "MULT18X18D" not in generic
    for register in ("INPUTA", "INPUTB", "OUTPUT"):
        assert f'.REG_{register}_CLK("CLK0")' in dsp
    assert '.REG_PIPELINE_CLK("NONE")' in dsp
    assert "module MULT18X18D" in dsp  # the simulation model came with it


def test_targets_are_checked() -> None:
    assert parse_target("ecp5") is Target.ECP5
    with pytest.raises(ConfigError, match="generic, ecp5"):
        parse_target("xilinx")
    with pytest.raises(ConfigError, match="2..18 bits"):
        check_operand_bits(19)
    check_operand_bits(18)


@pytest.mark.parametrize("link", ["none", "systolic", "full"])
def test_ecp5_accelerator_puts_every_multiplier_on_a_registered_dsp(link) -> None:
    """Every PE on a MULT18X18D under ``ecp5``; the explicit default target is today's text."""
    from amaranth.back import verilog

    from tensorforge.hw.accelerator import Accelerator

    config = AcceleratorConfig.from_dict({
        "array": {"rows": 2, "cols": 3, "interconnect": link},
        "scratchpad": {"capacity": 4096, "banks": 2, "accumulator": 4096}})
    def text(**target):
        return verilog.convert(Accelerator(config, **target), name="accelerator", emit_src=False)
    plain = text()
    assert plain == text(target="generic") and "MULT18X18D" not in plain
    dsp = text(target="ecp5")
    assert dsp.count("MULT18X18D #(") == 6 and "load_q" in dsp


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("link", ["systolic", "none"])
def test_ecp5_accelerator_runs_programs_like_the_generic_one(link) -> None:
    """Whole accelerator on Verilator: the ``ecp5`` target's outputs equal numpy and it moves
    the same DRAM bytes as the generic target. Its cycles may differ (pipeline registers for
    timing closure, docs/ecp5_target.md): the cost model describes the generic target."""
    from tensorforge.compiler.workload import parse_workload
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    config = AcceleratorConfig.from_dict({
        "intrinsic": "gemm",
        "array": {"rows": 4, "cols": 4, "interconnect": link, "dataflow": "ws"},
        "scratchpad": {"capacity": 2048, "banks": 4, "accumulator": 1024},
        "dma": {"bus_bits": 64, "max_burst": 16},
    })
    cases = [RtlCase(parse_workload("C[i,j] += A[i,k] * B[k,j]", shape, name="gemm"), None,
                     None, seed) for seed, shape in enumerate(["i=12,j=10,k=9", "i=8,j=16,k=20"])]
    generic = run_programs_on_rtl(config, cases, RunOptions(seed=SEED))
    ecp5 = run_programs_on_rtl(config, cases, RunOptions(seed=SEED, target="ecp5"))
    for plain, dsp in zip(generic, ecp5, strict=True):
        assert dsp.match and plain.match, dsp.mismatches
        for counter in ("bytes_read", "bytes_written"):
            assert dsp.counters[counter] == plain.counters[counter], counter
        assert dsp.counters["cycles"] > 0


def test_pes_beyond_the_dsp_count_stay_generic(monkeypatch) -> None:
    """Past `MAX_DSPS` PEs (row-major) the ``ecp5`` array builds generic PEs, whose multipliers
    the ECP5 flow then maps from LUTs once the instantiated DSPs have used up its budget."""
    from amaranth.back import verilog

    from tensorforge.hw import pe_array

    monkeypatch.setattr(pe_array, "MAX_DSPS", 4)
    config = AcceleratorConfig.from_dict({
        "array": {"rows": 2, "cols": 3},
        "scratchpad": {"capacity": 4096, "banks": 2, "accumulator": 4096}})
    from tensorforge.hw.accelerator import Accelerator

    text = verilog.convert(Accelerator(config, target="ecp5"), name="accelerator",
                           emit_src=False)
    generic_macs = re.findall(r"^module \\?\S*pe_(\d)_(\d)\.mac\b", text, re.M)
    assert text.count("MULT18X18D #(") == 4 and sorted(generic_macs) == [("1", "1"), ("1", "2")]


def test_instantiated_dsps_count_against_the_flow_budget() -> None:
    from tensorforge.fpga.ecp5 import instantiated_dsps

    rtlil = "module \\top\n  cell \\MULT18X18D \\a.mult\n  end\n  cell \\MULT18X18D \\b\n" \
            "  cell $mul $x\n"
    assert instantiated_dsps(rtlil) == 2
