"""Whether a packed design fits its ECP5 part, read from nextpnr's log as it runs.

nextpnr-ecp5 prints the device utilisation right after packing and then lets its placer try
for minutes even when a resource is over 100% (a 16x16 accelerator on the LFE5U-85F: 87,094
TRELLIS_COMB of 83,640, then "Unable to find legal placement" three and a half minutes later).
`FitCheck` follows the log (`tensorforge.fpga.tools.run_tool`'s ``watch``) and stops the run
as soon as that block shows a resource over the part, with a `DesignDoesNotFit` that says
by how much and what to change. The same inputs always pack the same way, so the outcome is
a result like a report: `tensorforge.fpga.cache.cached_synthesis` stores it, and asking
again answers at once.
"""

from __future__ import annotations

import re
from typing import Any, Self

from tensorforge.errors import ConfigError
from tensorforge.fpga.cache import StoredFailure

#: One resource line of nextpnr's "Device utilisation:" block: ``NAME: used/ available pct%``.
_RESOURCE = re.compile(r"^Info:\s+(?P<cell>\w+):\s+(?P<used>\d+)/\s*(?P<available>\d+)\s+\d+%",
                       re.M)
_BLOCK = "Device utilisation:"

#: What each resource is, for the message.
RESOURCE_NAMES = {
    "TRELLIS_COMB": "LUT4 sites (logic LUTs, two per carry cell, LUT RAM)",
    "TRELLIS_FF": "flip-flops",
    "TRELLIS_RAMW": "LUT RAM write ports",
    "MULT18X18D": "18x18 DSP multipliers",
    "DP16KD": "18 Kib block RAMs",
    "TRELLIS_IO": "I/O pins",
}


def device_utilisation(log: str) -> dict[str, tuple[int, int]] | None:
    """``{cell: (used, available)}`` of the first complete "Device utilisation" block in a
    nextpnr-ecp5 log (it ends at a blank line), or None while the log has none yet."""
    start = log.find(_BLOCK)
    if start < 0:
        return None
    end = log.find("\n\n", start)
    if end < 0:
        return None
    return {match["cell"]: (int(match["used"]), int(match["available"]))
            for match in _RESOURCE.finditer(log[start:end])}


class DesignDoesNotFit(StoredFailure, ConfigError):
    """A design that needs more of some resource than its ECP5 part has (after packing).

    ``over`` maps each such nextpnr cell type to (used, available); ``lut_multipliers``
    multipliers were built from LUTs because the part's DSPs ran out.
    """

    def __init__(self, part: str, over: dict[str, tuple[int, int]], *,
                 lut_multipliers: int = 0, stored: bool = False) -> None:
        self.part, self.over = part, dict(over)
        self.lut_multipliers, self.stored = lut_multipliers, stored
        super().__init__(self._message())

    def summary(self) -> str:
        """One line: what is over, by how much (the synthesis table's note)."""
        needs = "; ".join(f"{cell} {used:,} of {available:,} ({100 * used / available:.0f}%)"
                          for cell, (used, available) in self.over.items())
        line = f"does not fit {self.part}: {needs}"
        if self.lut_multipliers:
            line += (f"; {self.lut_multipliers} multipliers built from LUTs, the part's DSPs "
                     "all taken")
        return line

    def _message(self) -> str:
        resources = ", ".join(RESOURCE_NAMES.get(cell, cell) for cell in self.over)
        if set(self.over) == {"TRELLIS_IO"}:
            advice = ("A block rather than a chip's top level is synthesized out of context "
                      "(--out-of-context), where its ports need no pins")
        else:
            advice = "Build a smaller array (--pe) or smaller memories"
            if not self.part.upper().endswith("85F"):
                advice += ", or target a larger part (--part LFE5U-85F)"
            if self.lut_multipliers:
                advice += "; the multipliers beyond the DSPs cost the most LUTs"
        again = (" (stored from an earlier run of these inputs; --no-cache runs nextpnr again)"
                 if self.stored else "")
        return (f"after packing, the design {self.summary()}: it needs more {resources} than "
                f"the part has, so nextpnr cannot place it. {advice}.{again}")

    def to_payload(self) -> dict[str, Any]:
        return {"part": self.part, "over": {cell: list(pair) for cell, pair in self.over.items()},
                "lut_multipliers": self.lut_multipliers}

    @classmethod
    def from_payload(cls, payload: dict[str, Any], *, stored: bool = True) -> Self:
        return cls(payload["part"], {cell: (int(used), int(available))
                                     for cell, (used, available) in payload["over"].items()},
                   lut_multipliers=payload.get("lut_multipliers", 0), stored=stored)


class FitCheck:
    """A `run_tool` log watch for nextpnr-ecp5: raises `DesignDoesNotFit` once the log's
    device utilisation shows a resource over ``part``'s, and reads nothing after that block."""

    def __init__(self, part: str, *, lut_multipliers: int = 0) -> None:
        self.part, self.lut_multipliers = part, lut_multipliers
        self._text: str | None = ""  # None once the block has been read

    def __call__(self, new_text: str) -> None:
        if self._text is None:
            return
        self._text += new_text
        utilisation = device_utilisation(self._text)
        if utilisation is None:
            return
        self._text = None
        over = {cell: (used, available) for cell, (used, available) in utilisation.items()
                if used > available}
        if over:
            raise DesignDoesNotFit(self.part, over, lut_multipliers=self.lut_multipliers)
