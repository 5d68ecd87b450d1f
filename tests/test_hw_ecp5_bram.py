"""The ECP5 target's block-RAM banks (DP16KD with the output register on) against `Memory`.

`Ecp5BlockRam` must read exactly what a generic `Memory` read port followed by a register
reads, in every cycle: checked on Verilator with the primitive's simulation model
(``sim/dp16kd.v``) under random reads and masked writes, one model per configuration; and the
scratchpad with ``bram_output_registers`` must answer exactly like the fabric-registered one.
The accumulator on blocks must answer like the fabric-registered one the same way. The block
layouts are checked against hand-counted DP16KD modes.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from amaranth import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.hw.accumulator import AccumulatorBuffer
from tensorforge.hw.ecp5_bram import BlockLayout, Ecp5BlockRam, block_layout
from tensorforge.hw.scratchpad import Scratchpad
from tensorforge.sim.rtl_harness import build_model, design_verilog

SEED = 1619


class BramPair(wiring.Component):
    """An `Ecp5BlockRam` and a `Memory` whose read data goes through a register, on the same
    inputs; ``bram_data`` and ``reference_data`` are their read data."""

    def __init__(self, depth: int, width: int, granularity: int) -> None:
        self.depth, self.width, self.granularity = depth, width, granularity
        super().__init__({
            "write_addr": In(range(depth)), "write_data": In(width),
            "write_en": In(width // granularity), "read_addr": In(range(depth)),
            "bram_data": Out(width), "reference_data": Out(width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.bram = bram = Ecp5BlockRam(self.depth, self.width, self.granularity)
        m.submodules.memory = memory = Memory(shape=unsigned(self.width), depth=self.depth,
                                              init=[])
        read = memory.read_port(transparent_for=())
        write = memory.write_port(granularity=self.granularity)
        registered = Signal(self.width)
        m.d.sync += registered.eq(read.data)
        m.d.comb += [
            read.addr.eq(self.read_addr), write.addr.eq(self.write_addr),
            write.data.eq(self.write_data), write.en.eq(self.write_en),
            bram.read_addr.eq(self.read_addr), bram.write_addr.eq(self.write_addr),
            bram.write_data.eq(self.write_data), bram.write_en.eq(self.write_en),
            self.bram_data.eq(bram.read_data), self.reference_data.eq(registered),
        ]
        return m


@functools.cache
def pair_model(depth: int, width: int, granularity: int):
    return build_model(BramPair(depth, width, granularity), top="bram_pair")


#: (depth, width, lane bits): the 8x8 default's banks (eight 2Kx9 blocks), the 4x4's (4Kx4,
#: two per lane), 16-bit lanes on 1Kx18 blocks, and a depth stacked over three 1Kx18 blocks.
CONFIGURATIONS = [(2048, 64, 8), (4096, 32, 8), (1024, 32, 16), (3000, 32, 16)]


@pytest.mark.rtl
@pytest.mark.parametrize("depth,width,granularity", CONFIGURATIONS,
                         ids=[f"{d}x{w}-lanes{g}" for d, w, g in CONFIGURATIONS])
def test_block_ram_reads_like_memory_and_register(cocotb_benches: Path, tmp_path: Path,
                                                  depth, width, granularity) -> None:
    results = pair_model(depth, width, granularity).run(
        cocotb_benches / "bram_bench.py", test_dir=tmp_path,
        config={"depth": depth, "width": width, "granularity": granularity, "cycles": 3000},
        seed=SEED + depth)
    assert [t.name for t in results.passed] == ["block_ram_matches_memory"]
    assert "cycles equal" in results.log_path.read_text()


def test_block_layouts_use_the_fewest_blocks() -> None:
    # 2K rows of int8: one 2Kx9 block per lane; 4K rows: two 4Kx4 (a tie with two stacked
    # 2Kx9, and the unstacked wins); 16-bit lanes over 3000 rows: three stacked 1Kx18 beat
    # four 2Kx9 or 4Kx4
    assert block_layout(2048, 8) == BlockLayout(9, 2048, 1, 1)
    assert block_layout(4096, 8) == BlockLayout(4, 4096, 2, 1)
    assert block_layout(1024, 16) == BlockLayout(18, 1024, 1, 1)
    assert block_layout(3000, 16) == BlockLayout(18, 1024, 1, 3)
    assert block_layout(20000, 1) == BlockLayout(1, 16384, 1, 2)
    assert block_layout(2048, 9).low_pin == 3 and block_layout(1024, 18).low_pin == 4
    with pytest.raises(ConfigError, match="at least one row"):
        block_layout(0, 8)


def test_block_ram_instantiates_registered_dp16kd() -> None:
    text = design_verilog(Ecp5BlockRam(2048, 64, 8), "bram")
    assert text.count("DP16KD #(") == 8  # one 2Kx9 block per int8 lane
    assert text.count('.REGMODE_B("OUTREG")') == 8 and text.count(".DATA_WIDTH_B(32'd9)") == 8
    assert "module DP16KD" in text  # the simulation model came with it
    assert design_verilog(Ecp5BlockRam(4096, 32, 8), "bram").count("DP16KD #(") == 8


def test_ecp5_scratchpad_banks_are_block_rams_and_generic_ones_memories() -> None:
    config = AcceleratorConfig()  # the 8x8 default: 4 banks of 2048 lines of 64 bits
    ecp5 = design_verilog(Scratchpad(config, read_every_cycle=True, registered_reads=True,
                                     bram_output_registers=True), "scratchpad")
    assert ecp5.count("DP16KD #(") == 32 and "bank0_read_q" not in ecp5
    fabric = design_verilog(Scratchpad(config, read_every_cycle=True, registered_reads=True),
                            "scratchpad")
    assert "DP16KD" not in fabric and "bank0_read_q" in fabric


def read_port_wires(pair, side: str, port: str, read) -> list:
    """A pair's ``PORT_valid``, ``PORT_line`` and ``PORT_ready`` into one side's read port
    ``read``, and its answers out as ``SIDE__PORT_req_ready``, ``_resp_valid``, ``_resp_line``."""
    return [
        read.req.valid.eq(getattr(pair, f"{port}_valid")),
        read.req.payload.eq(getattr(pair, f"{port}_line")),
        read.resp.ready.eq(getattr(pair, f"{port}_ready")),
        getattr(pair, f"{side}__{port}_req_ready").eq(read.req.ready),
        getattr(pair, f"{side}__{port}_resp_valid").eq(read.resp.valid),
        getattr(pair, f"{side}__{port}_resp_line").eq(read.resp.payload),
    ]


class ScratchpadPair(wiring.Component):
    """The ECP5 scratchpad with fabric read registers (``fabric``) and on DP16KD blocks
    (``blocks``), on the same inputs; each output as ``fabric__NAME`` and ``blocks__NAME``."""

    def __init__(self, config: AcceleratorConfig) -> None:
        self.config = config
        line_bits = config.spad_line_elems * config.precision.in_bits
        inputs = {f"{port}_{name}": In(shape) for port in "ab"
                  for name, shape in (("valid", 1), ("line", range(config.spad_lines)),
                                      ("ready", 1))}
        inputs |= {"w_valid": In(1), "w_line": In(range(config.spad_lines)),
                   "w_data": In(line_bits), "w_mask": In(config.spad_line_elems)}
        outputs = {f"{side}__{name}": Out(shape) for side in ("fabric", "blocks")
                   for name, shape in (("a_req_ready", 1), ("a_resp_valid", 1),
                                       ("a_resp_line", line_bits), ("b_req_ready", 1),
                                       ("b_resp_valid", 1), ("b_resp_line", line_bits),
                                       ("conflict", 1), ("conflicts", 32))}
        super().__init__(inputs | outputs)

    def elaborate(self, platform) -> Module:
        m = Module()
        for side, blocks in (("fabric", False), ("blocks", True)):
            pad = Scratchpad(self.config, read_every_cycle=True, registered_reads=True,
                             bram_output_registers=blocks)
            m.submodules[side] = pad
            for port in "ab":
                m.d.comb += read_port_wires(self, side, port, getattr(pad, f"{port}_read"))
            m.d.comb += [
                pad.write.req.valid.eq(self.w_valid),
                pad.write.req.payload.addr.eq(self.w_line),
                pad.write.req.payload.data.eq(self.w_data),
                pad.write.req.payload.mask.eq(self.w_mask),
                getattr(self, f"{side}__conflict").eq(pad.conflict),
                getattr(self, f"{side}__conflicts").eq(pad.conflicts),
            ]
        return m


@pytest.mark.rtl
def test_block_ram_scratchpad_answers_like_the_fabric_registered_one(cocotb_benches: Path,
                                                                     tmp_path: Path) -> None:
    # 2x4 int8 lines over three banks of 1,366 rows (2Kx9 blocks, a depth not a power of two)
    config = AcceleratorConfig.from_dict({
        "array": {"rows": 2, "cols": 4, "dataflow": "os"},
        "scratchpad": {"capacity": 16384, "banks": 3, "accumulator": 128}})
    model = build_model(ScratchpadPair(config), top="scratchpad_pair")
    results = model.run(cocotb_benches / "bram_scratchpad_bench.py", test_dir=tmp_path,
                        config={"lines": config.spad_lines, "cycles": 3000}, seed=SEED)
    assert [t.name for t in results.passed] == ["block_ram_scratchpad_matches_fabric_one"]
    assert "cycles equal" in results.log_path.read_text()


#: the accumulator ports a pair drives: (port, its inputs) and what each side answers
ACC_READS = ("compute_read", "dma_read")
ACC_WRITES = ("compute_write", "dma_write")


class AccumulatorPair(wiring.Component):
    """The ECP5 accumulator (registered reads and writes) with fabric read registers
    (``fabric``) and on DP16KD blocks (``blocks``: ``bram_output_registers``), on the same
    inputs; each output as ``fabric__NAME`` and ``blocks__NAME``."""

    def __init__(self, config: AcceleratorConfig) -> None:
        self.config = config
        line_bits = config.acc_line_elems * config.precision.acc_bits
        inputs = {f"{port}_{name}": In(shape) for port in ACC_READS
                  for name, shape in (("valid", 1), ("line", range(config.acc_lines)),
                                      ("ready", 1))}
        inputs |= {f"{port}_{name}": In(shape) for port in ACC_WRITES
                   for name, shape in (("valid", 1), ("line", range(config.acc_lines)),
                                       ("data", line_bits), ("mask", config.acc_line_elems))}
        outputs = {f"{side}__{name}": Out(shape) for side in ("fabric", "blocks")
                   for name, shape in [(f"{port}_{what}", shape) for port in ACC_READS
                                       for what, shape in (("req_ready", 1), ("resp_valid", 1),
                                                           ("resp_line", line_bits))]
                   + [("dma_write_ready", 1)]}
        super().__init__(inputs | outputs)

    def elaborate(self, platform) -> Module:
        m = Module()
        for side, blocks in (("fabric", False), ("blocks", True)):
            acc = AccumulatorBuffer(self.config, read_every_cycle=True, registered_reads=True,
                                    registered_writes=True, registered_dma_reads=True,
                                    bram_output_registers=blocks)
            m.submodules[side] = acc
            for port in ACC_READS:
                m.d.comb += read_port_wires(self, side, port, getattr(acc, port))
            for port in ACC_WRITES:
                write = getattr(acc, port).req
                m.d.comb += [
                    write.valid.eq(getattr(self, f"{port}_valid")),
                    write.payload.addr.eq(getattr(self, f"{port}_line")),
                    write.payload.data.eq(getattr(self, f"{port}_data")),
                    write.payload.mask.eq(getattr(self, f"{port}_mask")),
                ]
            m.d.comb += getattr(self, f"{side}__dma_write_ready").eq(acc.dma_write.req.ready)
        return m


@pytest.mark.rtl
def test_block_ram_accumulator_answers_like_the_fabric_registered_one(cocotb_benches: Path,
                                                                      tmp_path: Path) -> None:
    # the 8x8 default's lines (8 int32 elements), on 1Kx18 blocks, two per element
    config = AcceleratorConfig()
    model = build_model(AccumulatorPair(config), top="accumulator_pair")
    results = model.run(cocotb_benches / "bram_accumulator_bench.py", test_dir=tmp_path,
                        config={"lines": config.acc_lines, "cycles": 3000}, seed=SEED)
    assert [t.name for t in results.passed] == ["block_ram_accumulator_matches_fabric_one"]
    assert "cycles equal" in results.log_path.read_text()


def test_ecp5_accumulator_is_block_rams_with_their_output_registers() -> None:
    config = AcceleratorConfig()  # 8x8: lines of 8 int32, each element on two 1Kx18 blocks
    blocks = design_verilog(AccumulatorBuffer(
        config, read_every_cycle=True, registered_reads=True, registered_writes=True,
        registered_dma_reads=True, bram_output_registers=True), "accumulator")
    per_port = 8 * -(-config.precision.acc_bits // 18) * -(-config.acc_lines // 1024)
    assert blocks.count("DP16KD #(") == 2 * per_port
    assert blocks.count('.REGMODE_B("OUTREG")') == 2 * per_port
    assert "compute_read_q" not in blocks and "dma_read_q" not in blocks
