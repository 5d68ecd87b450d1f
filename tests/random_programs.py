"""Random workloads and random mappings of each tensorize choice, for the compiler's exactness
tests (`test_codegen.py`, `test_output_pipeline.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.mappers import device_choices
from tensorforge.compiler.mapping import Mapping, random_mapping
from tensorforge.compiler.matching import TensorizeChoice
from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.config import AcceleratorConfig


def random_sizes(indices: str, rng: np.random.Generator, largest: int) -> str:
    """A `parse_sizes` string of random sizes: below 4 for the kernel indices ``r`` and ``s``,
    below ``largest`` for the others."""
    return ",".join(f"{n}={rng.integers(1, 4 if n in 'rs' else largest)}" for n in indices)


@dataclass(frozen=True)
class RandomCase:
    """One random mapping of one random workload, with what made it (printed on failure)."""

    seed: int
    rng: np.random.Generator
    sizes: str
    workload: Workload
    inputs: dict[str, np.ndarray]
    choice: TensorizeChoice
    mapping: Mapping


def random_cases(text: str, indices: str, config: AcceleratorConfig, seeds: Iterable[int],
                 largest: int) -> Iterator[RandomCase]:
    """For each seed: ``text`` at `random_sizes`, random inputs, and a random mapping of each
    tensorize choice on ``config``, all drawn from the seed's ``rng``. The caller may draw from
    ``case.rng`` too: the next case continues the same stream."""
    for seed in seeds:
        rng = np.random.default_rng(seed)
        sizes = random_sizes(indices, rng, largest)
        workload = parse_workload(text, sizes)
        inputs = workload.random_inputs(rng)
        for choice in device_choices(workload, config):
            mapping = random_mapping(workload, choice, config, rng)
            yield RandomCase(seed, rng, sizes, workload, inputs, choice, mapping)
