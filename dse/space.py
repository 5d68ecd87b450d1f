"""Typed design spaces that every hardware-search optimizer shares.

A design point is a plain ``dict`` from variable name to value. Optimizers never work on those
dicts directly: they see one of three encodings, each suited to a different kind of algorithm.

* **genome** (``n x d`` int array, one column per variable): the index of each value in its
  variable's domain. Evolutionary operators mutate and recombine it; it is also the identity of a
  point for de-duplication.
* **unit** (``n x d`` float array in ``[0, 1]``): the genome scaled to the unit hypercube, so a
  quasi-random (Sobol) design or a continuous optimizer can be decoded back onto the grid.
* **features** (``n x f`` float array in ``[0, 1]``): what a surrogate model sees. Ordered
  variables give one column; categorical ones are one-hot, because ``systolic`` is not "between"
  ``none`` and ``full``; fixed variables give none.

The space knows nothing about accelerators; another module maps ``AcceleratorConfig`` onto it.
Where some combinations of values can never be valid (a conditional space), that module gives
the space a *repair*: ``n x d`` genomes -> the nearest valid genomes, the identity on valid
ones. Every draw the space makes (`sample_genomes`, `sample_unseen`, `from_unit`) is repaired,
and optimizers that make genomes of their own (mutation, neighbours, a policy) call `repair`,
so no optimizer proposes a point that cannot be built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorforge.errors import ConfigError

#: Spaces up to this many points are enumerated when a caller needs every unseen point.
ENUMERATION_LIMIT = 200_000


def _empty(name: str) -> ConfigError:
    return ConfigError(f"the design space is empty: variable {name!r} has no values")


class Variable:
    """One named axis of a design space with a finite, indexable domain."""

    name: str

    @property
    def values(self) -> tuple[Any, ...]:
        """Every value of the domain, in index order (computed once: encode runs per point)."""
        cached = self.__dict__.get("_values")
        if cached is None:
            cached = tuple(self._domain())
            object.__setattr__(self, "_values", cached)  # frozen dataclasses too
        return cached

    def _domain(self) -> tuple[Any, ...]:
        raise NotImplementedError

    @property
    def size(self) -> int:
        return len(self.values)

    @property
    def ordered(self) -> bool:
        """Whether neighbouring indices mean similar designs (false for categories)."""
        return True

    @property
    def width(self) -> int:
        """How many feature columns this variable contributes to a surrogate model."""
        if self.size == 1:
            return 0
        return 1 if self.ordered else self.size

    def index_of(self, value: Any) -> int:
        """The genome index of ``value``; a ConfigError names the legal values otherwise."""
        # True == 1 in Python; keying on "is it a bool" keeps a flag from selecting 1.
        index = self.__dict__.get("_index")
        if index is None:
            try:
                index = {(isinstance(v, bool), v): i for i, v in enumerate(self.values)}
            except TypeError:  # unhashable choices (lists): fall back to a scan
                index = {}
            object.__setattr__(self, "_index", index)
        try:
            return index[(isinstance(value, bool), value)]
        except (KeyError, TypeError):
            pass
        for position, candidate in enumerate(self.values):
            if candidate == value and isinstance(candidate, bool) == isinstance(value, bool):
                return position
        raise ConfigError(
            f"{self.name} = {value!r} is not in the design space; choose one of {list(self.values)}"
        )

    def features(self, indices: np.ndarray) -> np.ndarray:
        """Surrogate-model columns (``n x width``) for genome column ``indices`` (``n``)."""
        indices = np.asarray(indices, dtype=np.int64)
        if self.width == 0:
            return np.zeros((indices.shape[0], 0))
        if self.ordered:
            return (indices / (self.size - 1))[:, None].astype(float)
        return np.eye(self.size)[indices]

    def _check_nonempty(self) -> None:
        if not self.name:
            raise ConfigError("every design variable needs a non-empty name")
        if self.size == 0:
            raise _empty(self.name)


@dataclass(frozen=True)
class IntegerRange(Variable):
    """Integers ``low..high`` inclusive, every ``step``-th one, or only the powers of two.

    ``IntegerRange("rows", 1, 64, power_of_two=True)`` is ``1, 2, 4, ..., 64``.
    """

    name: str
    low: int
    high: int
    step: int = 1
    power_of_two: bool = False

    def __post_init__(self) -> None:
        for field_name in ("low", "high", "step"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ConfigError(f"{self.name}: {field_name} must be an integer, not {value!r}")
            object.__setattr__(self, field_name, int(value))
        if self.step < 1:
            raise ConfigError(f"{self.name}: step must be a positive integer, not {self.step}")
        if self.power_of_two and self.step != 1:
            raise ConfigError(f"{self.name}: use either step or power_of_two, not both")
        self._check_nonempty()

    def _domain(self) -> tuple[int, ...]:
        if self.power_of_two:
            if self.high < 1:
                return ()
            first = max(0, math.ceil(math.log2(max(self.low, 1))))
            powers = (1 << k for k in range(first, self.high.bit_length()))
            return tuple(p for p in powers if self.low <= p <= self.high)
        return tuple(range(int(self.low), int(self.high) + 1, int(self.step)))


@dataclass(frozen=True)
class _ChoiceList(Variable):
    """An explicit list of distinct values; the subclasses say whether its order means much."""

    name: str
    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        self._check_nonempty()
        _check_unique(self.name, self.choices)

    def _domain(self) -> tuple[Any, ...]:
        return self.choices


@dataclass(frozen=True)
class OrderedChoice(_ChoiceList):
    """Values whose order means something, e.g. ``[4, 8, 16, 32]``: neighbours are similar."""


@dataclass(frozen=True)
class Categorical(_ChoiceList):
    """Unordered alternatives, e.g. interconnect ``none`` / ``systolic`` / ``full``."""

    @property
    def ordered(self) -> bool:
        return False


@dataclass(frozen=True)
class Fixed(Variable):
    """A parameter pinned by the user (HASCO's pruning of the space); never searched."""

    name: str
    value: Any

    def __post_init__(self) -> None:
        self._check_nonempty()

    def _domain(self) -> tuple[Any, ...]:
        return (self.value,)


def _check_unique(name: str, choices: Sequence[Any]) -> None:
    seen: list[Any] = []
    for choice in choices:
        if choice in seen:
            raise ConfigError(f"{name}: choice {choice!r} is listed twice")
        seen.append(choice)


def variable_from_spec(name: str, spec: Any) -> Variable:
    """One variable from its TOML/dict form (see `Space.from_dict`)."""
    if not isinstance(spec, Mapping):
        return Fixed(name, spec)
    keys = set(spec)
    if "choices" in keys:
        unknown = keys - {"choices", "categorical"}
        if unknown:
            raise ConfigError(f"{name}: unknown keys {sorted(unknown)} next to 'choices'")
        choices = tuple(spec["choices"])
        categorical = spec.get("categorical")
        if categorical is None:
            # Numbers have an order a surrogate can exploit; strings are taken as categories.
            categorical = not all(
                isinstance(c, int | float) and not isinstance(c, bool) for c in choices
            )
        return Categorical(name, choices) if categorical else OrderedChoice(name, choices)
    if {"low", "high"} <= keys:
        unknown = keys - {"low", "high", "step", "power_of_two"}
        if unknown:
            raise ConfigError(f"{name}: unknown keys {sorted(unknown)} in an integer range")
        return IntegerRange(
            name,
            spec["low"],
            spec["high"],
            step=spec.get("step", 1),
            power_of_two=bool(spec.get("power_of_two", False)),
        )
    if keys == {"value"}:
        return Fixed(name, spec["value"])
    raise ConfigError(
        f"{name}: cannot read {dict(spec)!r}; write a value, {{choices = [...]}}, "
        "or {low = .., high = .., step = ..} / {low = .., high = .., power_of_two = true}"
    )


#: ``n x d`` genomes -> ``n x d`` valid genomes (see the module docstring).
Repair = Callable[[np.ndarray], np.ndarray]


class Space:
    """An ordered collection of variables: the product of their domains, less the points
    ``repair`` moves (None: every point is valid)."""

    def __init__(self, variables: Sequence[Variable], repair: Repair | None = None) -> None:
        variables = tuple(variables)
        if not variables:
            raise ConfigError("the design space is empty: it has no variables")
        names = [v.name for v in variables]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ConfigError(f"design variables must have unique names; repeated: {duplicated}")
        for variable in variables:
            if variable.size == 0:
                raise _empty(variable.name)
        self.variables = variables
        self.names = tuple(names)
        self.sizes = np.array([v.size for v in variables], dtype=np.int64)
        self._values = [v.values for v in variables]
        self._repair = repair
        self._valid_ranks: np.ndarray | None = None  # enumerated spaces: every valid rank

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Space:
        """A space from the dict form of a TOML table (HASCO Listing 2 style).

        ``{"rows": {"choices": [4, 8, 16]}, "link": {"choices": ["systolic", "none"]},
        "banks": 4, "spad_kib": {"low": 16, "high": 512, "power_of_two": true}}``:
        numeric choices are ordered, string choices categorical (override with
        ``categorical = true/false``), bare values are fixed.
        """
        return cls([variable_from_spec(name, value) for name, value in spec.items()])

    def __repr__(self) -> str:
        return f"Space({list(self.variables)!r})"

    @property
    def dim(self) -> int:
        """Genome length: one column per variable, fixed ones included."""
        return len(self.variables)

    @property
    def feature_dim(self) -> int:
        return sum(v.width for v in self.variables)

    @property
    def cardinality(self) -> int:
        """Number of distinct design points (an exact Python int; may be huge)."""
        return math.prod(int(s) for s in self.sizes)

    # --- validity --------------------------------------------------------------------------

    def repair(self, genomes: np.ndarray) -> np.ndarray:
        """The nearest valid genomes (``n x d``) to ``genomes`` (``n x d``); valid ones stay."""
        genomes = self.check_genomes(genomes)
        if self._repair is None or not genomes.shape[0]:
            return genomes
        return self.check_genomes(self._repair(genomes))

    def valid(self, genomes: np.ndarray) -> np.ndarray:
        """``n`` bools: the genome is a point the space may propose."""
        genomes = self.check_genomes(genomes)
        return (self.repair(genomes) == genomes).all(axis=1)

    # --- genome <-> point -------------------------------------------------------------------

    def check_genomes(self, genomes: np.ndarray) -> np.ndarray:
        """``genomes`` as an ``n x d`` int array, after checking shape and bounds."""
        genomes = np.asarray(genomes)
        if genomes.ndim != 2 or genomes.shape[1] != self.dim:
            raise ValueError(f"genomes must be n x {self.dim}, got shape {genomes.shape}")
        genomes = genomes.astype(np.int64)
        if genomes.size and ((genomes < 0).any() or (genomes >= self.sizes).any()):
            raise ValueError("genome index out of range for its variable")
        return genomes

    def decode(self, genomes: np.ndarray) -> list[dict[str, Any]]:
        """Design points for ``n x d`` genomes."""
        genomes = self.check_genomes(genomes)
        return [
            {name: values[i] for name, values, i in zip(self.names, self._values, row, strict=True)}
            for row in genomes.tolist()
        ]

    def encode(self, points: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """``n x d`` genomes of design points; unknown or missing names raise ConfigError."""
        rows = []
        for point in points:
            missing = [n for n in self.names if n not in point]
            extra = [n for n in point if n not in self.names]
            if missing or extra:
                raise ConfigError(
                    f"design point {dict(point)!r} does not match the space: "
                    f"missing {missing}, unknown {extra}"
                )
            rows.append([v.index_of(point[v.name]) for v in self.variables])
        return np.array(rows, dtype=np.int64).reshape(len(rows), self.dim)

    # --- other encodings --------------------------------------------------------------------

    def to_unit(self, genomes: np.ndarray) -> np.ndarray:
        """``n x d`` genomes scaled into ``[0, 1]`` (size-1 variables map to 0)."""
        genomes = self.check_genomes(genomes)
        return genomes / np.maximum(self.sizes - 1, 1)

    def from_unit(self, unit: np.ndarray) -> np.ndarray:
        """The nearest genomes (``n x d``) to points of the unit hypercube (``n x d``).

        Each coordinate is cut into ``size`` equal cells, so a uniform or Sobol design in the
        cube gives every value of a variable the same share.
        """
        unit = np.asarray(unit, dtype=float)
        if unit.ndim != 2 or unit.shape[1] != self.dim:
            raise ValueError(f"unit points must be n x {self.dim}, got shape {unit.shape}")
        cells = np.floor(np.clip(unit, 0.0, 1.0) * self.sizes).astype(np.int64)
        return self.repair(np.minimum(cells, self.sizes - 1))

    def features(self, genomes: np.ndarray) -> np.ndarray:
        """Surrogate-model inputs (``n x feature_dim``, in ``[0, 1]``) for ``n x d`` genomes."""
        genomes = self.check_genomes(genomes)
        columns = [v.features(genomes[:, j]) for j, v in enumerate(self.variables)]
        return np.concatenate(columns, axis=1) if columns else np.zeros((len(genomes), 0))

    # --- sampling and enumeration -----------------------------------------------------------

    def sample_genomes(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n x d`` genomes drawn uniformly (with replacement) from the whole grid, then
        repaired (so a valid point near many invalid ones is drawn more often)."""
        return self.repair(rng.integers(0, self.sizes, size=(n, self.dim), dtype=np.int64))

    def sample(self, n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
        """``n`` design points drawn uniformly, with replacement."""
        return self.decode(self.sample_genomes(n, rng))

    def rank(self, genomes: np.ndarray) -> list[int]:
        """A unique integer per genome (mixed radix), usable as a set key of any size."""
        genomes = self.check_genomes(genomes)
        ranks = []
        for row in genomes.tolist():
            rank = 0
            for index, size in zip(row, self.sizes.tolist(), strict=True):
                rank = rank * size + index
            ranks.append(rank)
        return ranks

    def unrank(self, ranks: Sequence[int] | np.ndarray) -> np.ndarray:
        """The ``n x d`` genomes of mixed-radix ``ranks`` (inverse of `rank`)."""
        ranks = np.asarray(ranks, dtype=np.int64)
        genomes = np.zeros((ranks.shape[0], self.dim), dtype=np.int64)
        for j in range(self.dim - 1, -1, -1):
            genomes[:, j] = ranks % self.sizes[j]
            ranks = ranks // self.sizes[j]
        return genomes

    def all_genomes(self) -> np.ndarray:
        """Every genome (``cardinality x d``), for spaces small enough to enumerate."""
        if self.cardinality > ENUMERATION_LIMIT * 50:
            raise ConfigError(
                f"the design space has {self.cardinality} points, too many to enumerate"
            )
        return self.unrank(np.arange(self.cardinality, dtype=np.int64))

    def sample_unseen(self, n: int, rng: np.random.Generator, seen: set[int]) -> np.ndarray:
        """Up to ``n`` distinct genomes (``k x d``, ``k <= n``) whose ranks are not in ``seen``.

        Small spaces are enumerated so the draw stays uniform over what is left and ends exactly
        when the space is exhausted; large ones use rejection, where a repeat is improbable.
        """
        if n <= 0:
            return np.zeros((0, self.dim), dtype=np.int64)
        if self.cardinality <= ENUMERATION_LIMIT:
            remaining = np.setdiff1d(
                self._enumerated_valid_ranks(),
                np.fromiter(seen, dtype=np.int64, count=len(seen)),
                assume_unique=True,
            )
            chosen = rng.choice(remaining, size=min(n, remaining.size), replace=False)
            return self.unrank(chosen)
        found: dict[int, np.ndarray] = {}
        for _ in range(100):
            batch = self.sample_genomes(2 * (n - len(found)), rng)
            for rank, genome in zip(self.rank(batch), batch, strict=True):
                if rank not in seen and rank not in found:
                    found[rank] = genome
                    if len(found) == n:
                        return np.stack(list(found.values()))
        return np.stack(list(found.values())) if found else np.zeros((0, self.dim), np.int64)

    def _enumerated_valid_ranks(self) -> np.ndarray:
        """Every valid rank of an enumerable space, worked out once."""
        if self._valid_ranks is None:
            ranks = np.arange(self.cardinality, dtype=np.int64)
            if self._repair is not None:
                ranks = ranks[self.valid(self.unrank(ranks))]
            self._valid_ranks = ranks
        return self._valid_ranks

    def __iter__(self) -> Iterator[Variable]:
        return iter(self.variables)
