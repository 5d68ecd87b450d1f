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

Either arrangement can also be *tile-major* (``line_block`` > 1): its innermost dimension, the
one that runs along a scratchpad line, is cut into blocks of one line's elements and the block
number becomes the outermost dimension (after VTA's packed layouts), the last block padded with
zeros. The lines of one block column then lie back to back in DRAM: a tile's strip of lines is
one contiguous run that the DMA moves as long bursts, and neighbouring strips join into one
LOAD or STORE where the tile spans the other dimensions. Offsets stay affine for every line
start (they are block-aligned), which is all the device addresses; within a line the elements
are consecutive as before.

The output is always ``dense`` and unpadded (tile-major or not), written by STOREs as
``acc_bits`` integers.
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
    ``extents`` the extent of each array dimension in ``order``. ``line_block`` > 1 makes the
    region tile-major (module docstring): it stores `stored_shape`, the last dimension of
    ``order`` cut into blocks of ``line_block`` elements, block number outermost.
    """

    tensor: str
    kind: str  # "dense" or "gather"
    base: int
    elem_bytes: int
    order: tuple[int | str, ...]
    extents: tuple[int, ...]
    low: tuple[int, ...] = ()
    line_block: int = 1

    def __post_init__(self) -> None:
        if self.line_block < 1 or (self.line_block > 1 and not self.extents):
            raise ValueError(f"line_block {self.line_block} needs a dimension to cut")

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The array as it lies in DRAM, outermost first."""
        if self.line_block == 1:
            return self.extents
        *outer, last = self.extents
        return (-(-last // self.line_block), *outer, self.line_block)

    @property
    def elements(self) -> int:
        return math.prod(self.stored_shape)

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
        if self.line_block > 1:
            pads += f" tile-major/{self.line_block}"
        return (
            f"{self.tensor}: {self.kind}[{dims}]{pads} int{8 * self.elem_bytes} "
            f"@0x{self.base:x}..0x{self.end:x}"
        )

    def _dim_strides(self) -> list[int]:
        """Element distance per unit of each dimension of ``order``; tile-major, the last
        one's holds between block starts only (``line_block`` of them are one block)."""
        outer = self.extents[:-1] if self.line_block > 1 else self.extents
        strides, step = [0] * len(self.extents), self.line_block
        if self.line_block > 1:
            strides[-1] = math.prod(outer)
        else:
            step = 1
        for position in reversed(range(len(outer))):
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
            "line_block": self.line_block,
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
        stored = self._to_blocks(stored)
        return np.ascontiguousarray(stored).astype(f"<i{self.elem_bytes}").tobytes()

    def unpack(self, dram: bytes | bytearray | np.ndarray) -> np.ndarray:
        """A ``dense`` unpadded region read back, dimensions in tensor order, as int64."""
        raw = np.frombuffer(bytes(dram[self.base : self.end]), dtype=f"<i{self.elem_bytes}")
        stored = self._from_blocks(raw.astype(np.int64).reshape(self.stored_shape))
        return stored.transpose(np.argsort(self.order))

    def _to_blocks(self, array: np.ndarray) -> np.ndarray:
        """``extents`` -> `stored_shape` (tile-major; unchanged otherwise)."""
        if self.line_block == 1:
            return array
        blocks, size = self.stored_shape[0], self.line_block
        padding = [(0, 0)] * (array.ndim - 1) + [(0, blocks * size - array.shape[-1])]
        cut = np.pad(array, padding).reshape(*array.shape[:-1], blocks, size)
        return np.moveaxis(cut, -2, 0)

    def _from_blocks(self, stored: np.ndarray) -> np.ndarray:
        """`stored_shape` -> ``extents``, the inverse of `_to_blocks`."""
        if self.line_block == 1:
            return stored
        joined = np.moveaxis(stored, 0, -2)
        joined = joined.reshape(*joined.shape[:-2], -1)
        return joined[..., : self.extents[-1]]


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
    line_block: int = 1,
) -> DramLayout | None:
    """``dense`` layout whose innermost dimension gives index ``innermost`` stride 1.

    ``None`` if no permutation does (the index is scaled, repeated or shares its dimension
    with a coefficient other than 1). Padding covers every coordinate the accesses reach.
    ``line_block`` > 1 asks for a tile-major layout, granted (else 1) where every access
    names ``innermost``'s dimension by the bare index, so its line starts stay block-aligned.
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
        if not all(access.dims[home].is_plain for access in accesses):
            line_block = 1
    else:
        line_block = 1
    return DramLayout(
        tensor,
        "dense",
        base,
        elem_bytes,
        tuple(order),
        tuple(extents[d] for d in order),
        tuple(low),
        line_block,
    )


def gather_layout(
    tensor: str,
    access: Access,
    sizes: Mapping[str, int],
    base: int,
    elem_bytes: int,
    innermost: str | None,
    line_block: int = 1,
) -> DramLayout:
    """``gather`` layout of ``access`` with ``innermost`` (if the access uses it) last, and
    tile-major by ``line_block`` if so."""
    order = [name for name in access.indices if name != innermost]
    if innermost in access.indices:
        order.append(innermost)
    else:
        line_block = 1
    return DramLayout(
        tensor,
        "gather",
        base,
        elem_bytes,
        tuple(order),
        tuple(sizes[name] for name in order),
        line_block=line_block,
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
