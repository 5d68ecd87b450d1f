"""The batch cost model's unit timeline: the load, compute and store units running a program's
tile steps (or chunks of them) in order, vectorized over a batch of mappings.

It exists apart from the steps it runs (`cost_boundary` lays them out) because it models one
thing, the controller (`hw.controller`) that runs what `compiler.codegen` emits:

* **dispatch back-pressure**: the controller dispatches the program in order into one queue
  per unit (``controller.queue_depth`` deep) and a unit's gate holds one more while the unit
  runs, so an instruction enters its queue only once the instruction ``window`` places
  before it on the same unit has finished. A step with more STOREs than the window holds
  stops dispatch until its STOREs are under way, and with them everything behind it in the
  program: the next step's LOADs and COMPUTEs (`pressure`).

`timeline` runs the resulting group-level recurrence (a max-plus recurrence of start and
end times per unit, one iteration per tile step or chunk, not per instruction).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Groups:
    """Tile steps or chunks of the program in program order, each field a ``groups x n``
    array (a row per group, a column per mapping): a stacked form, so that building them
    and `timeline`'s set-up take a few numpy calls, not a few per group.

    ``loads``, ``computes``, ``stores`` count instructions (0: the unit has nothing in that
    group); ``reloads`` (``groups x n x 2``) marks A/B loads into the other half of their
    double buffer (they wait for the compute that last read that half); ``new_c`` marks the
    first compute of a C tile (it waits for the store of the tile two before, the other
    half); ``ends_c`` the group whose store completes a C tile. A group that is empty for a
    mapping changes nothing in `timeline` for it.
    """

    load: np.ndarray
    loads: np.ndarray
    compute: np.ndarray
    computes: np.ndarray
    store: np.ndarray
    stores: np.ndarray
    reloads: np.ndarray
    new_c: np.ndarray
    ends_c: np.ndarray

    def __len__(self) -> int:
        return len(self.load)

    def _fields(self) -> list[np.ndarray]:
        return [getattr(self, name) for name in self.__dataclass_fields__]

    @staticmethod
    def chain(parts: list[Groups]) -> Groups:
        """The groups of ``parts`` one after the other (same mappings)."""
        return Groups(*(np.concatenate(f) for f in zip(*(p._fields() for p in parts), strict=True)))


def pressure(cycles: np.ndarray, count: np.ndarray, window: int) -> np.ndarray:
    """Cycles from a unit's first instruction of a group until dispatch can move past its
    last one: that instruction enters the queue when the one ``window`` before it ends
    (instructions of a group taken as equally long)."""
    return np.maximum(count - window, 0) * cycles / np.maximum(count, 1)


def timeline(groups: Groups, window: int, gate: float, fetch: float,
             latency: float = 0.0) -> np.ndarray:
    """Cycles until the last unit finishes, running ``groups`` in program order.

    Per group: its LOADs start when the load unit is free, dispatch has reached them and the
    buffer half they overwrite is no longer read; its COMPUTEs when they are loaded, the
    compute unit is free, dispatch has reached them (and a new C tile's half is stored);
    its STOREs when computed and the store unit is free. Dispatch moves past a unit's part
    of a group with more instructions than the ``window`` only ``pressure`` cycles after
    that part starts (and holds everything behind it). The load and store units' gates
    hand them a command only ``gate`` cycles after they go idle (the compute unit's gate
    takes its next command while it runs: no gap). Fetch brings the program one instruction
    per ``fetch`` cycles, so a unit's part of a group starts no earlier than its first
    instruction is fetched, ends no earlier than its last one is fetched and run, and
    dispatch moves past it no earlier than all of it is fetched. A LOAD's data arrives
    ``latency`` cycles after its unit has streamed it (the unit goes on meanwhile), and the
    program ends ``latency`` after its last STORE's data left (its response).

    Times are never negative, so a wait that no mapping of a group has (no reload, no new
    C tile, no unit's part) is left out of its maximum instead of taken as 0.
    """
    n = groups.load.shape[1]
    zero = np.zeros(n)
    load_end, compute_end, store_end, dispatch, loaded = zero, zero, zero, zero, zero
    half_free = np.zeros((n, 2))  # per operand: end of the compute that last read the other half
    c_stores = [zero, zero]  # store ends of the last two C tiles, older first
    loads = _Unit(groups.load + gate * groups.loads, groups.loads, window, fetch)
    computes = _Unit(groups.compute, groups.computes, window, fetch)
    stores = _Unit(groups.store + gate * groups.stores, groups.stores, window, fetch)
    reloading = groups.reloads.any(axis=(1, 2))
    new_c, ends_c = groups.new_c.any(axis=1), groups.ends_c.any(axis=1)
    for i in range(len(groups)):
        if reloading[i]:
            reloads = groups.reloads[i]
            wait = np.maximum(np.where(reloads[:, 0], half_free[:, 0], 0.0),
                              np.where(reloads[:, 1], half_free[:, 1], 0.0))
            half_free = np.where(reloads, compute_end[:, None], half_free)
        if loads.some[i]:
            start = _latest(load_end, dispatch + fetch, *([wait] if reloading[i] else []))
            load_end, dispatch = loads.run(i, start, load_end, dispatch)
            loaded = np.where(loads.present[i], load_end + latency, loaded)
        if computes.some[i]:
            waits = [np.where(groups.new_c[i], c_stores[0], 0.0)] if new_c[i] else []
            start = _latest(compute_end, loaded, dispatch + fetch, *waits)
            compute_end, dispatch = computes.run(i, start, compute_end, dispatch)
        if stores.some[i]:
            start = _latest(store_end, compute_end, dispatch + fetch)
            store_end, dispatch = stores.run(i, start, store_end, dispatch)
        if ends_c[i]:
            c_stores = [np.where(groups.ends_c[i], c_stores[1], c_stores[0]),
                        np.where(groups.ends_c[i], store_end, c_stores[1])]
    return _latest(load_end, compute_end, np.where(store_end > 0, store_end + latency, 0.0))


def _latest(*times: np.ndarray) -> np.ndarray:
    """Elementwise maximum of ``times`` (pairwise: no stacked copy in the hot loop)."""
    return functools.reduce(np.maximum, times)


class _Unit:
    """One unit's part of every group (``groups x n``: ``cycles`` in all, ``count``
    instructions), with what does not depend on when it starts worked out for all groups
    at once, outside `timeline`'s recurrence."""

    def __init__(self, cycles: np.ndarray, count: np.ndarray, window: int, fetch: float
                 ) -> None:
        self.cycles, self.present = cycles, count > 0
        self.some = self.present.any(axis=1)
        self.fetch = count * fetch
        self.mean = cycles / np.maximum(count, 1)
        self.over = count > window
        self.held = self.over.any(axis=1)
        self.pressure = pressure(cycles, count, window)

    def run(self, i: int, start: np.ndarray, end: np.ndarray, dispatch: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
        """Group ``i``'s part from ``start`` (some mapping has one): its end and where
        dispatch stands after it (unchanged where it is not present). Dispatch moves on
        once the part is fetched, and where it has more instructions than the window only
        ``pressure`` after it starts."""
        fetched = dispatch + self.fetch[i]
        finish = np.maximum(start + self.cycles[i], fetched + self.mean[i])
        moved = fetched  # dispatch never falls below 0, so max(fetched, 0.0) is fetched
        if self.held[i]:
            moved = np.maximum(fetched, np.where(self.over[i], start + self.pressure[i], 0.0))
        present = self.present[i]
        return np.where(present, finish, end), np.where(present, moved, dispatch)

