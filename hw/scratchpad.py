"""The banked operand scratchpad (HASCO's addCache + partitionBanks) and its reference model.

Line ``n`` lives in bank ``n % banks`` at row ``n // banks`` (`AcceleratorConfig.bank_of`), so
consecutive lines fall in different banks and the compute unit's A and B streams can be read in
the same cycle. Each bank is a `Memory` with one read port and one write port (a simple
dual-port RAM, what FPGA block RAMs offer): the DMA's writes never conflict with reads, and the
two read ports (A, B) conflict when they address the same bank in the same cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.hw.ecp5_bram import Ecp5BlockRam
from tensorforge.hw.interconnect import delayed
from tensorforge.hw.ports import spad_read_port, spad_write_port

COUNTER_BITS = 32


def split_line(address, banks: int):
    """``(bank, row)`` of a line address: ``(line % banks, line // banks)``."""
    if banks & (banks - 1) == 0:  # a power of two: plain bit slices, no divider
        shift = banks.bit_length() - 1
        return address[:shift] if shift else 0, address[shift:]
    return address % banks, address // banks


class ReadSlot:
    """The response side of one read port: a memory read (latency 1) into a stream that may stall.

    A request is accepted only when the response slot is empty or is emptied in the same cycle
    (``can_accept``). The line read in the cycle after acceptance goes straight to ``resp``
    (``fresh``); if ``resp`` is not taken then, it is kept in ``held`` so the payload stays
    stable while the memory port serves other requests. Zero added latency, one line per cycle.
    """

    def __init__(self, port, width: int, name: str) -> None:
        self.port = port
        self.pending = Signal(name=f"{name}_pending")
        self.fresh = Signal(name=f"{name}_fresh")
        self.held = Signal(width, name=f"{name}_held")
        self.can_accept = Signal(name=f"{name}_can_accept")

    def elaborate_into(self, m: Module, fresh_data, accepted) -> None:
        resp = self.port.resp
        m.d.comb += [
            self.can_accept.eq(~self.pending | resp.ready),
            resp.valid.eq(self.pending),
            resp.payload.eq(Mux(self.fresh, fresh_data, self.held)),
        ]
        with m.If(self.fresh & ~resp.ready):
            m.d.sync += self.held.eq(fresh_data)
        m.d.sync += [
            self.pending.eq(accepted | (self.pending & ~resp.ready)),
            self.fresh.eq(accepted),
        ]


class ReadBuffer:
    """Like `ReadSlot`, but ``can_accept`` is a register, so ``req.ready`` never waits on
    ``resp.ready``.

    Up to two lines are owned (accepted, not yet taken): the one read in the cycle after its
    acceptance (``fresh``, on the memory's data port) and up to two kept in ``held`` registers
    while ``resp`` stalls; ``can_accept``: fewer than two lines owned. The consumer's stall
    logic and the bank decode feeding the block RAM's enable then stay in separate clock
    periods. Zero added latency, one line per cycle.
    """

    def __init__(self, port, width: int, name: str) -> None:
        self.port = port
        self.fresh = Signal(name=f"{name}_fresh")
        self.count = Signal(range(3), name=f"{name}_held_count")
        self.held = [Signal(width, name=f"{name}_held_{i}") for i in range(2)]
        self.can_accept = Signal(name=f"{name}_can_accept", init=1)

    def elaborate_into(self, m: Module, fresh_data, accepted) -> None:
        resp = self.port.resp
        holding = self.count != 0
        taken = resp.valid & resp.ready
        m.d.comb += [
            resp.valid.eq(self.fresh | holding),
            resp.payload.eq(Mux(holding, self.held[0], fresh_data)),
        ]
        with m.If(taken & holding):
            m.d.sync += self.held[0].eq(self.held[1])
        with m.If(self.fresh & (holding | ~resp.ready)):  # the fresh line waits its turn
            with m.If(~holding | taken):
                m.d.sync += self.held[0].eq(fresh_data)
            with m.Else():
                m.d.sync += self.held[1].eq(fresh_data)
        count = self.count + self.fresh - taken
        m.d.sync += [
            self.count.eq(count),
            self.fresh.eq(accepted),
            self.can_accept.eq(count + accepted < 2),
        ]


class RegisteredReadBuffer:
    """Like `ReadBuffer`, but the memory's data goes through a register first (the ECP5
    target): a read accepted in cycle t returns its line in cycle t+2, so no logic follows the
    block RAM's read (5.6 ns from the clock to its data at ECP5 speed 6) in the same cycle.

    ``fresh_data`` is the memory's data in the cycle after an accepted read; it is registered
    in every cycle, without an enable. Up to three lines are owned (accepted, not yet taken):
    one in the memory, one in the register and the rest in ``held``; ``can_accept`` is a
    register, high while fewer than three would be owned after this cycle, so one line per
    cycle goes through while ``resp`` is ready.

    ``held`` is a ring of three lines: the registered line is written into the slot at
    ``put`` in every cycle it is valid, whether or not it is kept (``put`` moves on only when
    it is), and ``resp`` shows the slot at ``get`` while any line is held. So a held line's
    data and enable come from registers only; the consumer's ``ready`` moves the pointers
    and the count, not the lines.

    ``stages`` = 3 (the scratchpad's ``registered_addresses``): the read address is
    registered too, so the line comes back in cycle t+3 and up to four lines are owned.

    ``blind`` (with ``stages`` = 3): ``can_accept`` is worked out as if no line were taken in
    this cycle, so it does not follow the consumer's ``resp.ready`` (which on ECP5 comes from
    deep in the compute unit); one more line of room (five) keeps a line per cycle going.

    ``counted_room`` (without ``blind``; the ECP5 accumulator): ``can_accept`` is the first
    bit of a thermometer of the room left (bit k: at most ``lines`` - 1 - k lines owned),
    shifted by a place when a line is accepted and none taken or the other way round, where
    otherwise it is summed from the count and the stages (adders on the consumer's
    ``resp.ready``). The same value, from a LUT or two.
    """

    LINES = 3  # lines owned at most, with the default two stages

    def __init__(self, port, width: int, name: str, stages: int = 2,
                 blind: bool = False, counted_room: bool = False) -> None:
        if blind and counted_room:
            raise ConfigError("a blind read buffer counts its room from the count and stages")
        self.port = port
        self.blind = blind
        self.counted_room = counted_room
        self.lines = stages + 1 + int(blind)
        # accepted and on their way: addressed (stages 3), in the memory, then in the register
        self.flight = ([Signal(name=f"{name}_addressing")] if stages == 3 else []) + [
            Signal(name=f"{name}_reading")]
        self.fresh = Signal(name=f"{name}_fresh")  # in the register
        self.data = Signal(width, name=f"{name}_data")
        self.count = Signal(range(self.lines + 1), name=f"{name}_held_count")
        self.held = [Signal(width, name=f"{name}_held_{i}") for i in range(self.lines)]
        self.put = Signal(range(self.lines), name=f"{name}_put")
        self.get = Signal(range(self.lines), name=f"{name}_get")
        self.can_accept = Signal(name=f"{name}_can_accept", init=1)
        if counted_room:  # bits 1.. of the room thermometer (bit 0 is can_accept): all set
            self.room = Signal(self.lines - 1, name=f"{name}_room",
                               init=(1 << self.lines - 1) - 1)

    def elaborate_into(self, m: Module, fresh_data, accepted, registered_data=None) -> None:
        """``registered_data``: the line already registered outside (in the cycle after
        ``fresh_data`` would be valid), used instead of registering ``fresh_data`` here."""
        resp = self.port.resp
        holding = self.count != 0
        taken = resp.valid & resp.ready
        oldest = Signal.like(self.data, name=f"{self.data.name}_oldest")
        with m.Switch(self.get):
            for i, line in enumerate(self.held):
                with m.Case(i):
                    m.d.comb += oldest.eq(line)
        m.d.comb += [
            resp.valid.eq(self.fresh | holding),
            resp.payload.eq(Mux(holding, oldest, self.data)),
        ]
        if registered_data is None:
            m.d.sync += self.data.eq(fresh_data)
        else:
            m.d.comb += self.data.eq(registered_data)

        def following(pointer):
            return Mux(pointer == self.lines - 1, 0, pointer + 1)

        for i, line in enumerate(self.held):
            with m.If(self.fresh & (self.put == i)):
                m.d.sync += line.eq(self.data)
        keep = self.fresh & (holding | ~resp.ready)  # the registered line waits its turn
        shift = taken & holding  # the oldest held line leaves
        with m.If(keep):
            m.d.sync += self.put.eq(following(self.put))
        with m.If(shift):
            m.d.sync += self.get.eq(following(self.get))
        count = self.count + keep - shift
        previous = accepted
        for stage in self.flight:  # a line moves on by a stage per cycle
            m.d.sync += stage.eq(previous)
            previous = stage
        m.d.sync += [self.count.eq(count), self.fresh.eq(self.flight[-1])]
        if self.counted_room:
            room = Cat(self.can_accept, self.room)
            with m.If(accepted & ~taken):
                m.d.sync += room.eq(Cat(room[1:], Const(0, 1)))
            with m.Elif(taken & ~accepted):
                m.d.sync += room.eq(Cat(Const(1, 1), room[:-1]))
            return
        # the lines owned after this cycle, but for the one accepted in it: ``accepted`` (the
        # bank arbitration's grant, late) picks between two compares, not feeding an adder
        owned = (self.count + self.fresh if self.blind else count) + sum(self.flight)
        m.d.sync += self.can_accept.eq(Mux(accepted, owned < self.lines - 1, owned < self.lines))


class Scratchpad(wiring.Component):
    """Banked scratchpad: two compute read ports (A, B) and one DMA write port.

    Contract: a read accepted in cycle t returns its line in cycle t+1 (``read_latency`` = 1),
    one line per port per cycle when banks do not conflict. Writes are always accepted
    (``write.req.ready`` is 1) and land at the clock edge; a read of the same line in the same
    cycle returns the old line. Each read port owns up to two lines (accepted, not yet taken:
    `ReadBuffer`); ``req.ready`` never depends on ``resp.ready``.

    Bank conflicts: in a cycle where both read ports could be accepted (valid, fewer than two
    lines owned) and address the same bank, one is held back; that cycle adds 1 to
    ``conflicts``. The port that lost the last conflict wins the next one (A wins the first), so
    neither starves. ``conflict`` is high in exactly those cycles. `ScratchpadModel` counts the
    same way.

    ``read_every_cycle`` (the ECP5 target): each bank's read port is enabled in every cycle and
    reads whatever row is presented; a port takes a bank's data only in the cycle after its
    granted read, so the responses are the same. The block RAMs' clock enables and the
    flip-flops Yosys adds on their read side then have no enable, where the grant (the bank
    decode) drove them.

    ``registered_reads`` (the ECP5 target): each bank's data is registered (no enable) before
    the bank select, and the ports answer through `RegisteredReadBuffer`: a read accepted in
    cycle t returns its line in cycle t+2 (``read_latency`` 2), one line per port per cycle
    as before. Arbitration, conflicts and write timing are unchanged.

    ``bram_output_registers`` (ECP5 only, with both flags above): each bank is an
    `Ecp5BlockRam`, whose DP16KD blocks register the read data in their own output registers
    (``OUTREG``) in place of the fabric register: the same data in the same cycles. The
    ``ecp5`` Accelerator sets it with ``registered_addresses``: alone it placed and routed
    slower (docs/ecp5_target.md), with the registered rows no scratchpad path fails at 8 ns.

    ``registered_addresses`` (ECP5 only, with ``read_every_cycle`` and ``registered_reads``):
    each bank's read row and write (row, data, byte enables) are registered before its block
    RAM, so the arbitration and the DMA's write logic end at flip-flops, not at the RAM's
    pins: a read accepted in cycle t returns its line in cycle t+3 (``read_latency`` 3), a
    write lands an edge later, and a read still sees exactly the writes accepted before it.
    Each port then owns up to five lines and its ``req.ready`` does not follow its
    ``resp.ready`` even a cycle later (`RegisteredReadBuffer` ``blind``).
    """

    read_latency = 1

    def __init__(self, config: AcceleratorConfig, read_every_cycle: bool = False,
                 registered_reads: bool = False, bram_output_registers: bool = False,
                 registered_addresses: bool = False) -> None:
        if bram_output_registers and not (read_every_cycle and registered_reads):
            raise ConfigError("bram_output_registers registers each bank's read data in its "
                              "block RAMs: it needs read_every_cycle and registered_reads")
        if registered_addresses and not (read_every_cycle and registered_reads):
            raise ConfigError("registered_addresses registers each bank's read row: it needs "
                              "read_every_cycle and registered_reads")
        self.config = config
        self.read_every_cycle = read_every_cycle
        self.registered_reads = registered_reads
        self.bram_output_registers = bram_output_registers
        self.registered_addresses = registered_addresses
        if registered_reads:  # the instance's latency, where the class gives the generic one
            self.read_latency = 3 if registered_addresses else 2
        super().__init__(
            {
                "a_read": In(spad_read_port(config)),
                "b_read": In(spad_read_port(config)),
                "write": In(spad_write_port(config)),
                "conflicts": Out(COUNTER_BITS),
                "conflict": Out(1),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        config = self.config
        banks = config.scratchpad.banks
        line_bits = config.spad_line_elems * config.precision.in_bits

        readers = {"a": self.a_read, "b": self.b_read}
        if self.registered_reads:
            stages = 3 if self.registered_addresses else 2
            slots = {name: RegisteredReadBuffer(port, line_bits, f"{name}_read", stages,
                                                blind=self.registered_addresses)
                     for name, port in readers.items()}
        else:
            slots = {name: ReadBuffer(port, line_bits, f"{name}_read")
                     for name, port in readers.items()}
        bank, row, want, grant, bank_q = {}, {}, {}, {}, {}
        for name, port in readers.items():
            bank[name], row[name] = split_line(port.req.payload, banks)
            want[name] = Signal(name=f"{name}_wants")
            grant[name] = Signal(name=f"{name}_granted")
            bank_q[name] = Signal(range(banks), name=f"{name}_bank_q")
            m.d.comb += want[name].eq(port.req.valid & slots[name].can_accept)

        b_first = Signal()  # B lost the last conflict, so it wins the next
        conflict = Signal()
        m.d.comb += [
            conflict.eq(want["a"] & want["b"] & (bank["a"] == bank["b"])),
            grant["a"].eq(want["a"] & ~(conflict & b_first)),
            grant["b"].eq(want["b"] & ~(conflict & ~b_first)),
            self.conflict.eq(conflict),
            self.a_read.req.ready.eq(grant["a"]),
            self.b_read.req.ready.eq(grant["b"]),
        ]
        with m.If(conflict):
            m.d.sync += [b_first.eq(grant["a"]), self.conflicts.eq(self.conflicts + 1)]

        write = self.write.req
        write_bank, write_row = split_line(write.payload.addr, banks)
        write_data = write.payload.data
        m.d.comb += write.ready.eq(1)
        if self.registered_addresses:
            write_row = delayed(m, write_row, 1, "write_row")
            write_data = delayed(m, write_data, 1, "write_data")

        read_data, registered_data = [], []
        for index in range(banks):
            a_here = grant["a"] & (bank["a"] == index)
            b_here = grant["b"] & (bank["b"] == index)
            read_row = Mux(a_here, row["a"], row["b"])
            write_en = Mux(write.valid & (write_bank == index), write.payload.mask, 0)
            if self.registered_addresses:
                read_row = delayed(m, read_row, 1, f"bank{index}_read_row")
                write_en = delayed(m, write_en, 1, f"bank{index}_write_en")
            if self.bram_output_registers:
                ram = Ecp5BlockRam(config.bank_depth, line_bits, config.precision.in_bits)
                m.submodules[f"bank{index}"] = ram
                m.d.comb += [ram.read_addr.eq(read_row), ram.write_addr.eq(write_row),
                             ram.write_data.eq(write_data), ram.write_en.eq(write_en)]
                registered_data.append(ram.read_data)
                continue
            memory = Memory(shape=unsigned(line_bits), depth=config.bank_depth, init=[])
            m.submodules[f"bank{index}"] = memory
            read_port = memory.read_port(transparent_for=())
            write_port = memory.write_port(granularity=config.precision.in_bits)
            m.d.comb += [
                read_port.en.eq(1 if self.read_every_cycle else a_here | b_here),
                read_port.addr.eq(read_row),
                write_port.addr.eq(write_row),
                write_port.data.eq(write_data),
                write_port.en.eq(write_en),
            ]
            read_data.append(read_port.data)
            if self.registered_reads:
                registered = Signal(line_bits, name=f"bank{index}_read_q")
                m.d.sync += registered.eq(read_port.data)
                registered_data.append(registered)

        for name, slot in slots.items():
            with m.If(grant[name]):
                m.d.sync += bank_q[name].eq(bank[name])
            fresh = None  # with bram_output_registers the banks show only registered data
            if read_data:
                fresh = Signal(line_bits, name=f"{name}_fresh_line")
                with m.Switch(bank_q[name]):
                    for index, data in enumerate(read_data):
                        with m.Case(index):
                            m.d.comb += fresh.eq(data)
            if not self.registered_reads:
                slot.elaborate_into(m, fresh, grant[name])
                continue
            # the bank of the line now in the data registers: a cycle behind ``bank_q`` per
            # stage the line spends in flight after it
            bank_late = delayed(m, bank_q[name], len(slot.flight), f"{name}_bank")
            late = Signal(line_bits, name=f"{name}_late_line")
            with m.Switch(bank_late):
                for index, data in enumerate(registered_data):
                    with m.Case(index):
                        m.d.comb += late.eq(data)
            slot.elaborate_into(m, fresh, grant[name], registered_data=late)
        return m


@dataclass
class _ModelSlot:
    lines: list[tuple[int, ...]] = field(default_factory=list)  # owned: read, not yet taken


@dataclass
class ScratchpadModel:
    """Cycle-level reference of `Scratchpad`: the same arbitration, responses and conflict count.

    Each cycle: read the combinational outputs with `ready` (given this cycle's inputs), then
    call `clock` with the same inputs. Lines are tuples of ``elems`` integers (any encoding;
    the model stores what is written, element by element under the mask).
    """

    banks: int
    lines: int
    elems: int
    memory: list[list[int]] = field(init=False)
    b_first: bool = False
    conflicts: int = 0
    slots: dict[str, _ModelSlot] = field(init=False)

    def __post_init__(self) -> None:
        self.memory = [[0] * self.elems for _ in range(self.lines)]
        self.slots = {"a": _ModelSlot(), "b": _ModelSlot()}

    def response(self, port: str) -> tuple[bool, tuple[int, ...]]:
        lines = self.slots[port].lines
        return bool(lines), lines[0] if lines else ()

    def ready(self, requests: dict[str, int | None], resp_ready: dict[str, bool]) -> dict:
        """``{port: accepted}`` for requests ``{port: line or None}`` this cycle."""
        want = {
            port: line is not None and len(self.slots[port].lines) < 2
            for port, line in requests.items()
        }
        conflict = (
            want["a"] and want["b"] and requests["a"] % self.banks == requests["b"] % self.banks
        )
        return {
            "a": want["a"] and not (conflict and self.b_first),
            "b": want["b"] and not (conflict and not self.b_first),
            "conflict": conflict,
        }

    def clock(
        self,
        requests: dict[str, int | None],
        resp_ready: dict[str, bool],
        write: tuple[int, list[int], int] | None = None,
    ) -> None:
        """Advance one cycle; ``write`` is ``(line, elements, mask)`` or None."""
        granted = self.ready(requests, resp_ready)
        if granted["conflict"]:
            self.conflicts += 1
            self.b_first = granted["a"]
        for port in ("a", "b"):
            lines = self.slots[port].lines
            if lines and resp_ready[port]:
                lines.pop(0)
            if granted[port]:
                lines.append(tuple(self.memory[requests[port]]))
        if write is not None:
            line, elements, mask = write
            for index in range(self.elems):
                if mask >> index & 1:
                    self.memory[line][index] = elements[index]


class ScratchpadTraffic:
    """Seeded random stimulus for `Scratchpad` testbenches, obeying the stream rules.

    A request stays presented until accepted; new ones come with probability ``busy``, and the
    B port aims at A's bank with probability ``clash`` so conflicts are frequent. Response
    ``ready`` and writes (random lines, elements and masks) are random every cycle.
    """

    def __init__(
        self,
        rng,
        lines: int,
        elems: int,
        in_bits: int,
        banks: int,
        busy: float = 0.8,
        clash: float = 0.4,
    ) -> None:
        self.rng, self.lines, self.elems, self.banks = rng, lines, elems, banks
        self.low, self.high = -(1 << (in_bits - 1)), 1 << (in_bits - 1)
        self.busy, self.clash = busy, clash
        self.requests: dict[str, int | None] = {"a": None, "b": None}
        self.resp_ready = {"a": True, "b": True}
        self.write: tuple[int, list[int], int] | None = None
        self.advance({"a": False, "b": False})

    def _line_in_bank(self, bank: int) -> int:
        rows = (self.lines - 1 - bank) // self.banks + 1
        return bank + self.banks * int(self.rng.integers(0, rows))

    def advance(self, accepted: dict[str, bool]) -> None:
        """Drop what was accepted this cycle and draw the next cycle's inputs."""
        rng = self.rng
        for port in ("a", "b"):
            if accepted[port]:
                self.requests[port] = None
            if self.requests[port] is None and rng.random() < self.busy:
                other = self.requests["a" if port == "b" else "b"]
                if other is not None and rng.random() < self.clash:
                    self.requests[port] = self._line_in_bank(other % self.banks)
                else:
                    self.requests[port] = int(rng.integers(0, self.lines))
            self.resp_ready[port] = bool(rng.random() < 0.75)
        self.write = None
        if rng.random() < 0.5:
            elements = [int(v) for v in rng.integers(self.low, self.high, self.elems)]
            mask = int(rng.integers(0, 1 << self.elems))
            self.write = (int(rng.integers(0, self.lines)), elements, mask)
