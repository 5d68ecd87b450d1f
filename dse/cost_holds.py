"""Held operands in the batch cost model (`cost_model`): a mapping may hold an input
operand's tile whole along some indices (`compiler.tiling.build_tiling`'s ``holds``), e.g. a
direct convolution's weights for every output channel, so the operand is loaded once per
change of its other tile coordinates and stays resident while the loops walk the rest.

The batch model carries holds as one ``n x W`` bool matrix per input operand (A, B): True
where the mapping's operand holds the index. A held operand's buffer tile, DRAM sweep and
reload keys are those of a tile spanning the held indices whole (`held_geometry`); its
reloads follow only the indices it does not hold (`reload_uses`)."""

from __future__ import annotations

import numpy as np

from tensorforge.dse.cost_geometry import Geometry, distinct_rows


def hold_columns(space, holds, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(A, B)`` bool matrices (``n x space.dims``) of a `Mapping.holds`-style tuple,
    ``((role, (index, ...)), ...)``, applied to every row; None without holds."""
    if not holds:
        return None
    position = {name: p for p, name in enumerate(space.names)}
    held = [np.zeros((n, space.dims), dtype=bool) for _ in range(2)]
    for role, names in holds:
        if role not in ("A", "B"):
            raise ValueError(f"holds names input operands A and B, not {role!r}")
        uses = set(space.operand(role).indices)
        for name in names:
            if name not in position or position[name] not in uses:
                raise ValueError(f"operand {role} can hold only indices it uses "
                                 f"({', '.join(space.names[p] for p in sorted(uses))}), "
                                 f"not {name!r}")
            held["AB".index(role)][:, position[name]] = True
    return held[0], held[1]


def widen_held(held, width: int):
    """``held`` padded with False columns to ``width`` (`cost_rows.SpaceStack.widen`)."""
    if held is None:
        return None
    out = []
    for h in held:
        h = np.asarray(h, dtype=bool)
        out.append(np.pad(h, ((0, 0), (0, width - h.shape[1]))))
    return tuple(out)


def held_geometry(rows, tiles: np.ndarray, held: np.ndarray, g: Geometry) -> Geometry:
    """The geometry of an operand's held tiles (held indices span their whole size); ``g``
    itself where no row holds anything."""
    if not held.any():
        return g
    return Geometry(rows, np.where(held, rows.sizes, tiles))


def reload_uses(rows, held) -> list[np.ndarray] | None:
    """Per operand A, B, C the indices whose tile advance reloads it: those it uses and does
    not hold; None without holds (`cost_geometry.reload_periods` takes ``rows.uses``)."""
    if held is None:
        return None
    return [rows.uses(0) & ~held[0], rows.uses(1) & ~held[1], rows.uses(2)]


def take_held(held, rows: np.ndarray):
    return None if held is None else tuple(h[rows] for h in held)


def hold_names(names: tuple[str, ...], held_a: np.ndarray, held_b: np.ndarray) -> tuple:
    """One row's holds as `build_tiling` takes them (columns beyond ``names`` ignored)."""
    out = []
    for role, h in (("A", held_a), ("B", held_b)):
        picked = tuple(n for n, on in zip(names, h[: len(names)], strict=True) if on)
        if picked:
            out.append((role, picked))
    return tuple(out)


def hold_patterns(space, held, legal: np.ndarray) -> list[tuple[np.ndarray, tuple]]:
    """``(rows, holds)`` per distinct holds pattern among ``legal`` rows of one space, the
    holds as `build_tiling` takes them; one pattern, no holds, where ``held`` is None."""
    if held is None:
        return [(legal, ())]
    dims = space.dims
    key = np.concatenate([held[0][:, :dims], held[1][:, :dims]], axis=1)
    first, inverse = distinct_rows(key)
    return [(legal & (inverse == d), hold_names(space.names, key[f, :dims], key[f, dims:]))
            for d, f in enumerate(first)]
