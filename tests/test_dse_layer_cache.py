"""Layer evaluations of a `cacheable` evaluator are kept by content, and only theirs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.evaluate import LayerMetrics, run_layer_job
from tensorforge.dse.sw_evaluator import SoftwareSearchEvaluator

GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=16,j=16,k=16")


@dataclass
class Counting:
    version: str = "counting-1"
    cacheable: ClassVar[bool] = True
    calls: list = field(default_factory=list)

    def __call__(self, workload, config, seed) -> LayerMetrics:
        self.calls.append(seed)
        return LayerMetrics(cycles=100 + seed, energy_pj=1.0 + len(self.calls))


@dataclass
class Uncached(Counting):
    cacheable: ClassVar[bool] = False


def test_a_cacheable_evaluation_is_kept_by_version_workload_config_and_seed(isolated_cache):
    evaluator, config = Counting(), AcceleratorConfig()
    first = run_layer_job(evaluator, GEMM, config, 3)
    assert run_layer_job(evaluator, GEMM, config, 3) == first and evaluator.calls == [3]
    run_layer_job(evaluator, GEMM, config, 4)
    run_layer_job(evaluator, GEMM, AcceleratorConfig.from_dict({"array": {"rows": 4}}), 3)
    run_layer_job(Counting(version="counting-2", calls=evaluator.calls), GEMM, config, 3)
    assert evaluator.calls == [3, 4, 3, 3]


def test_other_evaluators_always_run(isolated_cache):
    evaluator = Uncached()
    run_layer_job(evaluator, GEMM, AcceleratorConfig(), 1)
    run_layer_job(evaluator, GEMM, AcceleratorConfig(), 1)
    assert evaluator.calls == [1, 1]


def test_the_software_search_version_covers_the_code_generator():
    """A finalist's cycles come from the program the code generator emits, so its source is
    part of what the cached result is keyed on."""
    from tensorforge.dse import sw_evaluator

    assert SoftwareSearchEvaluator.cacheable
    seen = []
    original = sw_evaluator.source_digest
    try:
        sw_evaluator.source_digest = lambda *names: seen.extend(names) or "x"
        sw_evaluator._model_digest()
    finally:
        sw_evaluator.source_digest = original
    assert "tensorforge.compiler.codegen" in seen and "tensorforge.dse.cost_trace" in seen
