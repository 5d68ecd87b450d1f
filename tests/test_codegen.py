"""Code generation edge cases: every program must reproduce the workload's numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping, library_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig
from tensorforge.isa import Compute, Load, Store, decode_program

GEMM_4x4 = AcceleratorConfig(array=ArrayConfig(rows=4, cols=4))
GEMV_4x4 = AcceleratorConfig(intrinsic="gemv", array=ArrayConfig(rows=4, cols=4, dataflow="os"))
CASES = {
    "prime gemm": ("C[i,j] += A[i,k] * B[k,j]", "i=7,j=11,k=13"),
    "smaller than the array": ("C[i,j] += A[i,k] * B[k,j]", "i=2,j=3,k=3"),
    "degenerate dims": ("C[i,j] += A[i,k] * B[k,j]", "i=1,j=1,k=1"),
    "gemv": ("C[i] += A[i,k] * B[k]", "i=5,k=9"),
    "stride 2 with padding": ("C[k,x,y] += A[c,2*x+r-1,2*y+s-1] * B[k,c,r,s]",
                              "k=6,c=3,x=3,y=4,r=3,s=3,A=3x6x8"),
    "stride 4": ("C[k,x,y] += A[c,4*x+r,4*y+s] * B[k,c,r,s]", "k=5,c=2,x=2,y=3,r=2,s=3"),
    "dilation": ("C[k,x,y] += A[c,x+2*r,y+2*s] * B[k,c,r,s]", "k=3,c=2,x=3,y=3,r=2,s=2"),
    "depthwise": ("C[c,x,y] += A[c,x+r,y+s] * B[c,r,s]", "c=5,x=4,y=3,r=3,s=3"),
    "batched matmul": ("C[b,i,j] += A[b,i,k] * B[b,k,j]", "b=3,i=5,j=6,k=7"),
    "ttm": ("C[i,j,k] += A[i,j,l] * B[l,k]", "i=3,j=4,k=5,l=6"),
    "mttkrp": ("D[i,j] += A[i,k,l] * B[l,j] * C[k,j]", "i=3,j=5,k=4,l=6"),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mapper", [default_mapping, library_mapping])
def test_mappers_compile_every_kind_exactly(name, mapper):
    text, sizes = CASES[name]
    workload = parse_workload(text, sizes)
    # the matching finds no GEMM choice for these (no index only the second input uses)
    config = GEMV_4x4 if name in ("depthwise", "gemv") else GEMM_4x4
    program = generate(workload, mapper(workload, config), config)
    inputs = workload.random_inputs(np.random.default_rng(7))
    np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))


def test_binary_round_trips_and_tokens_balance():
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=17,j=9,k=30")
    mapping = default_mapping(workload, GEMM_4x4)
    program = generate(workload, mapping, GEMM_4x4)
    assert decode_program(program.encode()) == list(program.instructions)
    pushes = sum(ins.push_next for ins in program.instructions if isinstance(ins, Load))
    pops = sum(ins.pop_prev for ins in program.instructions if isinstance(ins, Compute))
    assert pushes == pops
    pushes = sum(ins.push_next for ins in program.instructions if isinstance(ins, Compute))
    pops = sum(ins.pop_prev for ins in program.instructions if isinstance(ins, Store))
    assert pushes == pops
    assert "FINISH" in program.disassemble().splitlines()[-1]


def test_packed_image_holds_the_program_and_unpacks_the_output():
    workload = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=6,j=5,k=4")
    program = generate(workload, default_mapping(workload, GEMM_4x4), GEMM_4x4)
    inputs = workload.random_inputs(np.random.default_rng(3))
    image = program.pack_inputs(inputs)
    assert bytes(image[program.instruction_base :]) == program.encode()
    from tensorforge.sim.functional import run_program

    run_program(GEMM_4x4, bytes(image[program.instruction_base :]), image)
    np.testing.assert_array_equal(program.unpack_output(image), workload.reference(inputs))
    stats = program.statistics()
    assert stats["dram_bytes_written"] == 6 * 5 * 4
    assert stats["instructions"]["STORE"] == sum(isinstance(i, Store) for i in
                                                 program.instructions)


@pytest.mark.parametrize("intrinsic, dataflow", [("dot", "os"), ("gemv", "os"),
                                                 ("conv2d", "os")])
def test_other_intrinsics_run_a_convolution(intrinsic, dataflow):
    config = AcceleratorConfig(intrinsic=intrinsic,
                               array=ArrayConfig(rows=4, cols=4, dataflow=dataflow))
    workload = parse_workload("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=5,c=3,x=3,y=6,r=3,s=2")
    program = generate(workload, default_mapping(workload, config), config)
    inputs = workload.random_inputs(np.random.default_rng(11))
    np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))
