"""Where each operand lives in DRAM, and how the host puts it there.

The device addresses DRAM affinely: a LOAD row starts at ``base + offset(indices)`` and walks
``row_len`` consecutive elements, so for each operand the compiler needs, per workload index, a
DRAM *element stride*. Two host-side arrangements provide one:

``dense``
    The tensor itself, zero-padded on every side the access reaches past it (convolution
    padding, so the device never reads outside the tensor), with its dimensions permuted so the
    dimension that runs along a scratchpad line is innermost: each intrinsic line is then one
    contiguous burst. No data is duplicated. An affine access ``A[c, 2*x+r, y+s]`` gives
    index strides by the chain rule (``x`` has twice the stride of the second dimension).
``gather``
    The access materialized over its own indices, ``G[i1, i2, ...] = A[dims(i1, i2, ...)]``
    (zeros outside the tensor), in a chosen index order. This is im2col generalized: it
    duplicates data where the access overlaps itself, and is used when ``dense`` cannot give
    the line index a unit stride (a strided or repeated line index, a negative stride).

The output is always ``dense`` and unpadded, written by STOREs as ``acc_bits`` integers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.workload import Access
from tensorforge.errors import MappingError

ALIGN = 64  # bytes; every region starts on a bus-friendly boundary


@dataclass(frozen=True)
class DramLayout:
    """One tensor's region of DRAM.

    ``order`` lists the array dimensions outermost first: tensor dimension numbers for
    ``dense``, index names for ``gather``. ``low`` is, per tensor dimension (``dense`` only),
    the coordinate stored at position 0 (negative where the tensor is padded before), and
    ``extents`` the stored extent of each array dimension in ``order``.
    """

    tensor: str
    kind: str  # "dense" or "gather"
    base: int
    elem_bytes: int
    order: tuple[int | str, ...]
    extents: tuple[int, ...]
    low: tuple[int, ...] = ()

    @property
    def elements(self) -> int:
        return math.prod(self.extents)

    @property
    def nbytes(self) -> int:
        return self.elements * self.elem_bytes

    @property
    def end(self) -> int:
        return self.base + self.nbytes

    def describe(self) -> str:
        dims = ",".join(
            f"{d}:{e}" if self.kind == "gather" else f"d{d}:{e}"
            for d, e in zip(self.order, self.extents, strict=True)
        )
        pads = f" low={list(self.low)}" if any(self.low) else ""
        return (
            f"{self.tensor}: {self.kind}[{dims}]{pads} int{8 * self.elem_bytes} "
            f"@0x{self.base:x}..0x{self.end:x}"
        )

    def _dim_strides(self) -> list[int]:
        strides, step = [0] * len(self.extents), 1
        for position in reversed(range(len(self.extents))):
            strides[position] = step
            step *= self.extents[position]
        return strides

    def index_strides(self, access: Access) -> tuple[int, dict[str, int]]:
        """``(offset, {index: stride})`` in elements: where ``access`` reads for each index."""
        strides = dict.fromkeys(access.indices, 0)
        steps = self._dim_strides()
        if self.kind == "gather":
            return 0, {name: steps[self.order.index(name)] for name in access.indices}
        offset = 0
        for position, dim in enumerate(self.order):
            expr = access.dims[dim]
            offset += (expr.constant - self.low[dim]) * steps[position]
            for name, coef in expr.terms:
                strides[name] += coef * steps[position]
        return offset, strides

    def to_dict(self) -> dict[str, object]:
        return {
            "tensor": self.tensor,
            "kind": self.kind,
            "base": self.base,
            "elem_bytes": self.elem_bytes,
            "order": list(self.order),
            "extents": list(self.extents),
            "low": list(self.low),
        }

    # ------------------------------------------------------------------ host side

    def pack(self, array: np.ndarray, access: Access, sizes: Mapping[str, int]) -> bytes:
        """The bytes of this region for tensor ``array`` (read through ``access``)."""
        array = np.asarray(array)
        if self.kind == "gather":
            stored = gather(array, access, sizes, tuple(str(n) for n in self.order))
        else:
            padded = np.zeros(
                [self.extents[self.order.index(d)] for d in range(array.ndim)], dtype=np.int64
            )
            window = tuple(
                slice(-low, -low + extent)
                for low, extent in zip(self.low, array.shape, strict=True)
            )
            padded[window] = array
            stored = padded.transpose(self.order)
        return np.ascontiguousarray(stored).astype(f"<i{self.elem_bytes}").tobytes()

    def unpack(self, dram: bytes | bytearray | np.ndarray) -> np.ndarray:
        """A ``dense`` unpadded region read back, dimensions in tensor order, as int64."""
        raw = np.frombuffer(bytes(dram[self.base : self.end]), dtype=f"<i{self.elem_bytes}")
        stored = raw.astype(np.int64).reshape(self.extents)
        return stored.transpose(np.argsort(self.order))


def gather(
    array: np.ndarray, access: Access, sizes: Mapping[str, int], order: tuple[str, ...]
) -> np.ndarray:
    """``G[order...] = array[access dims]`` with zeros where the access leaves the tensor."""
    grids = np.meshgrid(*(np.arange(sizes[name]) for name in order), indexing="ij")
    by_name = dict(zip(order, grids, strict=True))
    shape = tuple(sizes[name] for name in order)
    inside = np.ones(shape, dtype=bool)
    coordinates = []
    for expr, extent in zip(access.dims, array.shape, strict=True):
        coordinate = np.full(shape, expr.constant, dtype=np.int64)
        for name, coef in expr.terms:
            coordinate += coef * by_name[name]
        inside &= (coordinate >= 0) & (coordinate < extent)
        coordinates.append(np.clip(coordinate, 0, extent - 1))
    values = array[tuple(coordinates)] if coordinates else np.full(shape, array.reshape(()))
    return np.where(inside, values, 0)


def dense_layout(
    tensor: str,
    shape: tuple[int, ...],
    accesses: tuple[Access, ...],
    sizes: Mapping[str, int],
    base: int,
    elem_bytes: int,
    innermost: str | None,
) -> DramLayout | None:
    """``dense`` layout whose innermost dimension gives index ``innermost`` stride 1.

    ``None`` if no permutation does (the index is scaled, repeated or shares its dimension
    with a coefficient other than 1). Padding covers every coordinate the accesses reach.
    """
    low, high = [0] * len(shape), [extent - 1 for extent in shape]
    for access in accesses:
        for dim, expr in enumerate(access.dims):
            lo, hi = expr.bounds(sizes)
            low[dim], high[dim] = min(low[dim], lo), max(high[dim], hi)
    extents = [hi - lo + 1 for lo, hi in zip(low, high, strict=True)]
    order = list(range(len(shape)))
    if innermost is not None:
        homes = {
            dim
            for access in accesses
            for dim, expr in enumerate(access.dims)
            if innermost in expr.indices
        }
        coefs = {
            expr.coefs[innermost]
            for access in accesses
            for expr in access.dims
            if innermost in expr.indices
        }
        if len(homes) != 1 or coefs != {1}:
            return None
        home = homes.pop()
        order.remove(home)
        order.append(home)
    return DramLayout(
        tensor,
        "dense",
        base,
        elem_bytes,
        tuple(order),
        tuple(extents[d] for d in order),
        tuple(low),
    )


def gather_layout(
    tensor: str,
    access: Access,
    sizes: Mapping[str, int],
    base: int,
    elem_bytes: int,
    innermost: str | None,
) -> DramLayout:
    """``gather`` layout of ``access`` with ``innermost`` (if the access uses it) last."""
    order = [name for name in access.indices if name != innermost]
    if innermost in access.indices:
        order.append(innermost)
    return DramLayout(
        tensor, "gather", base, elem_bytes, tuple(order), tuple(sizes[name] for name in order)
    )


def aligned(address: int) -> int:
    return -(-address // ALIGN) * ALIGN


def check_addressable(layouts: list[DramLayout], limit_bits: int = 32) -> None:
    top = max((layout.end for layout in layouts), default=0)
    if top > (1 << limit_bits):
        raise MappingError(
            f"the operands need {top} bytes of DRAM but LOAD/STORE address only "
            f"{1 << limit_bits}; split the workload"
        )
