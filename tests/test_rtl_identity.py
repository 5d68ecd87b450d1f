"""A measurement is stale when its accelerators' Verilog changed, not when the sources did."""

from __future__ import annotations

from tensorforge.config import AcceleratorConfig
from tensorforge.sim.rtl_identity import REFERENCES, reference_rtl, rtl_changed, rtl_digest
from tensorforge.sim.rtl_run import accelerator_verilog, hardware_digest


def small(rows: int, cols: int, **array) -> AcceleratorConfig:
    return AcceleratorConfig.from_dict({
        "array": {"rows": rows, "cols": cols, **array},
        "scratchpad": {"capacity": 1024, "banks": 2, "accumulator": 512}})


def test_references_are_the_smallest_a_middle_and_the_largest_accelerator():
    configs = [small(2, 2), small(4, 4), small(2, 4), small(2, 2, dataflow="os"), small(2, 2)]
    chosen = [AcceleratorConfig.from_dict(c) for c, _ in reference_rtl(configs)]
    assert len(chosen) == REFERENCES
    assert chosen[0].array.rows * chosen[0].array.cols == 4
    assert chosen[-1] == small(4, 4)


def test_only_a_different_verilog_makes_a_measurement_stale():
    config = small(2, 2)
    references = reference_rtl([config])
    assert references == [[config.to_dict(), rtl_digest(config)]]
    assert rtl_digest(config) != rtl_digest(small(2, 2, dataflow="os"))
    assert not rtl_changed(hardware_digest(), [])
    # other sources, same Verilog (a feature behind a field off by default, a docstring)
    assert not rtl_changed("0" * 16, references)
    # other Verilog
    assert rtl_changed("0" * 16, [[config.to_dict(), "f" * 16]])
    # no references: any source change counts
    assert rtl_changed("0" * 16, [])
    assert len(accelerator_verilog(config)) > 1000
