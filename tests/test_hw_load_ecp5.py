"""The ``ecp5`` load unit's outputs toward the read arbiter start from flip-flops.

Its data and results are checked on Verilator against the reference with random stalls on
every channel (tests/test_hw_dma.py, both targets) and in the whole accelerator
(tests/test_hw_dsp.py); this checks the structure that target is built for (issue 17): RREADY
is the R slice's register (through an inverter), ARVALID, ARADDR and ARLEN the AR slice's
registers, so no decision of the unit's reaches the arbiter in the cycle it is made.
"""

from __future__ import annotations

import pytest
from yosys_cones import cone, failed_checks

from tensorforge.config import AcceleratorConfig, ArrayConfig, DmaConfig, ScratchpadConfig
from tensorforge.hw.load_unit import LoadUnit

# the most cells other than flip-flops in each output's cone (RREADY: an inverter)
MOST_GATES = {"axi__rready": 1, "axi__arvalid": 0, "axi__araddr": 0, "axi__arlen": 0}


@pytest.mark.synth
def test_ecp5_load_unit_drives_r_and_ar_handshakes_from_flip_flops(tmp_path):
    from amaranth.back import verilog

    config = AcceleratorConfig(
        array=ArrayConfig(rows=8, cols=8),
        scratchpad=ScratchpadConfig(capacity=8192, banks=2, accumulator=8192),
        dma=DmaConfig(bus_bits=64, max_burst=4, outstanding=3))
    checks = []
    for port, gates in MOST_GATES.items():
        checks += [f"select -assert-max {gates} {cone(port)} t:* %i t:$*dff* %d",
                   f"select -assert-min 1 {cone(port)} t:$*dff* %i"]
    logs = {target: failed_checks(tmp_path, target, verilog.convert(
                LoadUnit(config, target), name="load_unit", emit_src=False), "load_unit", checks)
            for target in ("ecp5", "generic")}
    assert not logs["ecp5"], logs["ecp5"]
    # the same check finds the generic unit's RREADY, a function of its byte counts
    assert "Assertion failed: selection contains" in logs["generic"], logs["generic"]
    assert "o:axi__rready" in logs["generic"], logs["generic"]
