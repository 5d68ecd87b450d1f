"""`MemorySystem`: the DRAM an accelerator is attached to, as the whole stack sees it.

The accelerator's own parameters live in `AcceleratorConfig`; the memory behind its AXI port
is not part of the design (the same RTL runs against DDR3 on an FPGA board or LPDDR4 in an
SoC), so it is a separate object passed beside the config. The simulator paces its DRAM
model with it, and the cost model, the mapper and the sweep read the same three numbers:

=================  ==========================================================================
field              meaning (units)
=================  ==========================================================================
``latency``        cycles from a read burst's address handshake to its first data beat, over
                   what an ideal memory needs (one cycle); also from a write burst's last data
                   beat to its response. Bursts are pipelined: latencies overlap.
``bandwidth``      bytes per accelerator cycle each direction (read, write) may move;
                   ``None`` is one full bus beat per cycle (the bus is the only limit).
``outstanding``    bursts per direction the memory accepts before it completes the first:
                   address handshakes not yet answered by their last R beat or their B.
                   ``None`` is no limit.
=================  ==========================================================================

All three are in accelerator clock cycles, so a preset names the clock it assumes. Presets
(`PRESETS`, ``--memory NAME``) are published DRAM figures behind a typical controller; flags
override single fields (`memory_from_options`). The default (`DEFAULT_MEMORY`, also what
``MemorySystem()`` builds) is ``ddr3``: a realistic memory, not the ideal one, so a design
is never ranked for a DRAM nobody has.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from tensorforge.errors import ConfigError


def _check_count(value: Any, what: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        limit = "0 or more" if minimum == 0 else "a positive number of"
        raise ConfigError(f"{what} must be {limit} {_UNITS[what]}, not {value!r}")


_UNITS = {"latency": "cycles", "outstanding": "bursts"}


@dataclass(frozen=True)
class MemorySystem:
    """DRAM timing in accelerator cycles (see the module docstring for the fields' meaning).

    ``MemorySystem()`` is the ``ddr3`` preset; ``MemorySystem.preset("ideal")`` the ideal one.
    """

    latency: int = 32
    bandwidth: float | None = 16.0
    outstanding: int | None = 16

    def __post_init__(self) -> None:
        _check_count(self.latency, "latency", 0)
        if self.bandwidth is not None:
            if isinstance(self.bandwidth, bool) or not isinstance(self.bandwidth, int | float) \
                    or not math.isfinite(self.bandwidth) or not self.bandwidth > 0:
                raise ConfigError(
                    f"bandwidth must be a positive number of bytes per cycle (or None for one "
                    f"bus beat per cycle), not {self.bandwidth!r}"
                )
            object.__setattr__(self, "bandwidth", float(self.bandwidth))
        if self.outstanding is not None:
            _check_count(self.outstanding, "outstanding", 1)

    @classmethod
    def preset(cls, name: str) -> MemorySystem:
        """The preset called ``name`` (`PRESETS`); a `ConfigError` listing them otherwise."""
        try:
            return PRESETS[str(name).strip().lower()]
        except KeyError:
            raise ConfigError(
                f"memory must be one of {', '.join(PRESETS)}, not {name!r}"
            ) from None

    def with_overrides(self, *, latency: int | None = None, bandwidth: float | str | None = None,
                       outstanding: int | str | None = None) -> MemorySystem:
        """This memory with the given fields replaced (``None`` keeps a field).

        ``bandwidth="bus"`` means one bus beat per cycle, ``outstanding="unlimited"`` no limit:
        the values a preset expresses as ``None``.
        """
        changes: dict[str, Any] = {}
        if latency is not None:
            changes["latency"] = latency
        if bandwidth is not None:
            changes["bandwidth"] = None if bandwidth == "bus" else bandwidth
        if outstanding is not None:
            changes["outstanding"] = None if outstanding == "unlimited" else outstanding
        return dataclasses.replace(self, **changes)

    @property
    def ideal(self) -> bool:
        """No latency, full bus rate, no limit on bursts in flight."""
        return self.latency == 0 and self.bandwidth is None and self.outstanding is None

    def beats_per_cycle(self, bus_bytes: int) -> float:
        """Bus beats per cycle each direction can move on a bus of ``bus_bytes`` (at most 1)."""
        if self.bandwidth is None:
            return 1.0
        return min(1.0, self.bandwidth / bus_bytes)

    def describe(self) -> str:
        """The preset's name, or the three values for a memory that is no preset."""
        for name, memory in PRESETS.items():
            if memory == self:
                return name
        bandwidth = "bus rate" if self.bandwidth is None else f"{self.bandwidth:g} B/cycle"
        outstanding = "unlimited" if self.outstanding is None else str(self.outstanding)
        return f"latency {self.latency} cycles, {bandwidth}, {outstanding} outstanding"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemorySystem:
        return cls(**data)


#: Named memories. Numbers are per accelerator cycle at the clock each comment states.
PRESETS: dict[str, MemorySystem] = {
    # No DRAM effects at all: what the accelerator does when memory is never the limit.
    "ideal": MemorySystem(latency=0, bandwidth=None, outstanding=None),
    # DDR3-1600 x16 (3.2 GB/s peak; JEDEC CL11 + tRCD 11 = 27.5 ns) behind an FPGA soft
    # controller and AXI interconnect, ~150 ns load-to-use, at a 200 MHz accelerator clock.
    "ddr3": MemorySystem(latency=32, bandwidth=16.0, outstanding=16),
    # LPDDR4-3200 x32 (12.8 GB/s peak) in a mobile SoC, ~120 ns load-to-use through the SoC
    # interconnect, at a 500 MHz accelerator clock with ~60% of the peak bandwidth its share.
    "lpddr4": MemorySystem(latency=64, bandwidth=16.0, outstanding=32),
    # DDR4-2400 x64 DIMM (19.2 GB/s peak) behind a server memory controller, ~90 ns loaded
    # latency, at a 1 GHz accelerator clock.
    "ddr4": MemorySystem(latency=96, bandwidth=19.2, outstanding=64),
}

#: The memory every tool assumes when none is named.
DEFAULT_MEMORY = PRESETS["ddr3"]


def memory_from_options(name: str | None = None, *, latency: int | None = None,
                        bandwidth: float | str | None = None,
                        outstanding: int | str | None = None) -> MemorySystem:
    """The preset ``name`` (default `DEFAULT_MEMORY`) with the explicit overrides applied.

    ``memory_from_options("lpddr4", latency=100)`` is LPDDR4 bandwidth and burst limit with
    100 cycles of latency; every error is a `ConfigError` naming the value.
    """
    base = DEFAULT_MEMORY if name is None else MemorySystem.preset(name)
    return base.with_overrides(latency=latency, bandwidth=bandwidth, outstanding=outstanding)
