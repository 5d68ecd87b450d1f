"""AXI4 and AXI4-Lite signatures, the INCR burst planner and the read-channel arbiter.

Signatures are flat (one member per AXI signal, named exactly as in the AXI spec), written from
the manager's side. Amaranth flattens a port ``m_axi`` of such a signature into Verilog ports
``m_axi__araddr``, ``m_axi__rdata``, ..., which cocotbext-axi finds with
``AxiBus.from_prefix(dut, "m_axi", bus_separator="__")``.

Only the INCR burst type is used. Every burst the DMA issues starts on a bus-aligned address,
has at most ``max_burst`` beats and never crosses a 4 KiB boundary (AXI4 A3.4.1).
"""

from __future__ import annotations

import enum

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import enum as hdl_enum
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

ADDR_BITS = 32
BOUNDARY_BYTES = 4096  # an AXI burst must not cross a 4 KiB address boundary


class Burst(hdl_enum.Enum, shape=2):
    FIXED = 0
    INCR = 1
    WRAP = 2


class Response(hdl_enum.Enum, shape=2):
    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class ReadId(enum.IntEnum):
    """AXI IDs of the two read managers behind `AxiReadArbiter`; the R channel routes by them."""

    LOAD = 0
    FETCH = 1


ID_BITS = 1


def size_code(data_bits: int) -> int:
    """AxSIZE for full-width beats: log2 of the bytes per beat."""
    return (data_bits // 8).bit_length() - 1


def axi_read_members(data_bits: int, addr_bits: int = ADDR_BITS, id_bits: int = ID_BITS) -> dict:
    return {
        "arid": Out(id_bits),
        "araddr": Out(addr_bits),
        "arlen": Out(8),
        "arsize": Out(3),
        "arburst": Out(Burst),
        "arlock": Out(1),
        "arcache": Out(4),
        "arprot": Out(3),
        "arvalid": Out(1),
        "arready": In(1),
        "rid": In(id_bits),
        "rdata": In(data_bits),
        "rresp": In(Response),
        "rlast": In(1),
        "rvalid": In(1),
        "rready": Out(1),
    }


def axi_write_members(data_bits: int, addr_bits: int = ADDR_BITS, id_bits: int = ID_BITS) -> dict:
    return {
        "awid": Out(id_bits),
        "awaddr": Out(addr_bits),
        "awlen": Out(8),
        "awsize": Out(3),
        "awburst": Out(Burst),
        "awlock": Out(1),
        "awcache": Out(4),
        "awprot": Out(3),
        "awvalid": Out(1),
        "awready": In(1),
        "wdata": Out(data_bits),
        "wstrb": Out(data_bits // 8),
        "wlast": Out(1),
        "wvalid": Out(1),
        "wready": In(1),
        "bid": In(id_bits),
        "bresp": In(Response),
        "bvalid": In(1),
        "bready": Out(1),
    }


def axi_read_signature(data_bits: int) -> wiring.Signature:
    """AR and R channels of an AXI4 manager."""
    return wiring.Signature(axi_read_members(data_bits))


def axi_write_signature(data_bits: int) -> wiring.Signature:
    """AW, W and B channels of an AXI4 manager."""
    return wiring.Signature(axi_write_members(data_bits))


def axi_signature(data_bits: int) -> wiring.Signature:
    """A full AXI4 manager (all five channels)."""
    return wiring.Signature({**axi_write_members(data_bits), **axi_read_members(data_bits)})


def axi_lite_signature(addr_bits: int, data_bits: int = 32) -> wiring.Signature:
    """An AXI4-Lite manager; a register file takes it flipped (``In(...)``)."""
    return wiring.Signature(
        {
            "awaddr": Out(addr_bits),
            "awprot": Out(3),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata": Out(data_bits),
            "wstrb": Out(data_bits // 8),
            "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(Response),
            "bvalid": In(1),
            "bready": Out(1),
            "araddr": Out(addr_bits),
            "arprot": Out(3),
            "arvalid": Out(1),
            "arready": In(1),
            "rdata": In(data_bits),
            "rresp": In(Response),
            "rvalid": In(1),
            "rready": Out(1),
        }
    )


def drive_fixed_fields(m: Module, bus, prefix: str, data_bits: int) -> None:
    """Tie the per-burst constants: full-width INCR beats, normal non-cacheable data access."""
    m.d.comb += [
        getattr(bus, f"{prefix}size").eq(size_code(data_bits)),
        getattr(bus, f"{prefix}burst").eq(Burst.INCR),
        getattr(bus, f"{prefix}lock").eq(0),
        getattr(bus, f"{prefix}cache").eq(0b0011),  # normal, non-cacheable, bufferable
        getattr(bus, f"{prefix}prot").eq(0),
    ]


def plan_bursts(start: int, length: int, bus_bytes: int, max_burst: int) -> list[tuple[int, int]]:
    """Reference burst plan: ``[(aligned address, beats), ...]`` covering bytes [start, +length).

    The hardware (`BurstPlanner`) issues exactly this sequence; tests compare against it.
    """
    if length <= 0:
        return []
    address = start - start % bus_bytes
    beats = -(-(start % bus_bytes + length) // bus_bytes)
    plan = []
    while beats:
        to_boundary = (BOUNDARY_BYTES - address % BOUNDARY_BYTES) // bus_bytes
        count = min(beats, max_burst, to_boundary)
        plan.append((address, count))
        address += count * bus_bytes
        beats -= count
    return plan


class BurstPlanner:
    """Splits one transfer into INCR bursts; a helper that adds its logic to a module.

    `start(m, address, beats)` loads a bus-aligned start address and a beat count (at most
    ``max_beats``); ``address``/``beats`` then hold the next burst, ``last`` says it is the
    transfer's last, `advance(m)` moves past it, and ``empty`` says no beats are left. One burst
    per cycle at most (the address channel's rate). All four are registers: each burst's
    length is worked out in the cycle before it is offered, so no compare lies between them
    and the handshake logic.

    ``prepared`` (the ECP5 store unit): the burst after the current one (its address, 4 KiB
    distance, length limit and the beats left) is worked out into registers in the cycle after
    each load (`prepare`), and `advance` loads those, so no subtraction lies before its compare;
    ``ready`` says they hold: offer (and advance past) a burst only while ``may_offer``, i.e.
    it is the last or ``ready`` is high (a cycle after each load). ``staged_limit`` (with
    ``prepared``): the next burst's limit is registered a cycle after its distance to the
    boundary, from that register, so no subtraction precedes the limit's compare; ``ready``
    rises two cycles after each load.
    """

    def __init__(self, bus_bytes: int, max_burst: int, name: str, max_beats: int,
                 prepared: bool = False, staged_limit: bool = False) -> None:
        self.bus_bytes = bus_bytes
        self.max_burst = max_burst
        self.beat_shift = bus_bytes.bit_length() - 1
        self.page_beats = BOUNDARY_BYTES // bus_bytes
        self.next_address = Signal(ADDR_BITS, name=f"{name}_next_address")
        self.address = self.next_address
        self.remaining = Signal(range(max_beats + 1), name=f"{name}_remaining_beats")
        # beats from ``address`` to the next 4 KiB boundary
        self.to_boundary = Signal(range(self.page_beats + 1), name=f"{name}_to_boundary")
        self.beats = Signal(range(max_burst + 1), name=f"{name}_burst_beats")
        self.last = Signal(name=f"{name}_last_burst")
        self.empty = Signal(name=f"{name}_empty", init=1)
        self.prepared = prepared
        self.staged_limit = staged_limit
        if prepared:
            self.ready = Signal(name=f"{name}_next_ready")
            self._loaded = Signal(name=f"{name}_loaded")
            if staged_limit:
                self._loaded_before = Signal(name=f"{name}_loaded_before")
            self._next = (Signal(ADDR_BITS, name=f"{name}_after_address"),
                          Signal.like(self.to_boundary, name=f"{name}_after_to_boundary"),
                          Signal.like(self.remaining, name=f"{name}_after_remaining"),
                          Signal.like(self.beats, name=f"{name}_after_limit"))

    @property
    def may_offer(self):
        """``prepared``: the current burst may be offered: it is the transfer's last, or the
        burst after it is prepared, so `advance` past it loads that one."""
        return self.last | self.ready

    def limit(self, to_boundary):
        """A burst's most beats at ``to_boundary`` beats from the 4 KiB boundary."""
        return Mux(to_boundary < self.max_burst, to_boundary, self.max_burst)

    def prepare(self, m: Module) -> None:
        """``prepared``: the next burst's fields, registered in every cycle from the current
        burst's; ``ready`` rises in the cycle after a load."""
        address, to_boundary, remaining, limit = self._next
        crossed = self.to_boundary == self.beats
        after = Mux(crossed, self.page_beats, self.to_boundary - self.beats)
        m.d.sync += [
            address.eq(self.next_address + (self.beats << self.beat_shift)),
            to_boundary.eq(after),
            remaining.eq(self.remaining - self.beats),
        ]
        if self.staged_limit:  # from the distance registered a cycle before
            m.d.sync += [
                limit.eq(self.limit(to_boundary)),
                self._loaded_before.eq(self._loaded),
                self.ready.eq(~self._loaded & ~self._loaded_before),
            ]
        else:  # from the current burst's registers, beside the subtraction, not after it
            m.d.sync += [
                limit.eq(self._limit_after(crossed)),
                self.ready.eq(~self._loaded),
            ]

    def _limit_after(self, crossed):
        """The limit of the burst after the current one, when the current one is not the
        transfer's last (only then is it loaded). Such a burst is ``max_burst`` beats unless it
        reaches the boundary (``crossed``: a fresh page follows), so the distance after it is
        ``to_boundary - max_burst`` and its compare with ``max_burst`` is one on
        ``to_boundary``, a register."""
        after_full = self.to_boundary - self.max_burst
        return Mux(crossed, min(self.page_beats, self.max_burst),
                   Mux(self.to_boundary < 2 * self.max_burst, after_full, self.max_burst))

    def first_burst(self, remaining, limit):
        """The first burst of ``remaining`` beats under ``limit``: (its beats, whether it is
        the last, whether none are left), what a load registers."""
        return Mux(remaining < limit, remaining, limit), remaining <= limit, remaining == 0

    def _load(self, m: Module, address, to_boundary, remaining, limit=None, first=None) -> None:
        if limit is None:
            limit = self.limit(to_boundary)
        if first is None:
            first = self.first_burst(remaining, limit)
        if self.prepared:
            m.d.comb += self._loaded.eq(1)
        beats, last, empty = first
        m.d.sync += [
            self.next_address.eq(address),
            self.to_boundary.eq(to_boundary),
            self.remaining.eq(remaining),
            self.beats.eq(beats),
            self.last.eq(last),
            self.empty.eq(empty),
        ]

    def start(self, m: Module, address, beats, to_boundary=None, limit=None, first=None) -> None:
        """``to_boundary``, ``limit``: `beats_to_boundary` of ``address`` and its `limit` when
        the caller has them in registers already (worked out a cycle ahead), so no subtraction
        or compare precedes the burst's own; ``first``: `first_burst` of them, worked out ahead
        too (the ``ecp5`` load unit's queued plans), so no compare precedes the load."""
        if to_boundary is None:
            to_boundary = self.beats_to_boundary(address)
        self._load(m, address, to_boundary, beats, limit, first)

    def limit_at(self, address):
        """`limit` of `beats_to_boundary` of the bus-aligned ``address``, its compare made on
        the address (fewer than ``max_burst`` beats are left past ``near``) beside the
        subtraction instead of after it."""
        to_boundary = self.beats_to_boundary(address)
        near = BOUNDARY_BYTES - self.max_burst * self.bus_bytes
        if near < 0:  # no page holds a whole burst
            return to_boundary
        return Mux(address[:12] > near, to_boundary, self.max_burst)

    def beats_to_boundary(self, address):
        """Beats from the bus-aligned ``address`` to the next 4 KiB boundary."""
        to_boundary = (BOUNDARY_BYTES - address[:12]) >> self.beat_shift
        return to_boundary[: len(self.to_boundary)]

    def advance(self, m: Module) -> None:
        if self.prepared:  # past the last burst nothing is left (the registers may be stale)
            with m.If(self.last):
                m.d.sync += self.empty.eq(1)
            with m.Else():
                self._load(m, *self._next)
            return
        crossed = self.to_boundary == self.beats
        self._load(
            m,
            self.next_address + (self.beats << self.beat_shift),
            Mux(crossed, self.page_beats, self.to_boundary - self.beats),
            self.remaining - self.beats,
        )


class AxiReadArbiter(wiring.Component):
    """Two AXI4 read managers (load unit, instruction fetch) share one read channel pair.

    AR requests alternate when both wait (round robin, one per cycle); each manager drives its
    own ``arid`` (`ReadId`) and R beats go back to the manager named by ``rid``. No latency is
    added: AR and R pass through combinationally. ``registered`` (the ``ecp5`` target) queues
    each manager's AR in a two-entry FIFO instead: ``arready`` is then a register's and the
    arbitration sees registers only, one cycle later; R still passes through.
    """

    latency = 0

    def __init__(self, data_bits: int, registered: bool = False) -> None:
        self.registered = registered
        sig = axi_read_signature(data_bits)
        super().__init__({"load": In(sig), "fetch": In(sig), "bus": Out(sig)})

    def _requests(self, m: Module, managers: dict) -> dict:
        """``{ident: (arvalid, araddr, arlen, ready)}`` the arbiter chooses from; ``ready`` is
        driven with the bus's ``arready`` while that request is chosen."""
        if not self.registered:
            return {ident: (manager.arvalid, manager.araddr, manager.arlen, manager.arready)
                    for ident, manager in managers.items()}
        requests = {}
        for ident, manager in managers.items():
            ready = Signal(name=f"ar_ready_{ident.name.lower()}")
            fifo = SyncFIFO(width=len(manager.araddr) + len(manager.arlen), depth=2)
            m.submodules[f"ar_{ident.name.lower()}"] = fifo
            m.d.comb += [
                fifo.w_data.eq(Cat(manager.araddr, manager.arlen)),
                fifo.w_en.eq(manager.arvalid),
                manager.arready.eq(fifo.w_rdy),
                fifo.r_en.eq(ready),
            ]
            address = fifo.r_data[: len(manager.araddr)]
            requests[ident] = (fifo.r_rdy, address, fifo.r_data[len(manager.araddr):], ready)
        return requests

    def elaborate(self, platform) -> Module:
        m = Module()
        managers = {ReadId.LOAD: self.load, ReadId.FETCH: self.fetch}
        requests = self._requests(m, managers)
        fetch_valid, load_valid = requests[ReadId.FETCH][0], requests[ReadId.LOAD][0]
        fetch_first = Signal()
        # A granted AR stays granted until its handshake (AXI: ARVALID must not drop early).
        holding = Signal()
        held = Signal(ReadId)
        choice = Signal(ReadId)
        with m.If(holding):
            m.d.comb += choice.eq(held)
        with m.Elif(fetch_valid & (fetch_first | ~load_valid)):
            m.d.comb += choice.eq(ReadId.FETCH)
        with m.Else():
            m.d.comb += choice.eq(ReadId.LOAD)
        for ident, manager in managers.items():
            valid, address, length, ready = requests[ident]
            with m.If(choice == ident):
                m.d.comb += [
                    self.bus.arid.eq(ident),
                    self.bus.araddr.eq(address),
                    self.bus.arlen.eq(length),
                    self.bus.arsize.eq(manager.arsize),
                    self.bus.arburst.eq(manager.arburst),
                    self.bus.arlock.eq(manager.arlock),
                    self.bus.arcache.eq(manager.arcache),
                    self.bus.arprot.eq(manager.arprot),
                    self.bus.arvalid.eq(valid),
                    ready.eq(self.bus.arready),
                ]
            with m.If(self.bus.rid == ident):
                m.d.comb += [manager.rvalid.eq(self.bus.rvalid), self.bus.rready.eq(manager.rready)]
            m.d.comb += [
                manager.rid.eq(self.bus.rid),
                manager.rdata.eq(self.bus.rdata),
                manager.rresp.eq(self.bus.rresp),
                manager.rlast.eq(self.bus.rlast),
            ]
        with m.If(self.bus.arvalid & self.bus.arready):
            m.d.sync += [holding.eq(0), fetch_first.eq(choice == ReadId.LOAD)]
        with m.Elif(self.bus.arvalid):
            m.d.sync += [holding.eq(1), held.eq(choice)]
        return m


def forward(m: Module, inner, outer) -> None:
    """Wire every member of ``inner`` (a submodule's manager port) to the same-named member of
    ``outer`` (a wider manager port of the enclosing component, e.g. read channels into a full
    AXI4 port)."""
    for name, member in inner.signature.members.items():
        if member.flow == wiring.Out:
            m.d.comb += getattr(outer, name).eq(getattr(inner, name))
        else:
            m.d.comb += getattr(inner, name).eq(getattr(outer, name))
