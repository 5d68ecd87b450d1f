"""Workloads: the einsum-like tensor language every stage of the compiler starts from.

A workload is one statement of products of affinely indexed tensors, summed over every index
that does not appear in the output::

    C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]          2D convolution (HASCO's notation)
    C[k,x,y] += A[c,2*x+r,2*y+s] * B[k,c,r,s]      the same with stride 2
    D[i,j] += A[i,k,l] * B[l,j] * C[k,j]           MTTKRP: three operands
    C[] += A[k] * B[k]                             a scalar output

Index sizes come separately (``k=64,c=64,x=56,y=56,r=3,s=3``), so one text serves every layer
of a model. ``=`` and ``+=`` mean the same: the output starts at zero and accumulates.

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
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tensorforge.errors import WorkloadError

SizeSpec = Mapping[str, int | tuple[int, ...]]


@dataclass(frozen=True)
class AffineExpr:
    """``sum(coef * index) + constant``; the terms keep the order they were written in."""

    terms: tuple[tuple[str, int], ...]
    constant: int = 0

    @property
    def coefs(self) -> dict[str, int]:
        return dict(self.terms)

    @property
    def indices(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.terms)

    @property
    def is_plain(self) -> bool:
        """A bare index (coefficient 1, no offset): the only form an output dimension may take."""
        return len(self.terms) == 1 and self.terms[0][1] == 1 and self.constant == 0

    def bounds(self, sizes: Mapping[str, int]) -> tuple[int, int]:
        """Smallest and largest value over the iteration space."""
        low = high = self.constant
        for name, coef in self.terms:
            span = coef * (sizes[name] - 1)
            low += min(0, span)
            high += max(0, span)
        return low, high

    def __str__(self) -> str:
        text = ""
        for name, coef in self.terms:
            sign = "-" if coef < 0 else "+"
            magnitude = f"{abs(coef)}*{name}" if abs(coef) != 1 else name
            text += (sign if text or coef < 0 else "") + magnitude
        if self.constant or not text:
            text += f"{self.constant:+d}" if text else str(self.constant)
        return text


@dataclass(frozen=True)
class Access:
    """One tensor indexed by affine expressions, e.g. ``A[c,x+r,y+s]``."""

    tensor: str
    dims: tuple[AffineExpr, ...]

    @property
    def indices(self) -> tuple[str, ...]:
        """Indices in order of first appearance."""
        return tuple(dict.fromkeys(name for dim in self.dims for name in dim.indices))

    def __str__(self) -> str:
        return f"{self.tensor}[{','.join(str(d) for d in self.dims)}]"


# ---------------------------------------------------------------- parsing


_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_]\w*)|(?P<int>\d+)|(?P<op>\+=|[=\[\],+\-*]))")


def _fail(text: str, column: int, problem: str, fix: str) -> WorkloadError:
    """An error that shows the text with a caret under ``column`` (0-based)."""
    return WorkloadError(
        f"{problem} at column {column + 1}:\n    {text}\n    {' ' * column}^\n{fix}"
    )


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    """``(kind, value, column)`` triples, ending with an ``end`` token."""
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            column = len(text) - len(text[position:].lstrip())
            raise _fail(text, column, f"unexpected character {text[column]!r}",
                        "Use tensor names, index names, integers, + - * = += [ ] and commas.")
        kind = match.lastgroup or "op"
        tokens.append((kind, match.group(kind), match.start(kind)))
        position = match.end()
    tokens.append(("end", "", len(text.rstrip())))
    return tokens


class _Parser:
    """Recursive descent over ``out[...] += in[...] * in[...] ...``; remembers columns."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.position = 0
        self.first_use: dict[str, int] = {}  # index name -> column of its first use
        self.tensor_columns: dict[str, int] = {}

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.position]

    def take(self, kind: str, value: str | None = None, expected: str = "") -> tuple[str, str, int]:
        token = self.peek()
        if token[0] != kind or (value is not None and token[1] != value):
            found = repr(token[1]) if token[0] != "end" else "the end of the text"
            raise _fail(self.text, token[2], f"expected {expected or value or kind}, found {found}",
                        "A workload reads like C[i,j] += A[i,k] * B[k,j].")
        self.position += 1
        return token

    def statement(self) -> tuple[Access, list[Access]]:
        output = self.access(output=True)
        token = self.peek()
        if token[1] not in ("+=", "="):
            self.take("op", "+=", expected="'+=' after the output")
        self.position += 1
        inputs = [self.access(output=False)]
        while self.peek()[1] == "*":
            self.position += 1
            inputs.append(self.access(output=False))
        self.take("end", expected="'*' or the end of the text")
        return output, inputs

    def access(self, output: bool) -> Access:
        _, tensor, column = self.take("name", expected="a tensor name")
        self.tensor_columns.setdefault(tensor, column)
        self.take("op", "[", expected=f"'[' after {tensor}")
        dims: list[AffineExpr] = []
        if self.peek()[1] != "]":
            while True:
                start = self.peek()[2]
                dim = self.expression()
                if output and not dim.is_plain:
                    raise _fail(self.text, start, f"output dimension {dim} is not a plain index",
                                "Index the output with bare index names, e.g. C[k,x,y]; "
                                "put offsets and strides on the inputs.")
                dims.append(dim)
                if self.peek()[1] != ",":
                    break
                self.position += 1
        self.take("op", "]", expected="',' or ']'")
        return Access(tensor, tuple(dims))

    def expression(self) -> AffineExpr:
        coefs: dict[str, int] = {}
        constant = 0
        sign = 1
        if self.peek()[1] == "-":
            self.position += 1
            sign = -1
        while True:
            name, value = self.term()
            if name is None:
                constant += sign * value
            else:
                coefs[name] = coefs.get(name, 0) + sign * value
            if self.peek()[1] not in ("+", "-"):
                break
            sign = 1 if self.take("op")[1] == "+" else -1
        return AffineExpr(tuple((n, c) for n, c in coefs.items() if c != 0), constant)

    def term(self) -> tuple[str | None, int]:
        kind, value, column = self.peek()
        if kind == "int":
            self.position += 1
            if self.peek()[1] != "*":
                return None, int(value)
            self.position += 1
            _, name, name_column = self.take("name", expected=f"an index after '{value}*'")
            self.first_use.setdefault(name, name_column)
            return name, int(value)
        _, name, column = self.take("name", expected="an index or an integer")
        self.first_use.setdefault(name, column)
        if self.peek()[1] == "*":
            self.position += 1
            other = self.peek()
            if other[0] == "name":
                raise _fail(self.text, column, f"{name}*{other[1]} is not affine",
                            "An index may only be scaled by an integer (2*x); products of "
                            "indices cannot be tiled by the compiler.")
            return name, int(self.take("int", expected=f"an integer after '{name}*'")[1])
        return name, 1


def parse_sizes(text: str) -> dict[str, int | tuple[int, ...]]:
    """``"k=64,c=64,A=64x56x56"`` -> ``{"k": 64, "c": 64, "A": (64, 56, 56)}``.

    Integers are index sizes; ``AxBxC`` values are the true shape of an input tensor (needed only
    when an access reaches past the tensor, i.e. for zero padding).
    """
    sizes: dict[str, int | tuple[int, ...]] = {}
    column = 0
    for item in text.split(","):
        stripped = item.strip()
        offset = column + len(item) - len(item.lstrip())
        match = re.fullmatch(r"([A-Za-z_]\w*)\s*=\s*(\d+(?:x\d+)*)", stripped)
        if match is None:
            raise _fail(text, offset, f"cannot read size {stripped!r}",
                        "Write sizes as name=integer pairs, e.g. k=64,c=64,x=56 "
                        "(tensor shapes as A=64x56x56).")
        name, value = match.groups()
        if name in sizes:
            raise _fail(text, offset, f"{name} is given twice", "Give each size once.")
        numbers = tuple(int(v) for v in value.split("x"))
        sizes[name] = numbers if "x" in value else numbers[0]
        column += len(item) + 1
    return sizes


def parse_workload(text: str, sizes: SizeSpec | str, *, name: str = "") -> Workload:
    """Parse ``text`` with ``sizes`` (a mapping or a ``parse_sizes`` string) into a Workload."""
    if isinstance(sizes, str):
        sizes = parse_sizes(sizes)
    parser = _Parser(text)
    output, inputs = parser.statement()
    _check_tensors(text, parser, output, inputs)
    index_sizes: dict[str, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for key, value in sizes.items():
        if isinstance(value, tuple):
            shapes[key] = value
        else:
            index_sizes[key] = value
    for index, column in parser.first_use.items():
        if index not in index_sizes:
            raise _fail(text, column, f"index {index} has no size",
                        f"Add {index}=<size> to the sizes.")
    for key in index_sizes:
        if key not in parser.first_use:
            raise WorkloadError(f"size {key}={index_sizes[key]} is given but {key} is not an "
                                f"index of {text!r}; remove it or fix the name.")
    for key, value in {**index_sizes, **{k: v for s in shapes.values() for k, v in
                                         enumerate(s)}}.items():
        if not isinstance(value, int) or value < 1:
            raise WorkloadError(f"size {key} must be a positive integer, not {value!r}")
    ordered = [*output.indices, *(i for a in inputs for i in a.indices)]
    extents = tuple((i, index_sizes[i]) for i in dict.fromkeys(ordered))
    return Workload(name or _default_name(output, inputs), output, tuple(inputs), extents,
                    tuple(sorted(shapes.items())))


def _check_tensors(text: str, parser: _Parser, output: Access, inputs: list[Access]) -> None:
    ranks: dict[str, int] = {}
    for access in inputs:
        if ranks.setdefault(access.tensor, len(access.dims)) != len(access.dims):
            raise WorkloadError(f"tensor {access.tensor} is used with {ranks[access.tensor]} and "
                                f"{len(access.dims)} dimensions in {text!r}; give each use the "
                                "same rank, or rename one of them.")
    if output.tensor in ranks:
        raise _fail(text, parser.tensor_columns[output.tensor],
                    f"output {output.tensor} is also an input",
                    "Name the output differently from every input.")
    clash = set(parser.first_use) & ({output.tensor} | set(ranks))
    if clash:
        name = sorted(clash)[0]
        raise _fail(text, parser.first_use[name], f"{name} is both a tensor and an index",
                    "Use different names for tensors and indices.")
    seen = set()
    for dim in output.dims:
        if dim.indices[0] in seen:
            raise WorkloadError(f"output index {dim.indices[0]} appears twice in {output}; "
                                "a diagonal output is not a tensor contraction.")
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

    def __post_init__(self) -> None:
        for tensor, shape in self.shape_overrides:
            ranks = {len(a.dims) for a in self.inputs if a.tensor == tensor}
            if not ranks:
                raise WorkloadError(f"a shape is given for {tensor}, which is not an input; "
                                    "remove it or fix the name.")
            if ranks != {len(shape)}:
                raise WorkloadError(f"shape {'x'.join(map(str, shape))} of {tensor} has "
                                    f"{len(shape)} dimensions but {tensor} is indexed with "
                                    f"{ranks.pop()}; give one extent per dimension.")

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
        return f"{self.output} += " + " * ".join(str(a) for a in self.inputs)

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
        return {name: rng.integers(low, high, size=shapes[name], endpoint=True, dtype=np.int64)
                for name in self.input_names}

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
                raise WorkloadError(f"input {access.tensor} is missing; {self.name} needs "
                                    f"{', '.join(self.input_names)}.")
            array = np.asarray(inputs[access.tensor]).astype(np.int64)
            if array.shape != shapes[access.tensor]:
                raise WorkloadError(f"input {access.tensor} has shape {array.shape}, but "
                                    f"{self.name} needs {shapes[access.tensor]}.")
            operands += [_gather(array, access, sizes), [letters[i] for i in access.indices]]
        used = {i for a in self.inputs for i in a.indices}
        for index in self.output.indices:  # output-only indices broadcast
            if index not in used:
                operands += [np.ones(sizes[index], dtype=np.int64), [letters[index]]]
        subscripts = ",".join("".join(s) for s in operands[1::2])
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
