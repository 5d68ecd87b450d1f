"""The ECP5 target's PE (MULT18X18D with its own registers) against the generic PE.

The DSP variant must be the generic PE one cycle later (its product's fabric register), and so
must the ``ecp5`` array's PEs beyond the DSPs (generic multiplier, ``dsp=False``), so PEs of
both kinds can share an array: checked on Verilator with the primitive's simulation model
(``sim/mult18x18d.v``) over random seeded stimulus, with the array's freeze (``advance``)
toggling. The default target's Verilog must not change at all.
"""

from __future__ import annotations

import gc
import re
import warnings
from pathlib import Path

import pytest
from amaranth import Module
from amaranth.hdl import EnableInserter, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.hw.dsp import check_operand_bits
from tensorforge.hw.pe import ProcessingElement
from tensorforge.hw.pe_array import array_latency
from tensorforge.hw.targets import Target, parse_target
from tensorforge.sim.rtl_harness import build_model, design_verilog

SEED = 1717


class PePair(wiring.Component):
    """A generic PE and the ``ecp5`` target's two PEs (on a DSP, and beyond the DSPs) on the
    same inputs, all frozen while ``advance`` is low."""

    def __init__(self, in_bits: int, acc_bits: int, slots: int, banks: int) -> None:
        self.pes = {
            "generic": ProcessingElement(in_bits, acc_bits, slots, banks),
            "dsp": ProcessingElement(in_bits, acc_bits, slots, banks, Target.ECP5),
            "fabric": ProcessingElement(in_bits, acc_bits, slots, banks, Target.ECP5,
                                        dsp=False),
        }
        inputs = {name: member for name, member in self.pes["generic"].signature.members.items()
                  if member.flow is In}
        outputs = {f"{port}_{kind}": Out(acc_bits if port == "acc" else 1)
                   for kind in self.pes for port in ("acc", "done")}
        super().__init__({**inputs, "advance": In(1), **outputs})

    def elaborate(self, platform) -> Module:
        m = Module()
        for kind, pe in self.pes.items():
            m.submodules[kind] = EnableInserter(self.advance)(pe)
            for name, member in self.pes["generic"].signature.members.items():
                if member.flow is In:
                    m.d.comb += getattr(pe, name).eq(getattr(self, name))
            m.d.comb += [getattr(self, f"acc_{kind}").eq(pe.acc),
                         getattr(self, f"done_{kind}").eq(pe.done)]
        m.d.comb += self.pes["dsp"].advance.eq(self.advance)
        return m


@pytest.mark.rtl
@pytest.mark.parametrize("in_bits,slots,banks", [(8, 2, 2), (18, 1, 2), (4, 3, 1)])
def test_dsp_pe_equals_generic_pe_cycle_for_cycle(cocotb_benches: Path, tmp_path: Path,
                                                  in_bits, slots, banks) -> None:
    model = build_model(PePair(in_bits, 32 if in_bits < 16 else 40, slots, banks), top="pe_pair")
    lag = ProcessingElement.latency_of("ecp5") - ProcessingElement.latency_of("generic")
    assert lag == 1
    config = {"in_bits": in_bits, "slots": slots, "banks": banks, "cycles": 2000, "lag": lag}
    results = model.run(cocotb_benches / "pe_dsp_bench.py", test_dir=tmp_path, config=config,
                        seed=SEED + in_bits)
    assert [t.name for t in results.passed] == ["dsp_pe_matches_generic_pe"]
    assert "cycles equal" in results.log_path.read_text()


def test_ecp5_pes_of_both_kinds_take_one_latency() -> None:
    """An ``ecp5`` array mixes DSP PEs and fabric PEs (past `MAX_DSPS`); its drain needs one
    latency for all, and `array_latency` counts it."""
    config = AcceleratorConfig.from_dict({"array": {"rows": 2, "cols": 3}})
    kinds = [ProcessingElement(8, 32, 2, 2, "ecp5", dsp=dsp) for dsp in (True, False)]
    generic = ProcessingElement(8, 32, 2, 2)
    assert [pe.latency for pe in kinds] == [4, 4] and generic.latency == 3
    texts = [design_verilog(pe, "pe") for pe in (*kinds, generic)]  # each one elaborates
    assert [text.count("MULT18X18D #(") for text in texts] == [1, 0, 0]
    assert array_latency(config, "ecp5") == array_latency(config) + 1
    with warnings.catch_warnings():  # the half-built PE is never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="ecp5"):
            ProcessingElement(8, 32, 2, 2, dsp=True)
        gc.collect()


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
