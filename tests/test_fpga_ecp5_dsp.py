"""The ECP5 DSP budget: which multipliers go to LUTs, from Yosys' dump of the ``$mul`` cells."""

from __future__ import annotations

import pytest

from tensorforge.errors import ConfigError
from tensorforge.fpga.ecp5 import dsp_budget, part_dsps
from tensorforge.fpga.ecp5_dsp import (
    Multiplier,
    lut_multipliers,
    read_multipliers,
    selection_file,
)

# What `dump t:$mul` prints for two cells (trimmed to the lines that matter).
DUMP = r"""
  attribute \src "design.v:12.3-12.10"
  cell $mul $flatten\pe_0_1.$mul$design.v:12$7
    parameter \A_SIGNED 1
    parameter \A_WIDTH 8
    parameter \B_SIGNED 1
    parameter \B_WIDTH 8
    parameter \Y_WIDTH 16
    connect \A \pe_0_1.a
  end
  cell $mul \wide
    parameter \A_SIGNED 0
    parameter \A_WIDTH 20
    parameter \B_SIGNED 0
    parameter \B_WIDTH 36
    parameter \Y_WIDTH 56
  end
"""


def test_dump_is_read_into_names_and_widths():
    assert read_multipliers(DUMP) == [
        Multiplier(r"$flatten\pe_0_1.$mul$design.v:12$7", 8, 8),
        Multiplier(r"\wide", 20, 36),
    ]


@pytest.mark.parametrize(
    ("a", "b", "dsps"),
    [(8, 8, 1), (18, 18, 1), (16, 8, 1), (19, 8, 2), (35, 18, 2), (36, 18, 3), (20, 20, 4),
     (1, 8, 0)],
)
def test_dsps_per_multiplier_follow_18_bit_top_and_17_bit_lower_pieces(a, b, dsps):
    assert Multiplier("m", a, b).dsps == dsps


def test_multipliers_beyond_the_budget_go_to_luts_in_name_order():
    cells = [Multiplier(f"m{i:03d}", 8, 8) for i in range(256)]
    on_luts = lut_multipliers(list(reversed(cells)), 156)
    assert [m.name for m in on_luts] == [f"m{i:03d}" for i in range(156, 256)]
    assert lut_multipliers(cells, 256) == []
    assert lut_multipliers(cells, 0) == cells


def test_name_order_is_natural_so_the_last_pes_go_to_luts():
    cells = [Multiplier(f"pe_{r}_{c}.mac.$mul$d.v:{100 - r}$1", 8, 8)
             for r in range(12) for c in range(3)]
    on_luts = lut_multipliers(cells, 30)
    assert [m.name.split(".")[0] for m in on_luts] == [f"pe_{r}_{c}" for r in (10, 11)
                                                       for c in range(3)]


def test_a_wide_multiplier_that_does_not_fit_leaves_room_for_narrow_ones():
    cells = [Multiplier("a", 8, 8), Multiplier("b", 36, 36), Multiplier("c", 8, 8)]
    assert lut_multipliers(cells, 3) == [Multiplier("b", 36, 36)]


def test_selection_file_names_each_cell_under_the_top_module():
    cells = [Multiplier("$mul$x.v:1$2", 8, 8), Multiplier(r"\p", 8, 8)]
    assert selection_file("top", cells) == "top/$mul$x.v:1$2\ntop/\\p\n"


def test_budget_defaults_to_the_parts_dsps_and_rejects_more():
    assert part_dsps("LFE5U-85F") == 156
    assert part_dsps("lfe5um5g-45f") == 72
    assert dsp_budget("LFE5U-25F", None) == 28
    assert dsp_budget("LFE5U-85F", 100) == 100
    with pytest.raises(ConfigError, match="outside 0..156"):
        dsp_budget("LFE5U-85F", 200)
    with pytest.raises(ConfigError, match="outside"):
        dsp_budget("LFE5U-85F", -1)
