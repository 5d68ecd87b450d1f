"""Verilog with signed ports goes through both synthesis flows (issue 16, item 5).

A 4-tap FIR with ``input signed [7:0] x`` failed the ASIC flow: Yosys wrote ``signed`` into the
mapped netlist and OpenSTA's reader rejected it, so a run that had printed timing and power was
reported as failed. Both flows run here from the command line, as a user would.
"""

from __future__ import annotations

import json

import pytest
from test_fpga_ihp import FIR

from tensorforge.cli import main


@pytest.mark.synth
@pytest.mark.parametrize("flow", ["ecp5", "asic"])
def test_signed_fir_synthesizes_on_both_flows(flow, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TENSORFORGE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "fir.v"
    source.write_text(FIR)
    code = main(["synth", str(source), "--top", "fir", "--flow", flow, "--json",
                 "--store", str(tmp_path / "results.sqlite")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert report["top"] == "fir"
    assert report["critical_path_ns"] > 0
