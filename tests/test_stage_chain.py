"""A multi-stage workload wholly on the device (issue 18: "MTTKRP runs fully on the device").

With the output pipeline, MTTKRP's stage 0 ``E[i,k,j] = sum_l A*B`` STOREs ``E`` requantized
to int8 straight into stage 1's input layout and stage 1 ``D = sum_k E*C`` stores int32, one
program. Each result is compared with numpy written out here (einsum, then the output
pipeline's integer formula), which knows nothing of the compiler's stages or programs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_output_pipeline import PIPELINE_4x4  # its Verilator model is shared, not rebuilt

from tensorforge import requant as rq
from tensorforge.cli import main
from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.output_stage import OutputStage
from tensorforge.compiler.stage_chain import (
    compile_stages,
    intermediate_params,
    saturation_free_scale,
)
from tensorforge.compiler.tst import stages
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig
from tensorforge.errors import MappingError
from tensorforge.isa import Buffer, Load
from tensorforge.sim.network_run import segment_runner
from tensorforge.stage_reference import staged_reference

MTTKRP = "D[i,j] += A[i,k,l] * B[l,j] * C[k,j]"
SMALL = parse_workload(MTTKRP, "i=8,j=5,k=6,l=7", name="mttkrp")


def _config(intrinsic: str, dataflow: str) -> AcceleratorConfig:
    return AcceleratorConfig(intrinsic=intrinsic, array=ArrayConfig(rows=4, cols=4,
                                                                    dataflow=dataflow),
                             scratchpad=ScratchpadConfig(capacity=2048, banks=4,
                                                         accumulator=2048),
                             output_pipeline=True)


def _mttkrp_by_hand(inputs: dict, params: rq.OutputParams) -> np.ndarray:
    """MTTKRP with the int8 intermediate: einsum, the output pipeline's formula, einsum."""
    a, b, c = (np.asarray(inputs[n], dtype=np.int64) for n in "ABC")
    e = np.einsum("ikl,lj->ikj", a, b)
    e8 = rq.requantize(e, 0, int(params.multiplier[0]), int(params.shift[0]), 0, -128, 127,
                       acc_bits=32)
    return np.einsum("ikj,kj->ij", e8, c)


@pytest.mark.parametrize("intrinsic, dataflow", [("gemm", "ws"), ("gemm", "os"),
                                                 ("gemv", "os"), ("gemv", "ws")])
def test_mttkrp_runs_wholly_on_the_device(intrinsic, dataflow, random_seed):
    config = _config(intrinsic, dataflow)
    program = compile_stages(SMALL, config)
    assert program.host_ops == ()
    (segment,) = program.network.segments  # one program: both stages, one FINISH
    assert [layer.name for layer in segment.layers] == ["stage0", "stage1"]
    inputs = SMALL.random_inputs(np.random.default_rng(random_seed))
    output, _ = program.run(inputs, segment_runner(config, "functional", seed=random_seed))
    expected = _mttkrp_by_hand(inputs, program.params[0])
    np.testing.assert_array_equal(output, expected, err_msg=f"seed {random_seed}")
    np.testing.assert_array_equal(staged_reference(SMALL, inputs, program.params), expected)


def test_the_api_runs_every_stage_on_the_device(random_seed):
    """`tensorforge.compile_stages`, the public way to the chain, against MTTKRP by hand."""
    import tensorforge

    program = tensorforge.compile_stages(SMALL, PIPELINE_4x4)
    assert program.host_ops == ()
    inputs = SMALL.random_inputs(np.random.default_rng(random_seed))
    output, _ = program.run(inputs, segment_runner(PIPELINE_4x4, "functional",
                                                   seed=random_seed))
    np.testing.assert_array_equal(output, _mttkrp_by_hand(inputs, program.params[0]))


def test_dot_runs_both_stages_with_a_host_relayout(random_seed):
    """On the DOT intrinsic stage 0 writes j innermost and stage 1 reads k innermost: two
    device programs, the host re-lays ``E`` out between them, exact all the same."""
    config = _config("dot", "os")
    program = compile_stages(SMALL, config)
    assert program.host_ops == ("relayout (stage1)",)
    inputs = SMALL.random_inputs(np.random.default_rng(random_seed))
    output, _ = program.run(inputs, segment_runner(config, "functional", seed=random_seed))
    np.testing.assert_array_equal(output, _mttkrp_by_hand(inputs, program.params[0]))


def test_the_intermediate_scale_cannot_saturate():
    """All inputs -128: every ``E`` element is the bound ``l * 128 * 128``, stored as 127."""
    (params,) = intermediate_params(SMALL)
    assert saturation_free_scale(stages(SMALL)[0], 8) == 127 / (7 * 128 * 128)
    bound = 7 * 128 * 128  # stored as 127 by the formula itself, not by the clamp
    assert rq.requantize(bound, 0, int(params.multiplier[0]), int(params.shift[0]), 0, -999,
                         999, acc_bits=32) == 127
    inputs = {name: np.full(shape, -128) for name, shape in SMALL.shapes.items()
              if name != "D"}
    program = compile_stages(SMALL, PIPELINE_4x4)
    output, _ = program.run(inputs, segment_runner(PIPELINE_4x4, "functional"))
    np.testing.assert_array_equal(output, np.full((8, 5), 127 * -128 * 6))
    np.testing.assert_array_equal(output, _mttkrp_by_hand(inputs, params))


def test_four_operand_chain_and_given_scales(random_seed):
    """Three stages, two int8 intermediates at the caller's scales."""
    workload = parse_workload("E[i,m] += A[i,j] * B[j,k] * C[k,l] * D[l,m]",
                              "i=5,j=6,k=7,l=4,m=3")
    program = compile_stages(workload, PIPELINE_4x4, scales=[1 / 300, 1 / 2000])
    assert program.host_ops == ()
    inputs = workload.random_inputs(np.random.default_rng(random_seed))
    output, _ = program.run(inputs, segment_runner(PIPELINE_4x4, "functional"))
    first, second = program.params
    x = rq.requantize(inputs["A"] @ inputs["B"], 0, int(first.multiplier[0]),
                      int(first.shift[0]), 0, -128, 127, acc_bits=32)
    y = rq.requantize(x @ inputs["C"], 0, int(second.multiplier[0]), int(second.shift[0]), 0,
                      -128, 127, acc_bits=32)
    np.testing.assert_array_equal(output, y @ inputs["D"], err_msg=f"seed {random_seed}")


def test_per_tensor_output_stage_is_one_block(random_seed):
    """An output stage without a channel index: one parameter block for every STORE."""
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=9,j=11,k=5")
    params = rq.OutputParams.per_channel(1, bias=3, multiplier=1 << 30, shift=4, low=-128,
                                         high=127)
    stage = OutputStage(params, None)
    program = generate(workload, default_mapping(workload, PIPELINE_4x4), PIPELINE_4x4,
                       output=stage)
    loads = [i for i in program.instructions if isinstance(i, Load) and i.buffer is Buffer.ACC]
    assert len(loads) == 1 and loads[0].rows == rq.PARAM_LINES
    inputs = workload.random_inputs(np.random.default_rng(random_seed))
    expected = rq.requantize(inputs["A"] @ inputs["B"], 3, 1 << 30, 4, 0, -128, 127,
                             acc_bits=32)
    np.testing.assert_array_equal(program.run_functional(inputs), expected)


def test_without_the_pipeline_the_host_finishes(capsys):
    plain = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4))
    with pytest.raises(MappingError, match="output pipeline"):
        compile_stages(SMALL, plain)
    flags = ["--workload", MTTKRP, "--sizes", "i=8,j=5,k=6,l=7", "--pe", "4x4", "--check",
             "--json"]
    assert main(["compile", *flags]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["host_ops"] == ["D[i,j] += (A*B)[i,k,j] * C[k,j] (int64 on the host)"]
    assert summary["check"]["equal"]


def test_compile_cli_runs_every_stage_on_the_device(capsys):
    flags = ["--workload", MTTKRP, "--sizes", "i=8,j=5,k=6,l=7", "--pe", "4x4",
             "--output-pipeline", "--check", "--json"]
    assert main(["compile", *flags]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["host_ops"] == [] and len(summary["segments"]) == 1
    assert summary["segments"][0]["layers"] == ["stage0", "stage1"]
    assert summary["check"]["equal"] and summary["check"]["mismatches"] == 0


@pytest.mark.rtl
def test_mttkrp_on_the_rtl(random_seed):
    """Both stages in one program on the pipeline accelerator's RTL, bit for bit."""
    program = compile_stages(SMALL, PIPELINE_4x4)
    assert program.host_ops == ()
    inputs = SMALL.random_inputs(np.random.default_rng(random_seed))
    output, cycles = program.run(inputs, segment_runner(PIPELINE_4x4, "rtl", seed=random_seed))
    np.testing.assert_array_equal(output, _mttkrp_by_hand(inputs, program.params[0]),
                                  err_msg=f"seed {random_seed}")
    assert len(cycles) == 1 and cycles[0] > 0


@pytest.mark.rtl
def test_simulate_cli_runs_the_chain_on_the_rtl(capsys):
    """`tensorforge simulate --output-pipeline` on the test configuration's flags."""
    flags = ["--workload", MTTKRP, "--sizes", "i=8,j=5,k=6,l=7", "--pe", "4x4", "--spad-kib",
             "2", "--banks", "4", "--acc-kib", "2", "--output-pipeline", "--json"]
    assert main(["simulate", *flags]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["match"] and summary["host_ops"] == [] and summary["cycles"] > 0
    assert summary["segments"][0]["layers"] == ["stage0", "stage1"]
