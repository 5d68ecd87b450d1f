"""The small public API in `tensorforge`: lazy names that join the pipeline stages."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tensorforge as tf


@pytest.mark.parametrize(
    "statement",
    ["import tensorforge", "import tensorforge.cli; tensorforge.cli.build_parser()"],
    ids=["package", "cli-parser"],
)
def test_import_and_cli_startup_are_cheap(statement):
    # A fresh interpreter: neither importing the package nor building every subcommand's parser
    # (which every `tensorforge` command does first) may pull in Amaranth or torch.
    code = f"{statement}; import sys; print('amaranth' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("mapping", ["default", "library"])
def test_compile_workload_matches_numpy(mapping):
    workload = tf.parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=13,j=7,k=19")
    config = tf.AcceleratorConfig(array=tf.ArrayConfig(rows=4, cols=4))
    inputs = workload.random_inputs(np.random.default_rng(3))
    program = tf.compile_workload(workload, config, mapping)
    np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))


def test_unknown_mapping_name_is_a_clear_error():
    workload = tf.parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=4,j=4,k=4")
    with pytest.raises(tf.TensorforgeError, match="unknown mapping 'fastest'"):
        tf.compile_workload(workload, tf.AcceleratorConfig(), "fastest")


def test_generate_verilog_has_the_accelerator_top():
    config = tf.AcceleratorConfig(
        array=tf.ArrayConfig(rows=2, cols=3),
        scratchpad=tf.ScratchpadConfig(capacity=1024, banks=3, accumulator=512),
    )
    verilog = tf.generate_verilog(config)
    assert "module accelerator(" in verilog
    assert "m_axi__araddr" in verilog and "s_axil__awaddr" in verilog


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tf.nope  # noqa: B018
