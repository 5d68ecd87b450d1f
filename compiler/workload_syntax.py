"""The syntax of the workload language: affine index expressions, accesses and the parser.

Kept apart from `tensorforge.compiler.workload` so the semantics (sizes, shapes, the reference)
read on their own; users import everything from there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from tensorforge.errors import WorkloadError


@dataclass(frozen=True)
class AffineExpr:
    """``sum(coef * index) + constant``; the terms keep the order they were written in."""

    terms: tuple[tuple[str, int], ...]
    constant: int = 0

    @property
    def coefs(self) -> dict[str, int]:
        return dict(self.terms)

    @cached_property  # immutable, and read in the compiler's inner loops
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

    @cached_property  # immutable, and read in the compiler's inner loops
    def indices(self) -> tuple[str, ...]:
        """Indices in order of first appearance."""
        return tuple(dict.fromkeys(name for dim in self.dims for name in dim.indices))

    def __str__(self) -> str:
        return f"{self.tensor}[{','.join(str(d) for d in self.dims)}]"


_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_]\w*)|(?P<int>\d+)|(?P<op>\+=|[=\[\],+\-*]))")


def fail(text: str, column: int, problem: str, fix: str) -> WorkloadError:
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
            raise fail(
                text,
                column,
                f"unexpected character {text[column]!r}",
                "Use tensor names, index names, integers, + - * = += [ ] and commas.",
            )
        kind = match.lastgroup or "op"
        tokens.append((kind, match.group(kind), match.start(kind)))
        position = match.end()
    tokens.append(("end", "", len(text.rstrip())))
    return tokens


class Parser:
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
            raise fail(
                self.text,
                token[2],
                f"expected {expected or value or kind}, found {found}",
                "A workload reads like C[i,j] += A[i,k] * B[k,j].",
            )
        self.position += 1
        return token

    def statement(self) -> tuple[Access, list[Access], str]:
        """The output, the inputs and the reduction: ``sum`` (``+=`` or ``=``) or ``max``
        (``max=``)."""
        output = self.access(output=True)
        token = self.peek()
        reduction = "sum"
        if token[:2] == ("name", "max") and self.tokens[self.position + 1][1] == "=":
            reduction = "max"
            self.position += 1
        elif token[1] not in ("+=", "="):
            self.take("op", "+=", expected="'+=' (or 'max=') after the output")
        self.position += 1
        inputs = [self.access(output=False)]
        while self.peek()[1] == "*":
            self.position += 1
            inputs.append(self.access(output=False))
        self.take("end", expected="'*' or the end of the text")
        return output, inputs, reduction

    def access(self, output: bool) -> Access:
        _, tensor, column = self.take("name", expected="a tensor name")
        if not output:  # inputs: where a clash with the output name is shown
            self.tensor_columns.setdefault(tensor, column)
        self.take("op", "[", expected=f"'[' after {tensor}")
        dims: list[AffineExpr] = []
        if self.peek()[1] != "]":
            while True:
                start = self.peek()[2]
                dim = self.expression()
                if output and not dim.is_plain:
                    raise fail(
                        self.text,
                        start,
                        f"output dimension {dim} is not a plain index",
                        "Index the output with bare index names, e.g. C[k,x,y]; "
                        "put offsets and strides on the inputs.",
                    )
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
                raise fail(
                    self.text,
                    column,
                    f"{name}*{other[1]} is not affine",
                    "An index may only be scaled by an integer (2*x); products of "
                    "indices cannot be tiled by the compiler.",
                )
            return name, int(self.take("int", expected=f"an integer after '{name}*'")[1])
        return name, 1


def parse_sizes(text: str) -> dict[str, int | tuple[int, ...]]:
    """``"k=64,c=64,A=64x56x56"`` -> ``{"k": 64, "c": 64, "A": (64, 56, 56)}``.

    Index names get sizes; a tensor name gets its true shape (``A=64x56x56``, ``A=5`` for a
    vector), needed only when an access reaches past the tensor, i.e. for zero padding.
    """
    sizes: dict[str, int | tuple[int, ...]] = {}
    if not text.strip():
        return sizes
    column = 0
    for item in text.split(","):
        stripped = item.strip()
        offset = column + len(item) - len(item.lstrip())
        match = re.fullmatch(r"([A-Za-z_]\w*)\s*=\s*(\d+(?:x\d+)*)", stripped)
        if match is None:
            raise fail(
                text,
                offset,
                f"cannot read size {stripped!r}",
                "Write sizes as name=integer pairs, e.g. k=64,c=64,x=56 "
                "(tensor shapes as A=64x56x56).",
            )
        name, value = match.groups()
        if name in sizes:
            raise fail(text, offset, f"{name} is given twice", "Give each size once.")
        numbers = tuple(int(v) for v in value.split("x"))
        sizes[name] = numbers if "x" in value else numbers[0]
        column += len(item) + 1
    return sizes
