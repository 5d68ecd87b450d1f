"""Workloads: the einsum-like tensor language every stage of the compiler starts from.

A workload is one statement of products of affinely indexed tensors, summed over every index
that does not appear in the output::

    C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]          2D convolution (HASCO's notation)
    C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]      the same with stride 2
    D[i,j] += A[i,k,l] * B[l,j] * C[k,j]           MTTKRP: three operands
    C[] += A[k] * B[k]                             a scalar output

Index sizes come separately (``k=64,c=64,x=56,y=56,r=3,s=3``), so one text serves every layer
of a model. ``=`` and ``+=`` mean the same: the output starts at zero and accumulates.

``max=`` reduces with the maximum instead of the sum: each output is the largest product over
the indices it does not have (max pooling: ``C[c,x,y] max= A[c,2*x+r,2*y+s] * B[c,r,s]``
with an all-ones ``B``). Zero padding applies as for sums: a padded coordinate's product is
0, which is only the neutral element of the max where the input is not negative (after a
ReLU). A max workload multiplies exactly two inputs.

Padding. An input access may reach outside its tensor: every input element whose coordinate is
below 0 or at/after the tensor's extent reads as zero (implicit zero padding). By default a
tensor's extent along a dimension is one past the largest coordinate its accesses reach (so
``x+r`` spans ``(X-1)+(R-1)+1`` elements, ``2*x+r`` spans ``2(X-1)+(R-1)+1``), which is the
"pre-padded input" convention HASCO uses. A convolution with ``padding=1`` is written with a
negative offset and its true input shape, ``C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]`` with
``A=64x56x56`` among the sizes: coordinates -1 and 56 then read zeros, exactly like PyTorch.

Only what is written is allowed: an index used without a size, a size nobody uses, a product of
two indices (``x*r``), an output dimension that is not a plain index, and one tensor used with
two ranks are all `WorkloadError`s that say where and how to fix the text.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.workload_syntax import (
    Access,
    AffineExpr,
    Parser,
    fail,
    parse_sizes,
)
from tensorforge.errors import WorkloadError

__all__ = ["Access", "AffineExpr", "Workload", "parse_sizes", "parse_workload"]

SizeSpec = Mapping[str, int | tuple[int, ...]]
REDUCTIONS = ("sum", "max")


def parse_workload(text: str, sizes: SizeSpec | str, *, name: str = "") -> Workload:
    """Parse ``text`` with ``sizes`` (a mapping or a ``parse_sizes`` string) into a Workload."""
    parser = Parser(text)
    output, inputs, reduction = parser.statement()
    if isinstance(sizes, str):
        sizes = parse_sizes(sizes)
    _check_tensors(text, parser, output, inputs)
    index_sizes: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    tensors = {a.tensor for a in inputs} | {output.tensor}
    for key, value in sizes.items():
        if isinstance(value, tuple) or key in tensors:
            shapes[key] = value if isinstance(value, tuple) else (value,)
        else:
            index_sizes[key] = value
    for index, column in parser.first_use.items():
        if index not in index_sizes:
            raise fail(
                text, column, f"index {index} has no size", f"Add {index}=<size> to the sizes."
            )
    for key in index_sizes:
        if key not in parser.first_use:
            raise WorkloadError(
                f"size {key}={index_sizes[key]} is given but {key} is not an "
                f"index of {text!r}; remove it or fix the name."
            )
    for key, value in {
        **index_sizes,
        **{k: v for s in shapes.values() for k, v in enumerate(s)},
    }.items():
        if not isinstance(value, int) or value < 1:
            raise WorkloadError(f"size {key} must be a positive integer, not {value!r}")
    ordered = [*output.indices, *(i for a in inputs for i in a.indices)]
    extents = tuple((i, index_sizes[i]) for i in dict.fromkeys(ordered))
    return Workload(
        name or _default_name(output, inputs),
        output,
        tuple(inputs),
        extents,
        tuple(sorted(shapes.items())),
        reduction,
    )


def _check_tensors(text: str, parser: Parser, output: Access, inputs: list[Access]) -> None:
    ranks: dict[str, int] = {}
    for access in inputs:
        if ranks.setdefault(access.tensor, len(access.dims)) != len(access.dims):
            raise WorkloadError(
                f"tensor {access.tensor} is used with {ranks[access.tensor]} and "
                f"{len(access.dims)} dimensions in {text!r}; give each use the "
                "same rank, or rename one of them."
            )
    if output.tensor in ranks:
        raise fail(
            text,
            parser.tensor_columns[output.tensor],
            f"output {output.tensor} is also an input",
            "Name the output differently from every input.",
        )
    clash = set(parser.first_use) & ({output.tensor} | set(ranks))
    if clash:
        name = sorted(clash)[0]
        raise fail(
            text,
            parser.first_use[name],
            f"{name} is both a tensor and an index",
            "Use different names for tensors and indices.",
        )
    seen = set()
    for dim in output.dims:
        if dim.indices[0] in seen:
            raise WorkloadError(
                f"output index {dim.indices[0]} appears twice in {output}; "
                "a diagonal output is not a tensor contraction."
            )
        seen.add(dim.indices[0])


def _default_name(output: Access, inputs: list[Access]) -> str:
    return f"{output.tensor}=" + "*".join(a.tensor for a in inputs)


# ---------------------------------------------------------------- the workload


@dataclass(frozen=True)
class Workload:
    """A parsed, size-checked workload: immutable, hashable, the compiler's input."""

    name: str
    output: Access
    inputs: tuple[Access, ...]
    extents: tuple[tuple[str, int], ...]  # every index with its size, output indices first
    shape_overrides: tuple[tuple[str, tuple[int, ...]], ...] = ()
    reduction: str = "sum"  # or "max" (module docstring)

    def __post_init__(self) -> None:
        if self.reduction not in REDUCTIONS:
            raise WorkloadError(f"reduction must be one of {', '.join(REDUCTIONS)}, not "
                                f"{self.reduction!r}")
        if self.reduction == "max" and len(self.inputs) != 2:
            raise WorkloadError(f"a max= workload multiplies exactly two inputs, not "
                                f"{len(self.inputs)}; give the pooled tensor and a kernel "
                                "of ones, e.g. C[c,x,y] max= A[c,x+r,y+s] * B[c,r,s]")
        for tensor, shape in self.shape_overrides:
            ranks = {len(a.dims) for a in self.inputs if a.tensor == tensor}
            if not ranks:
                raise WorkloadError(
                    f"a shape is given for {tensor}, which is not an input; "
                    "remove it or fix the name."
                )
            if ranks != {len(shape)}:
                raise WorkloadError(
                    f"shape {'x'.join(map(str, shape))} of {tensor} has "
                    f"{len(shape)} dimensions but {tensor} is indexed with "
                    f"{ranks.pop()}; give one extent per dimension."
                )

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.extents)

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.extents)

    @property
    def spatial_indices(self) -> tuple[str, ...]:
        """Indices of the output: iterations that write different output elements."""
        return self.output.indices

    @property
    def reduction_indices(self) -> tuple[str, ...]:
        """Indices summed over: present in an input, absent from the output."""
        return tuple(i for i in self.indices if i not in self.output.indices)

    @property
    def macs(self) -> int:
        """Points of the iteration space: one multiply-accumulate each (for two inputs)."""
        return math.prod(size for _, size in self.extents)

    @property
    def text(self) -> str:
        operator = "max=" if self.reduction == "max" else "+="
        return f"{self.output} {operator} " + " * ".join(str(a) for a in self.inputs)

    @property
    def sizes_text(self) -> str:
        shapes = [f"{t}={'x'.join(map(str, s))}" for t, s in self.shape_overrides]
        return ",".join([*(f"{i}={n}" for i, n in self.extents), *shapes])

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor's shape: the given shapes, else one past the largest coordinate reached."""
        sizes, given = self.sizes, dict(self.shape_overrides)
        shapes = {self.output.tensor: tuple(sizes[d.indices[0]] for d in self.output.dims)}
        for access in self.inputs:
            reach = tuple(max(1, dim.bounds(sizes)[1] + 1) for dim in access.dims)
            previous = shapes.get(access.tensor, reach)
            shapes[access.tensor] = tuple(map(max, previous, reach))
        shapes.update(given)
        return shapes

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.tensor for a in self.inputs))

    def __str__(self) -> str:
        return f"{self.text}  ({self.sizes_text})"

    def random_inputs(
        self, rng: np.random.Generator, low: int = -128, high: int = 127
    ) -> dict[str, np.ndarray]:
        """Integer inputs drawn uniformly from ``[low, high]`` (int8 range by default)."""
        shapes = self.shapes
        return {
            name: rng.integers(low, high, size=shapes[name], endpoint=True, dtype=np.int64)
            for name in self.input_names
        }

    def reference(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The exact int64 result: the golden model every other stage is checked against.

        Each input is gathered over the indices its access uses (out-of-range coordinates read
        zero), then `np.einsum` multiplies and sums: no tiling, no code generation involved.
        """
        shapes, sizes = self.shapes, self.sizes
        letters = dict(zip(self.indices, string.ascii_letters, strict=False))
        if len(self.indices) > len(string.ascii_letters):
            raise WorkloadError(f"{self.name} has more than 52 indices; split the workload.")
        operands: list[object] = []
        for access in self.inputs:
            if access.tensor not in inputs:
                raise WorkloadError(
                    f"input {access.tensor} is missing; {self.name} needs "
                    f"{', '.join(self.input_names)}."
                )
            array = np.asarray(inputs[access.tensor]).astype(np.int64)
            if array.shape != shapes[access.tensor]:
                raise WorkloadError(
                    f"input {access.tensor} has shape {array.shape}, but "
                    f"{self.name} needs {shapes[access.tensor]}."
                )
            operands += [_gather(array, access, sizes), [letters[i] for i in access.indices]]
        used = {i for a in self.inputs for i in a.indices}
        for index in self.output.indices:  # output-only indices broadcast
            if index not in used:
                operands += [np.ones(sizes[index], dtype=np.int64), [letters[index]]]
        subscripts = ",".join("".join(s) for s in operands[1::2])
        if self.reduction == "max":  # every product, then the max over the reduced indices
            subscripts += "->" + "".join(letters[i] for i in self.indices)
            products = np.einsum(subscripts, *operands[0::2])
            reduced = tuple(range(len(self.output.indices), len(self.indices)))
            result = products.max(axis=reduced) if reduced else products
        else:
            subscripts += "->" + "".join(letters[i] for i in self.output.indices)
            result = np.einsum(subscripts, *operands[0::2], optimize="greedy")
        return np.asarray(result, dtype=np.int64).reshape(shapes[self.output.tensor])


def _gather(array: np.ndarray, access: Access, sizes: Mapping[str, int]) -> np.ndarray:
    """``view[i0, i1, ...] = array[dims(i0, i1, ...)]`` over the access's own indices."""
    names = access.indices
    grids = {
        name: np.arange(sizes[name]).reshape([-1 if n == name else 1 for n in names])
        for name in names
    }
    full = tuple(sizes[n] for n in names)
    coords, inside = [], np.ones(full, dtype=bool)
    for dim, extent in zip(access.dims, array.shape, strict=True):
        coord = np.full(full, dim.constant, dtype=np.int64)
        for name, coef in dim.terms:
            coord = coord + coef * grids[name]
        inside &= (coord >= 0) & (coord < extent)
        coords.append(np.clip(coord, 0, extent - 1))
    return np.where(inside, array[tuple(coords)], 0) if coords else array.reshape(())
