"""Choosing foundry SRAM macros for a memory, as a memory-mapping step of a real flow does.

A technology offers a fixed catalogue of macros (`MacroType`: words x bits, one or two ports,
with or without per-bit write masks). A memory of the design (`MemoryRequest`) is built from
an array of one macro type (`MacroArray`): ``cols`` macros side by side when its line is wider
than the macro, ``rows`` of them stacked when it is deeper (the high address bits select the
row), and one ``copy`` of the whole array per read port when it has more read ports than a
macro, every copy written by the one write port. The macro type whose array has the smallest
area wins (fewer macros, then lower leakage, break ties).

A one-port macro serves a memory whose read and write port share one address (a single-port
RAM); every other memory needs a port to write and one to read in the same cycle, so it gets
two-port macros. A macro without write masks serves a memory only where the bits it holds are
all enabled by the same signal. Flip-flops stay where no macro can serve the memory
(asynchronous reads, several write ports) and where they are smaller than the best array
(tiny register files), estimated as a flip-flop plus a load-enable multiplexer per bit and a
``words``-to-one multiplexer tree per read port and bit. `pick` says which and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tensorforge.errors import ConfigError


@dataclass(frozen=True)
class MacroType:
    """One macro of the catalogue, with the figures its Liberty file gives (um^2, nW, ns, pJ)."""

    cell: str
    words: int
    bits: int
    ports: int  # 1: one read-or-write port; 2: two ports (one writes while the other reads)
    bit_mask: bool
    area_um2: float
    leakage_nw: float = 0.0
    access_ns: float = 0.0
    read_pj: float = 0.0
    write_pj: float = 0.0

    @property
    def address_bits(self) -> int:
        return max(1, (self.words - 1).bit_length())


@dataclass(frozen=True)
class MemoryRequest:
    """What a memory of the design needs.

    ``enable_groups`` numbers the signal behind each write-enable bit (equal numbers: the same
    signal); empty means unknown, taken as a different signal for every bit.
    """

    words: int
    bits: int
    read_ports: int = 1
    write_ports: int = 1
    shared_address: bool = False
    synchronous_read: bool = True
    enable_groups: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("words", "bits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"memory {name} must be a positive integer, not {value!r}")
        if self.enable_groups and len(self.enable_groups) != self.bits:
            raise ConfigError(f"enable_groups must name one signal per bit ({self.bits}), "
                              f"not {len(self.enable_groups)}")

    @property
    def macro_ports(self) -> int:
        """Ports each macro needs: one for a single-port memory, else one write + one read."""
        return 1 if self.shared_address and self.read_ports == 1 else 2

    @property
    def copies(self) -> int:
        return 1 if self.macro_ports == 1 else self.read_ports

    def uniform_enables(self, width: int) -> bool:
        """Whether every ``width``-bit slice of the line is written by one enable signal."""
        if not self.enable_groups:
            return width == 1
        return all(len(set(self.enable_groups[start:start + width])) == 1
                   for start in range(0, self.bits, width))


@dataclass(frozen=True)
class MacroArray:
    macro: MacroType
    rows: int
    cols: int
    copies: int

    @property
    def count(self) -> int:
        return self.rows * self.cols * self.copies

    @property
    def area_um2(self) -> float:
        return self.count * self.macro.area_um2

    @property
    def leakage_nw(self) -> float:
        return self.count * self.macro.leakage_nw

    def describe(self) -> str:
        return (f"{self.count} x {self.macro.cell} ({self.rows} row(s) x {self.cols} "
                f"column(s) x {self.copies} cop{'y' if self.copies == 1 else 'ies'})")


@dataclass(frozen=True)
class FlopCost:
    """Area per bit of a memory built from flip-flops: storage and one read-mux input."""

    storage_bit_um2: float  # a flip-flop plus its load-enable multiplexer
    mux_um2: float  # one 2:1 multiplexer of the read trees

    def area_um2(self, request: MemoryRequest) -> float:
        storage = request.words * request.bits * self.storage_bit_um2
        trees = request.read_ports * request.bits * (request.words - 1) * self.mux_um2
        return storage + trees


@dataclass(frozen=True)
class MemoryChoice:
    """What a memory becomes: ``array`` of macros, or flip-flops when ``array`` is None."""

    request: MemoryRequest
    array: MacroArray | None
    flop_area_um2: float
    reason: str

    @property
    def kind(self) -> str:
        return "macros" if self.array is not None else "flops"


def arrays(request: MemoryRequest, catalogue: list[MacroType]) -> list[MacroArray]:
    """Every macro array that can hold ``request``, best first."""
    fits = []
    for macro in catalogue:
        if macro.ports != request.macro_ports:
            continue
        if not macro.bit_mask and not request.uniform_enables(macro.bits):
            continue
        fits.append(MacroArray(macro, rows=math.ceil(request.words / macro.words),
                               cols=math.ceil(request.bits / macro.bits),
                               copies=request.copies))
    return sorted(fits, key=lambda a: (a.area_um2, a.count, a.leakage_nw, a.macro.cell))


def pick(request: MemoryRequest, catalogue: list[MacroType], flops: FlopCost) -> MemoryChoice:
    """The macro array for ``request``, or flip-flops, with the reason."""
    flop_area = flops.area_um2(request)

    def in_flops(reason: str) -> MemoryChoice:
        return MemoryChoice(request, None, flop_area, reason)

    if not request.synchronous_read:
        return in_flops("an asynchronous read port (SRAM macros read on a clock edge)")
    if request.write_ports != 1 or request.read_ports < 1:
        return in_flops(f"{request.read_ports} read and {request.write_ports} write ports "
                        f"(macro arrays take one write port and at least one read port)")
    candidates = arrays(request, catalogue)
    if not candidates:
        mask = "" if request.uniform_enables(request.bits) else " with per-bit write masks"
        return in_flops(f"no {request.macro_ports}-port macro{mask} in the catalogue")
    best = candidates[0]
    if flop_area < best.area_um2:
        return in_flops(f"flip-flops ({flop_area:.0f} um^2) are smaller than the best macro "
                        f"array, {best.describe()} ({best.area_um2:.0f} um^2)")
    return MemoryChoice(request, best, flop_area,
                        f"{best.describe()}: {best.area_um2:.0f} um^2 against "
                        f"{flop_area:.0f} um^2 in flip-flops")
