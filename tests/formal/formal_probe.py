"""Reach the inside of an elaborated design: its FIFOs and its named internal signals.

Properties about a unit's queues and counters must name objects that `elaborate()` creates as
locals. The design is elaborated once, here, into a `Fragment`; the harness then adds that
same fragment as its submodule, so the probed objects are the ones in the checked netlist.
"""

from __future__ import annotations

from amaranth.hdl import Fragment, Signal
from amaranth.hdl._ast import SignalSet  # Signals hash by identity only inside it
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered


def _fragments(fragment: Fragment):
    yield fragment
    for child, _name, _src_loc in fragment.subfragments:
        yield from _fragments(child)


def elaborated(design) -> Fragment:
    return Fragment.get(design, platform=None)


def fifos(fragment: Fragment) -> list[SyncFIFO | SyncFIFOBuffered]:
    """Every FIFO of the design (a buffered FIFO and the plain one inside it both count)."""
    found = []
    for part in _fragments(fragment):
        found += [o for o in part.origins or () if isinstance(o, SyncFIFO | SyncFIFOBuffered)]
    return found


def signal_named(fragment: Fragment, name: str) -> Signal:
    """The one signal called ``name`` that some statement of the design drives."""
    found = SignalSet(
        signal
        for part in _fragments(fragment)
        for statements in part.statements.values()
        for statement in statements
        for signal in statement._lhs_signals()
        if signal.name == name
    )
    if len(found) != 1:
        raise LookupError(f"{len(found)} driven signals are named {name!r}, not one")
    return next(iter(found))
