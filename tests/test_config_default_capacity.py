"""The default scratchpad is valid on every legal array (issue 16, item 5b).

A fixed 64 KiB default was more lines than the ISA addresses on arrays with lines narrower
than 4 B (a 3x3 CONV2D array has 3 B lines), so `generate --intrinsic conv2d --pe 3x3` failed
with no flag of the user's to blame. The default is now derived from the line width.
"""

from __future__ import annotations

import argparse
import itertools

import pytest

from tensorforge.cli import main
from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args
from tensorforge.config import DATAFLOWS, MAX_SPAD_LINES, AcceleratorConfig, ScratchpadConfig
from tensorforge.intrinsics import Intrinsic
from tensorforge.units import Bytes

CONV_3X3 = ["--intrinsic", "conv2d", "--pe", "3x3"]


def _config(argv: list[str]) -> AcceleratorConfig:
    parser = argparse.ArgumentParser()
    add_hardware_arguments(parser)
    return config_from_args(parser.parse_args(argv))


@pytest.mark.parametrize("intrinsic", list(Intrinsic), ids=lambda i: i.value)
def test_every_small_array_gets_a_valid_default_scratchpad(intrinsic):
    for rows, cols, dataflow in itertools.product(range(1, 9), range(1, 9), DATAFLOWS[intrinsic]):
        if dataflow.value == "is" and rows != cols:
            continue  # input-stationary needs a square array: a user error, not a default's
        argv = ["--intrinsic", intrinsic.value, "--pe", f"{rows}x{cols}"]
        config = _config([*argv, "--dataflow", dataflow.value])
        assert config.spad_lines <= MAX_SPAD_LINES, argv
        # The ISA's whole line range or the 64 KiB default, whichever is smaller.
        expected = min(Bytes.kib(64), MAX_SPAD_LINES * config.spad_line_bytes)
        assert config.scratchpad.capacity == expected, argv


def test_wide_lines_keep_the_64_kib_default_and_its_hash():
    explicit = AcceleratorConfig(scratchpad=ScratchpadConfig(capacity=Bytes.kib(64)))
    assert AcceleratorConfig().scratchpad.capacity == Bytes.kib(64)
    assert AcceleratorConfig().to_dict() == explicit.to_dict()


def test_conv2d_3x3_default_is_every_line_the_isa_addresses():
    config = _config(CONV_3X3)
    assert config.spad_line_bytes == 3
    assert (config.scratchpad.capacity, config.spad_lines) == (Bytes.kib(48), MAX_SPAD_LINES)


def test_an_explicit_capacity_too_large_for_the_isa_is_still_refused():
    with pytest.raises(Exception, match="the ISA addresses at most 16384 lines"):
        _config([*CONV_3X3, "--spad-kib", "64"])


def test_generate_and_compile_conv2d_on_3x3_with_defaults(tmp_path, capsys):
    assert main(["generate", *CONV_3X3, "--out", str(tmp_path / "gen")]) == 0
    assert "module accelerator(" in (tmp_path / "gen" / "accelerator.v").read_text()
    workload = "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]"
    sizes = "k=4,c=3,x=6,y=6,r=3,s=3"
    assert main(["compile", *CONV_3X3, "--workload", workload, "--sizes", sizes, "--check"]) == 0
    assert "equal to the numpy reference" in capsys.readouterr().out
