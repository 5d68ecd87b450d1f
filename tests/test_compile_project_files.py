"""`tensorforge compile --out DIR`: the files a user's own project takes, checked against
numpy, a C compiler, and (slow) the generated cocotb test on the generated Verilog."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tensorforge.cli import main
from tensorforge.config import AcceleratorConfig
from tensorforge.hw.registers import REGISTERS
from tensorforge.isa import INSTRUCTION_BYTES, decode_program

GEMM = ["--workload", "C[i,j] += A[i,k] * B[k,j]", "--sizes", "i=6,j=5,k=7"]
# A small accelerator: its Verilator model builds quickly.
HARDWARE = ["--pe", "2x2", "--spad-kib", "1", "--acc-kib", "1", "--banks", "2", "--bus-bits", "32"]
SEED = 5


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("project")
    assert main(["compile", *GEMM, *HARDWARE, "--seed", str(SEED), "--out", str(out)]) == 0
    return out


def test_image_registers_and_expected_output_agree_with_numpy(project):
    image = (project / "dram_image.bin").read_bytes()
    registers = json.loads((project / "registers.json").read_text())
    writes = {w["name"]: w for w in registers["writes"]}
    assert [w["name"] for w in registers["writes"]][-1] == "control"  # start comes last
    offsets = {r.name: r.offset for r in REGISTERS}
    assert all(w["offset"] == offsets[w["name"]] for w in registers["writes"])
    base, count = writes["insn_addr"]["value"], writes["insn_count"]["value"]
    program = (project / "program.bin").read_bytes()
    assert image[base : base + count * INSTRUCTION_BYTES] == program
    assert len(decode_program(program)) == count
    assert len((project / "program.asm").read_text().strip().splitlines()) >= count

    inputs = np.load(project / "inputs.npz")
    again = np.random.default_rng(SEED)  # the documented seed gives the same inputs
    np.testing.assert_array_equal(inputs["A"], again.integers(-128, 127, (6, 7), endpoint=True))
    expected = np.load(project / "expected_output.npy")
    np.testing.assert_array_equal(expected, inputs["A"] @ inputs["B"])

    layout = json.loads((project / "image.json").read_text())
    output = layout["output"]
    region = np.frombuffer((project / "expected_dram_output.bin").read_bytes(), dtype="<i4")
    assert output["elem_bytes"] == 4 and region.size * 4 == output["bytes"]
    # tile-major: blocks of line_block columns, block number outermost
    assert output["line_block"] == 2 and output["stored_shape"] == [3, 6, 2]
    untiled = np.concatenate(list(region.reshape(3, 6, 2)), axis=-1)[:, : expected.shape[1]]
    np.testing.assert_array_equal(untiled, expected)
    regions = sorted((e["base"], e["base"] + e["bytes"]) for e in layout["inputs"])
    regions = sorted([*regions, (output["base"], output["base"] + output["bytes"]),
                      (base, base + len(program))])
    assert all(end <= start for (_, end), (start, _) in zip(regions, regions[1:], strict=False))
    assert layout["image_bytes"] == len(image) == base + len(program)


def test_config_toml_reads_back_as_the_compiled_accelerator(project):
    config = AcceleratorConfig.from_toml(project / "config.toml")
    assert (config.array.rows, config.array.cols, config.scratchpad.banks) == (2, 2, 2)
    assert config.dma.bus_bits == 32 and config.scratchpad.capacity == 1024


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_header_compiles_and_holds_the_configs_numbers(project, tmp_path):
    config = AcceleratorConfig.from_toml(project / "config.toml")
    layout = json.loads((project / "image.json").read_text())
    source = tmp_path / "probe.c"
    source.write_text(
        '#include <stdio.h>\n#include "tensorforge_params.h"\n'
        "static const unsigned shape[] = TF_TENSOR_C_SHAPE;\n"
        "int main(void) {\n"
        '  printf("%d %d %d %d %d %d %d %d\\n", TF_ARRAY_ROWS, TF_ARRAY_COLS, TF_SPAD_LINES,'
        " TF_ACC_LINES, TF_BUS_BITS, TF_REG_INSN_COUNT, (int)sizeof(tf_elem_t),"
        " (int)sizeof(tf_acc_t));\n"
        '  printf("%u %u %d %u\\n", TF_INSN_ADDR, TF_TENSOR_C_BASE, TF_TENSOR_C_RANK,'
        " shape[0]);\n  return 0;\n}\n")
    binary = tmp_path / "probe"
    subprocess.run(["cc", "-Wall", "-Werror", "-I", str(project), str(source), "-o",
                    str(binary)], check=True)
    first, second = subprocess.run([str(binary)], check=True, capture_output=True,
                                   text=True).stdout.splitlines()
    assert list(map(int, first.split())) == [
        2, 2, config.spad_lines, config.acc_lines, 32, 0x0C, 1, 4]
    output = layout["output"]
    assert list(map(int, second.split())) == [
        layout["instruction_base"], output["base"], len(output["stored_shape"]),
        output["stored_shape"][0]]


def _load_runner(project: Path):
    spec = importlib.util.spec_from_file_location("generated_run_test", project / "run_test.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.rtl
@pytest.mark.slow
def test_generated_cocotb_test_passes_on_the_generated_verilog(project, tmp_path):
    """What the README says to do: generate accelerator.v from config.toml (memories not
    zero-filled) and run the generated test, its memories started at random. The model comes
    from the content-keyed cache; a wrong expected output makes the same test fail."""
    from cocotb_tools.runner import get_results

    from tensorforge.sim.rtl_harness import build_model

    assert main(["generate", "--config", str(project / "config.toml"),
                 "--out", str(project)]) == 0
    model = build_model(project / "accelerator.v", top="accelerator")
    runner = _load_runner(project)
    assert get_results(runner.test(model.directory, tmp_path / "good")) == (1, 0)

    expected = project / "expected_dram_output.bin"
    wrong = bytearray(expected.read_bytes())
    wrong[0] ^= 1
    good = expected.read_bytes()
    expected.write_bytes(bytes(wrong))
    try:
        with pytest.raises(SystemExit):  # cocotb's runner exits on a failed test under pytest
            runner.test(model.directory, tmp_path / "bad")
    finally:
        expected.write_bytes(good)
    (results,) = (tmp_path / "bad").glob("*.xml")
    assert get_results(results) == (1, 1)
