"""The workload zoo: benchmark cases and whole models, as data in ``compiler/zoo/*.toml``.

Each TOML file is one model (``kind = "model"``: a list of layers, each a workload with a
count of how often the model runs it) or the HASCO Table I benchmark set
(``kind = "benchmarks"``). Files name their workload texts once under ``[workloads]`` and give
each layer a ``sizes`` string in `parse_sizes` form, so a layer reads like the paper's tables::

    [workloads]
    conv = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"

    [[layer]]
    name = "conv2_2"
    workload = "conv"
    sizes = "k=64,c=64,x=56,y=56,r=3,s=3"
    count = 3

Convolutions use the pre-padded convention (see `tensorforge.compiler.workload`): the input is
stored with its padding, so ``x+r`` spans ``X+R-1``. MAC counts do not depend on it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.errors import WorkloadError


@dataclass(frozen=True)
class Layer:
    """One distinct layer of a model and how many times the model runs it."""

    name: str
    workload: Workload
    count: int = 1


@dataclass(frozen=True)
class Model:
    name: str
    description: str
    layers: tuple[Layer, ...]

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one inference (each layer times its count)."""
        return sum(layer.count * layer.workload.macs for layer in self.layers)

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        known = ", ".join(layer.name for layer in self.layers)
        raise WorkloadError(f"{self.name} has no layer {name!r}; its layers are {known}.")


@cache
def _files() -> dict[str, dict]:
    """Every zoo file, parsed once (the files ship inside the package)."""
    folder = resources.files("tensorforge.compiler") / "zoo"
    found = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".toml"):
            found[entry.name.removesuffix(".toml")] = tomllib.loads(entry.read_text("utf-8"))
    return found


def list_models() -> list[str]:
    """Names accepted by `load_model`, sorted."""
    return sorted(name for name, data in _files().items() if data.get("kind") == "model")


def _layers(file: str, data: dict, key: str) -> tuple[Layer, ...]:
    texts = data.get("workloads", {})
    layers = []
    for entry in data.get(key, []):
        label = f"{file}:{entry['name']}"
        text = texts.get(entry["workload"], entry["workload"])
        workload = parse_workload(text, entry["sizes"], name=label)
        layers.append(Layer(entry["name"], workload, int(entry.get("count", 1))))
    return tuple(layers)


def load_model(name: str) -> Model:
    """The model ``name`` (see `list_models`), e.g. ``load_model("resnet50")``."""
    data = _files().get(name)
    if data is None or data.get("kind") != "model":
        raise WorkloadError(f"unknown model {name!r}; known models: {', '.join(list_models())}.")
    return Model(name, data.get("description", ""), _layers(name, data, "layer"))


def benchmark_kinds() -> list[str]:
    """The HASCO Table I computations (and GEMV, DOT) `benchmark_cases` accepts."""
    data = _files()["hasco_benchmarks"]
    return list(dict.fromkeys(case["kind"] for case in data["case"]))


def benchmark_cases(kind: str) -> list[Workload]:
    """The test cases of one benchmark computation (``mttkrp``, ``ttm``, ``conv2d``, ...)."""
    data = _files()["hasco_benchmarks"]
    cases = [c for c in data["case"] if c["kind"] == kind]
    if not cases:
        raise WorkloadError(
            f"unknown benchmark {kind!r}; known benchmarks: {', '.join(benchmark_kinds())}."
        )
    renamed = {"case": [{**c, "workload": c["kind"]} for c in cases]}
    return [layer.workload for layer in _layers("hasco", {**data, **renamed}, "case")]


def load_workload(spec: str) -> Workload:
    """``model:layer`` (``resnet50:conv2_2``) or ``benchmark:n`` (``gemm:3``, 0-based)."""
    model, _, layer = spec.partition(":")
    if not layer:
        raise WorkloadError(f"{spec!r} names no layer; write model:layer, e.g. resnet50:conv1.")
    if model in benchmark_kinds():
        cases = benchmark_cases(model)
        if not layer.isdigit() or int(layer) >= len(cases):
            raise WorkloadError(f"{model} has cases 0 to {len(cases) - 1}, not {layer!r}.")
        return cases[int(layer)]
    return load_model(model).layer(layer).workload
