"""`tensorforge generate` and the shared hardware flags."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from tensorforge.cli import main
from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args
from tensorforge.config import AcceleratorConfig
from tensorforge.verilog_text import drop_zero_memory_init

SMALL = ["--pe", "2x3", "--spad-kib", "1", "--acc-kib", "1", "--banks", "3", "--bus-bits", "32"]


def _flags(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_hardware_arguments(parser)
    return parser.parse_args(argv)


def test_generate_writes_verilog_config_and_ports(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", *SMALL, "--burst", "4", "--link", "none", "--out", str(out)]) == 0
    verilog = (out / "accelerator.v").read_text()
    assert "module accelerator(" in verilog
    config = AcceleratorConfig.from_dict(json.loads((out / "config.json").read_text()))
    assert (config.array.rows, config.array.cols, config.scratchpad.banks) == (2, 3, 3)
    assert (config.dma.bus_bits, config.dma.max_burst, config.array.interconnect) == (32, 4, "none")
    ports = (out / "ports.md").read_text()
    for text in ("m_axi__araddr", "| output | 32 |", "s_axil__wdata", "insn_count", "0x2c"):
        assert text in ports, text
    printed = capsys.readouterr()
    assert "accelerator.v" in printed.out and "elaborate" not in printed.out
    # the stages, with elapsed time, go to stderr (a 32x32 array converts for minutes)
    stages = [line for line in printed.err.splitlines() if line.startswith("[generate")]
    assert [line.split("] ")[1].split(" ")[0] for line in stages] == [
        "elaborate", "elaborate", "write", "write"]
    assert stages[-1].split("] ")[1].startswith("write Verilog done in")


def test_generate_reads_a_toml_config(tmp_path):
    toml = tmp_path / "acc.toml"
    toml.write_text(
        'intrinsic = "gemv"\n[array]\nrows = 4\ncols = 2\ndataflow = "ws"\n'
        '[scratchpad]\ncapacity = "512B"\nbanks = 2\naccumulator = "256B"\n'
    )
    assert main(["generate", "--config", str(toml), "--out", str(tmp_path / "g")]) == 0
    config = AcceleratorConfig.from_dict(json.loads((tmp_path / "g" / "config.json").read_text()))
    assert config.intrinsic == "gemv" and config.scratchpad.capacity == 512


def test_flags_give_the_documented_defaults():
    config = config_from_args(_flags([]))
    assert config == AcceleratorConfig()
    conv = config_from_args(_flags(["--intrinsic", "conv2d", "--taps", "5"]))
    assert conv.array.local_bytes == 5  # weight-stationary CONV2D keeps the taps in each PE
    assert config_from_args(_flags(["--spad-kib", "32KiB"])).scratchpad.capacity == 32 * 1024
    assert config_from_args(_flags(["--queue-depth", "16"])).controller.queue_depth == 16


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--banks", "0"], "banks must be a positive integer, not 0"),
        (["--pe", "32x32", "--spad-kib", "1"], "cannot hold one gemm step"),
        (["--intrinsic", "matmul"], "--intrinsic must be one of"),
        (["--pe", "8x"], "--pe must be ROWSxCOLS"),
        (["--bus-bits", "48"], "dma.bus_bits must be one of"),
        (["--queue-depth", "6"], "controller.queue_depth must be a power of two"),
        (["--spad-kib", "lots"], "not a size"),
        (["--dataflow", "is", "--pe", "4x8"], "needs a square array"),
        (["--config", "/nonexistent/acc.toml"], "does not exist"),
    ],
)
def test_bad_configurations_are_clear_errors(argv, message, tmp_path, capsys):
    assert main(["generate", *argv, "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "x" / "accelerator.v").exists()


def _memory_words_initialized(verilog: str) -> int:
    """Assignments of a memory word inside ``initial`` blocks (``name[3] = 8'h00;``)."""
    blocks = re.findall(r"^\s*initial begin\n(.*?)^\s*end$", verilog, re.MULTILINE | re.DOTALL)
    return sum(len(re.findall(r"^\s+\S+\[\d+\] = ", block, re.MULTILINE)) for block in blocks)


def test_memories_are_zero_filled_only_when_asked(tmp_path):
    """Without --zero-init no memory word gets an initial value (registers keep their reset
    values); with it every word of the scratchpad banks and the accumulator is zeroed."""
    config = config_from_args(_flags(SMALL))
    assert main(["generate", *SMALL, "--out", str(tmp_path / "plain")]) == 0
    assert main(["generate", *SMALL, "--zero-init", "--out", str(tmp_path / "zeroed")]) == 0
    plain = (tmp_path / "plain" / "accelerator.v").read_text()
    zeroed = (tmp_path / "zeroed" / "accelerator.v").read_text()
    assert _memory_words_initialized(plain) == 0
    buffer_words = config.scratchpad.banks * config.bank_depth + config.acc_lines
    assert _memory_words_initialized(zeroed) >= buffer_words
    assert "reg [" in plain and " = " in plain  # register reset values stay


def test_only_all_zero_memory_inits_are_dropped():
    def cell(bits: str) -> str:
        return (f"  cell $meminit_v2 ${len(bits)}\n    parameter \\WIDTH 2\n"
                f"    connect \\DATA {len(bits)}'{bits}\n  end\n")

    text = "module \\top\n" + cell("0000") + cell("0100") + "end\n"
    kept = drop_zero_memory_init(text)
    assert "4'0100" in kept and "4'0000" not in kept
    assert kept.startswith("module \\top\n") and kept.endswith("  end\nend\n")


def test_generate_for_ecp5_puts_each_pe_on_a_dsp(tmp_path):
    out = tmp_path / "ecp5"
    assert main(["generate", *SMALL, "--target", "ecp5", "--out", str(out)]) == 0
    verilog = (out / "accelerator.v").read_text()
    assert verilog.count("MULT18X18D #(") == 6 and "module MULT18X18D" not in verilog
    with pytest.raises(SystemExit):
        main(["generate", *SMALL, "--target", "xilinx", "--out", str(out)])
