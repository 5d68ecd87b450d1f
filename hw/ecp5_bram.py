"""A memory on Lattice ECP5 DP16KD block RAMs that registers its read data in the blocks.

Yosys' ``synth_ecp5`` maps every memory to DP16KD with the output register off (``NOREG``): a
read then takes 5.6-5.8 ns from the clock to its data at speed 6, where the block's own output
register (``OUTREG``) gives its data 0.96 ns after the clock. The ECP5 target registers the
scratchpad banks' read data anyway (`Scratchpad` ``registered_reads``); here that register is
the block's, so the fabric flip-flops after each bank go and the read's long clock-to-data ends
inside the block.

Each DP16KD is used as a simple dual-port RAM: port A writes, port B reads with its output
register on. A simulation model of the primitive is ``sim/dp16kd.v`` (Verilator reads it with
any design that instantiates one: `tensorforge.sim.rtl_harness.PRIMITIVE_MODELS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import ClockSignal, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tensorforge.errors import ConfigError

#: DP16KD data widths and the rows each gives (one block holds 16K data bits, 18K with parity).
DP16KD_MODES = {1: 16384, 2: 8192, 4: 4096, 9: 2048, 18: 1024}
#: Address pins per port (ADx13..ADx0); a mode of ``rows`` rows uses the top log2(rows) of them.
ADDRESS_PINS = 14
#: Data pins per port (DIx17..0, DOx17..0).
DATA_PINS = 18


@dataclass(frozen=True)
class BlockLayout:
    """How a ``depth`` x lanes-of-``lane_bits`` memory is cut into DP16KD blocks.

    Each lane (one write enable) owns ``per_lane`` blocks side by side, ``block_bits`` of its
    bits each, times ``deep`` blocks stacked in depth (rows ``k * rows`` up to ``(k + 1) *
    rows`` in the ``k``-th). Chosen by `block_layout`: the fewest blocks, then the fewest
    stacked.
    """

    block_bits: int
    rows: int
    per_lane: int
    deep: int

    @property
    def low_pin(self) -> int:
        """The address pin carrying row bit 0 (ADx3 at x9): 2**14 / rows."""
        return ADDRESS_PINS - (self.rows.bit_length() - 1)

    @property
    def row_bits(self) -> int:
        return self.rows.bit_length() - 1


def block_layout(depth: int, lane_bits: int) -> BlockLayout:
    """The `BlockLayout` of the fewest DP16KD blocks for ``depth`` rows of ``lane_bits`` lanes."""
    if depth < 1 or lane_bits < 1:
        raise ConfigError(f"a block RAM needs at least one row and one bit per lane, not "
                          f"depth {depth} and {lane_bits}-bit lanes")
    layouts = [BlockLayout(bits, rows, -(-lane_bits // bits), -(-depth // rows))
               for bits, rows in DP16KD_MODES.items()]
    return min(layouts, key=lambda layout: (layout.per_lane * layout.deep, layout.deep))


class Ecp5BlockRam(wiring.Component):
    """``depth`` x ``width`` bits on DP16KD blocks, one write port and one registered read port.

    Contract: ``read_data`` is the row at ``read_addr`` two clock edges after the address was
    presented (the row is read in every cycle: no read enable), as a `Memory` read port
    (``transparent_for=()``) followed by a register with no enable. A row written at the edge
    where it is read reads its old data in the model (``sim/dp16kd.v``), as a `Memory` does;
    on the device this case is the same as for the generic banks, which Yosys maps onto the
    same DP16KD port pairs (A writes, B reads) without adding collision logic. ``write_en``
    has one bit per ``granularity`` bits of ``write_data`` (a lane); each lane's bits go to
    blocks of their own. Where the depth needs more than one block (`BlockLayout.deep`), the
    stacked blocks' registered outputs are selected by the row's upper address bits, delayed
    two cycles to match.

    Neither the contents nor the output registers are reset (RSTx tied low; the model starts
    them at zero), where the fabric register they replace was reset: the scratchpad takes a
    bank's data only in the cycles after a granted read, so a value from before reset is
    never used.
    """

    latency = 2

    def __init__(self, depth: int, width: int, granularity: int) -> None:
        if granularity < 1 or width % granularity:
            raise ConfigError(f"a block RAM's width ({width}) must be a whole number of "
                              f"{granularity}-bit lanes")
        self.depth, self.width, self.granularity = depth, width, granularity
        self.layout = block_layout(depth, granularity)
        super().__init__({
            "write_addr": In(range(depth)),
            "write_data": In(width),
            "write_en": In(width // granularity),
            "read_addr": In(range(depth)),
            "read_data": Out(width),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        layout = self.layout
        lanes = self.width // self.granularity
        row_bits = layout.row_bits
        stacked = layout.deep > 1
        if stacked:  # the stacked block a read's row lives in, two cycles later at the output
            stack_q = Signal(range(layout.deep), name="read_stack_q", reset_less=True)
            stack_qq = Signal(range(layout.deep), name="read_stack_qq", reset_less=True)
            m.d.sync += [stack_q.eq(self.read_addr[row_bits:]), stack_qq.eq(stack_q)]

        outputs = [Signal(self.width, name=f"stack{k}_data") for k in range(layout.deep)]
        for stack in range(layout.deep):
            for lane in range(lanes):
                write_en = self.write_en[lane]
                if stacked:
                    write_en = write_en & (self.write_addr[row_bits:] == stack)
                for part in range(layout.per_lane):
                    low = lane * self.granularity + part * layout.block_bits
                    bits = min(layout.block_bits, (lane + 1) * self.granularity - low)
                    self._add_block(m, f"ram_s{stack}_l{lane}_p{part}", write_en,
                                    self.write_data[low:low + bits],
                                    outputs[stack][low:low + bits])
        if not stacked:
            m.d.comb += self.read_data.eq(outputs[0])
        else:
            with m.Switch(stack_qq):
                for stack, data in enumerate(outputs):
                    with m.Case(stack):
                        m.d.comb += self.read_data.eq(data)
        return m

    def _add_block(self, m: Module, name: str, write_en, write_data, read_data) -> None:
        """One DP16KD: port A writes ``write_data`` where ``write_en``, port B reads into
        ``read_data`` through its output register."""
        layout = self.layout
        data = Signal(DATA_PINS, name=f"{name}_di")
        out = Signal(DATA_PINS, name=f"{name}_do")
        m.d.comb += [data.eq(write_data), read_data.eq(out[:len(read_data)])]
        write_row = self.write_addr[:layout.row_bits]
        read_row = self.read_addr[:layout.row_bits]
        byte_enable = layout.block_bits == 18  # at x18, ADx0/ADx1 enable the two 9-bit halves

        def address(port: str, row) -> dict:
            pins = {}
            for pin in range(ADDRESS_PINS):
                bit = pin - layout.low_pin
                if 0 <= bit < len(row):
                    pins[f"i_AD{port}{pin}"] = row[bit]
                else:
                    pins[f"i_AD{port}{pin}"] = 1 if byte_enable and pin < 2 else 0
            return pins

        ports = {f"i_DIA{i}": data[i] for i in range(DATA_PINS)}
        ports |= {f"i_DIB{i}": 0 for i in range(DATA_PINS)}
        ports |= {f"o_DOB{i}": out[i] for i in range(DATA_PINS)}
        ports |= address("A", write_row) | address("B", read_row)
        ports |= {f"i_CS{port}{i}": 0 for port in "AB" for i in range(3)}
        m.submodules[name] = Instance(
            "DP16KD",
            p_DATA_WIDTH_A=layout.block_bits, p_DATA_WIDTH_B=layout.block_bits,
            p_REGMODE_A="NOREG", p_REGMODE_B="OUTREG",
            p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL",
            p_CSDECODE_A="0b000", p_CSDECODE_B="0b000",
            p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC", p_GSR="DISABLED",
            i_CLKA=ClockSignal("sync"), i_CEA=1, i_OCEA=1, i_WEA=write_en, i_RSTA=0,
            i_CLKB=ClockSignal("sync"), i_CEB=1, i_OCEB=1, i_WEB=0, i_RSTB=0,
            **ports,
        )
