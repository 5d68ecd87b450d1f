"""The batch cost model's periodic overlap: what the tile steps between a program's boundary
steps cost while the load, compute and store units overlap, summed without enumerating them.

It exists apart from the boundary steps (`cost_boundary`, run by `cost_timeline`) because
long programs spend most of their steps here, and the sum is exact in closed form: the
event streams of the middle steps are periodic with nested periods (suffix products of the
loop counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorforge.dse.cost_timeline import pressure


@dataclass(frozen=True)
class Periodic:
    """Per mapping: mean time of one compute step, of one A / B load and one C store (each
    with the gate's gaps), how many of each event the overlap pairs with the steps, the
    dispatch pressure of a step's COMPUTEs and STOREs, and the fetch time of each event's
    instructions (compute, load A, load B, store)."""

    compute: np.ndarray
    loads: list[np.ndarray]
    load_events: list[np.ndarray]
    store: np.ndarray
    store_events: np.ndarray
    compute_pressure: np.ndarray
    store_pressure: np.ndarray
    fetch: list[np.ndarray]

    def take(self, rows: np.ndarray) -> Periodic:
        return Periodic(*([v[rows] for v in f] if isinstance(f, list) else f[rows]
                          for f in self._fields()))

    @staticmethod
    def concat(parts: list[Periodic]) -> Periodic:
        """The mappings of ``parts`` one after the other."""
        if len(parts) == 1:
            return parts[0]
        return Periodic(*([np.concatenate(v) for v in zip(*f, strict=True)]
                          if isinstance(f[0], list) else np.concatenate(f)
                          for f in zip(*(p._fields() for p in parts), strict=True)))

    def _fields(self) -> list:
        return [getattr(self, name) for name in self.__dataclass_fields__]


def periodic_overlap(steps: np.ndarray, t: Periodic) -> np.ndarray:
    """Sum over tile steps of max(compute, this step's loads, this step's store, the
    dispatch chain, the fetch of the step's instructions): dispatch reaches the next step's
    LOADs only ``compute_pressure`` after this step's COMPUTEs start and ``store_pressure``
    after its STOREs start (which wait for its COMPUTEs), so a step costs at least that plus
    those LOADs (`cost_timeline.pressure`); and fetch brings one instruction at a time.

    Event streams have nested periods, so sorting them by frequency, the steps with the j most
    frequent events are ``events[j-1] - events[j]`` (``events[-1]`` = all steps).
    """
    n, compute = len(steps), t.compute
    events = np.stack([*t.load_events, t.store_events], axis=1).astype(float)
    costs = np.stack([*t.loads, np.zeros(n)], axis=1)
    fetches = np.stack(t.fetch[1:], axis=1)
    is_store = np.array([0.0, 0.0, 1.0])
    rank = np.argsort(-events, axis=1, kind="stable")
    events = np.take_along_axis(events, rank, axis=1)
    costs = np.take_along_axis(costs, rank, axis=1)
    fetch = t.fetch[0][:, None] + np.cumsum(np.take_along_axis(fetches, rank, axis=1), axis=1)
    stores = is_store[rank] * t.store[:, None]
    load_sum = np.cumsum(costs, axis=1)
    store_max = np.maximum.accumulate(stores, axis=1)
    held = (store_max > 0) & (t.store_pressure > 0)[:, None]  # more STOREs than the window
    chain = np.maximum(t.compute_pressure[:, None] + load_sum, np.where(
        held, (compute + t.store_pressure)[:, None] + load_sum, 0.0))
    bounds = np.concatenate([steps[:, None].astype(float), events, np.zeros((n, 1))], axis=1)
    total = (bounds[:, 0] - bounds[:, 1]) * np.maximum(compute, t.fetch[0])
    for j in range(3):
        share = bounds[:, j + 1] - bounds[:, j + 2]
        total += share * np.maximum.reduce([np.broadcast_to(compute, share.shape),
                                            load_sum[:, j], store_max[:, j], chain[:, j],
                                            fetch[:, j]])
    return total


def store_pressure(store_time: np.ndarray, store_instructions: np.ndarray, window: int,
                   held) -> np.ndarray:
    """`cost_timeline.pressure` of a step's STOREs; none in a held operand's program, whose
    STOREs dispatch after the next step's COMPUTEs and LOADs (`tile_walk.TileWalker._pipelined`)."""
    out = pressure(store_time, store_instructions, window)
    if held is None:
        return out
    return np.where(held[0].any(axis=1) | held[1].any(axis=1), 0.0, out)
