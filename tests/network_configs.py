"""What the network tests share (`test_network`, `test_residual`, `test_max_pool`,
`test_output_pipeline`): the 4x4 output-pipeline accelerator whose Verilator model their RTL
tests build once, the other arrays a network must also compile for (a conv2d one among
them), and the bound on a quantized network's distance from its float module."""

from __future__ import annotations

import numpy as np
import pytest

from tensorforge.config import AcceleratorConfig, ArrayConfig, ScratchpadConfig

PIPELINE_4x4 = AcceleratorConfig(
    array=ArrayConfig(rows=4, cols=4),
    scratchpad=ScratchpadConfig(capacity=2048, banks=4, accumulator=2048),
    output_pipeline=True)

#: a conv2d-intrinsic accelerator with the pipeline, where some layouts cannot chain
CONV2D_2x3 = AcceleratorConfig(intrinsic="conv2d",
                               array=ArrayConfig(rows=2, cols=3, dataflow="os"),
                               scratchpad=ScratchpadConfig(capacity=4096, accumulator=4096),
                               output_pipeline=True)

#: ``@OTHER_ARRAYS``: a test over the default 8x8 and a non-square 2x4, both with the pipeline
OTHER_ARRAYS = pytest.mark.parametrize("config", [
    AcceleratorConfig(output_pipeline=True),  # the default 8x8
    AcceleratorConfig(array=ArrayConfig(rows=2, cols=4), output_pipeline=True,
                      scratchpad=ScratchpadConfig(capacity=4096, accumulator=4096)),
], ids=["8x8", "2x4"])

#: the quantized output is within this fraction of the float output's largest magnitude (int8
#: weights and activations: each layer adds at most about one output step)
FLOAT_TOLERANCE = 0.05


def close_to_float(result) -> None:
    """``result`` (a `ModelResult`) dequantized is within `FLOAT_TOLERANCE` of the float
    module's output."""
    error = np.abs(result.dequantized - result.float_output).max()
    assert error <= FLOAT_TOLERANCE * np.abs(result.float_output).max(), error


def one_exact_program(result) -> None:
    """``result`` (a `ModelResult`) equals its integer reference and ran as one device
    program, nothing on the host."""
    assert result.match, (result.output, result.expected)
    assert result.host_ops == () and len(result.instructions) == 1


def one_exact_rtl_run(result) -> None:
    """`one_exact_program`, run on the RTL (its cycle counter read once), close to float."""
    one_exact_program(result)
    assert result.cycles > 0 and len(result.segment_cycles) == 1
    close_to_float(result)
