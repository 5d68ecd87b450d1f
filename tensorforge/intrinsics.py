"""The four hardware intrinsics: their tensor expressions, sizes, scratchpad layout and meaning.

An intrinsic is the fixed-size tensor computation one COMPUTE step performs on the PE array
(HASCO's "hardware intrinsic"). Its size comes from the array shape (reshapeArray):

==========  ===========================================  =================================
intrinsic   expression (intrinsic's own index names)     sizes for an R x C array
==========  ===========================================  =================================
DOT         ``C[o] += A[k] * B[k]``                      o=1, k=R*C
GEMV        ``C[i] += A[i,k] * B[k]``                    i=C, k=R
GEMM        ``C[i,j] += A[i,k] * B[k,j]``                i=R, k=R, j=C
CONV2D      ``C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]``    k=C, c=R, x=1, y=R, r=1, s=taps
==========  ===========================================  =================================

The CONV2D intrinsic slides a ``taps``-wide kernel along one image row (x and r are 1: the
compiler loops over kernel rows), which is what lets the hardware reuse each input pixel
``taps`` times without re-reading the scratchpad.

Operand blocks live in the scratchpad as consecutive *lines*. A line holds ``line_elems``
elements; `BLOCK_LAYOUTS` says, per operand, which indices enumerate lines (row-major, outermost
first) and which index runs along a line. Elements past an index's size are zero, so the
compiler pads partial tiles by loading fewer elements. This layout is the contract between the
compiler (which lays tiles out this way), the DMA (which fills lines) and the PE array (which
reads them). `apply_intrinsic` is the bit-exact meaning of one intrinsic step.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class Intrinsic(enum.StrEnum):
    DOT = "dot"
    GEMV = "gemv"
    GEMM = "gemm"
    CONV2D = "conv2d"


EXPRESSIONS: dict[Intrinsic, str] = {
    Intrinsic.DOT: "C[o] += A[k] * B[k]",
    Intrinsic.GEMV: "C[i] += A[i,k] * B[k]",
    Intrinsic.GEMM: "C[i,j] += A[i,k] * B[k,j]",
    Intrinsic.CONV2D: "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]",
}


def intrinsic_sizes(intrinsic: Intrinsic, rows: int, cols: int, taps: int = 3) -> dict[str, int]:
    """Index sizes of ``intrinsic`` on a ``rows x cols`` PE array (see the module table)."""
    match Intrinsic(intrinsic):
        case Intrinsic.DOT:
            return {"o": 1, "k": rows * cols}
        case Intrinsic.GEMV:
            return {"i": cols, "k": rows}
        case Intrinsic.GEMM:
            return {"i": rows, "k": rows, "j": cols}
        case Intrinsic.CONV2D:
            return {"k": cols, "c": rows, "x": 1, "y": rows, "r": 1, "s": taps}


@dataclass(frozen=True)
class OperandLayout:
    """How one operand block sits in consecutive scratchpad (or accumulator) lines.

    ``line_axes`` enumerate lines, outermost first; each is an index name or a sum of two
    (``("y", "s")`` for the sliding-window axis ``y+s``, whose extent is ``Y + S - 1``).
    ``elem_axis`` runs along a line (``None``: one element per line).
    """

    line_axes: tuple[tuple[str, ...], ...]
    elem_axis: str | None

    def line_extents(self, sizes: dict[str, int]) -> tuple[int, ...]:
        return tuple(sum(sizes[i] for i in axis) - (len(axis) - 1) for axis in self.line_axes)

    def lines(self, sizes: dict[str, int]) -> int:
        return int(np.prod(self.line_extents(sizes), dtype=np.int64))

    def elems(self, sizes: dict[str, int]) -> int:
        return 1 if self.elem_axis is None else sizes[self.elem_axis]


BLOCK_LAYOUTS: dict[Intrinsic, dict[str, OperandLayout]] = {
    Intrinsic.DOT: {
        "A": OperandLayout((), "k"),
        "B": OperandLayout((), "k"),
        "C": OperandLayout((), None),
    },
    Intrinsic.GEMV: {
        "A": OperandLayout((("i",),), "k"),
        "B": OperandLayout((), "k"),
        "C": OperandLayout((), "i"),
    },
    Intrinsic.GEMM: {
        "A": OperandLayout((("i",),), "k"),
        "B": OperandLayout((("k",),), "j"),
        "C": OperandLayout((("i",),), "j"),
    },
    Intrinsic.CONV2D: {
        "A": OperandLayout((("x", "r"), ("y", "s")), "c"),
        "B": OperandLayout((("r",), ("s",), ("c",)), "k"),
        "C": OperandLayout((("x",), ("y",)), "k"),
    },
}


@dataclass(frozen=True)
class BlockShape:
    """Lines and elements per line of one operand block."""

    lines: int
    elems: int


def block_shapes(intrinsic: Intrinsic, sizes: dict[str, int]) -> dict[str, BlockShape]:
    """``{"A": ..., "B": ..., "C": ...}`` block shapes for one intrinsic step."""
    return {
        name: BlockShape(layout.lines(sizes), layout.elems(sizes))
        for name, layout in BLOCK_LAYOUTS[Intrinsic(intrinsic)].items()
    }


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap-around to ``bits`` (what a ``bits``-wide register holds)."""
    values = np.asarray(values, dtype=np.int64)
    if bits >= 64:
        return values
    half = np.int64(1) << (bits - 1)
    return ((values + half) & ((np.int64(1) << bits) - 1)) - half


def apply_intrinsic(
    intrinsic: Intrinsic,
    sizes: dict[str, int],
    a_lines: np.ndarray,
    b_lines: np.ndarray,
    c_lines: np.ndarray,
    acc_bits: int = 32,
) -> np.ndarray:
    """One intrinsic step, bit-exact: returns the new C block lines.

    ``a_lines`` / ``b_lines`` are (lines x line_elems) integer arrays read from the scratchpad
    at the A and B block bases; ``c_lines`` the accumulator lines at the C base. Only the
    leading ``block_shapes`` part of each is used; the result keeps ``c_lines``' shape.
    """
    shapes = block_shapes(intrinsic, sizes)
    a = np.asarray(a_lines, dtype=np.int64)[: shapes["A"].lines, : shapes["A"].elems]
    b = np.asarray(b_lines, dtype=np.int64)[: shapes["B"].lines, : shapes["B"].elems]
    c = np.array(c_lines, dtype=np.int64, copy=True)
    match Intrinsic(intrinsic):
        case Intrinsic.DOT:
            c[0, 0] += int(a[0] @ b[0])
        case Intrinsic.GEMV:
            c[0, : sizes["i"]] += a @ b[0]
        case Intrinsic.GEMM:
            c[: sizes["i"], : sizes["j"]] += a @ b
        case Intrinsic.CONV2D:
            taps, channels, outs = sizes["s"], sizes["c"], sizes["y"]
            weights = b.reshape(taps, channels, sizes["k"])  # r == 1
            for s in range(taps):
                c[:outs, : sizes["k"]] += a[s : s + outs] @ weights[s]
    return wrap(c, acc_bits)
