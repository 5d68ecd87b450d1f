"""The ECP5 floorplan of a generated accelerator: where its PE DSPs and block RAMs are pinned."""

from __future__ import annotations

import re

import pytest

from tensorforge.fpga.ecp5_floorplan import SITE_GRIDS, plan_floorplan

GRID = SITE_GRIDS["LFE5U-85F"]
SITE = re.compile(r"X(\d+)/Y(\d+)/(MULT18_[0145]|EBR[0-3])")


def accelerator_cells(rows: int, cols: int, rams: int = 32) -> dict[str, dict]:
    """Cells as the ``ecp5`` target names them after Yosys, with fabric cells among them."""
    cells = {f"compute.array.pe_{r}_{c}.mult.mult": {"type": "MULT18X18D"}
             for r in range(rows) for c in range(cols)}
    cells |= {f"scratchpad.bank{b}.ram_s0_l{i}_p0": {"type": "DP16KD"}
              for b in range(4) for i in range(rams // 4)}
    cells |= {f"accumulator.dma_blocks.ram_s0_l{i}_p{p}": {"type": "DP16KD"}
              for i in range(rams // 2) for p in range(2)}
    cells |= {"controller.fetched_TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
              "load.gate.step_mult": {"type": "MULT18X18D"}}
    return cells


def xy(site: str) -> tuple[int, int]:
    match = SITE.fullmatch(site)
    assert match, site
    return int(match[1]), int(match[2])


def test_an_8x8_array_takes_three_dsp_rows_in_order_with_its_rams_between():
    plan = plan_floorplan(accelerator_cells(8, 8), "LFE5U-85F")
    assert plan.summary == ("64 PE DSPs on Y10/34/58 X40-92; scratchpad RAMs on Y22; "
                            "accumulator RAMs on Y46")
    assert len(set(plan.bels.values())) == len(plan.bels) == 64 + 32 + 32
    assert "load.gate.step_mult" not in plan.bels  # a multiplier outside the array
    pe = {(r, c): xy(plan.bels[f"compute.array.pe_{r}_{c}.mult.mult"])
          for r in range(8) for c in range(8)}
    for (r, _), (x, y) in pe.items():
        assert y == GRID.dsp_rows[r // 3]  # array rows 0-2, 3-5, 6-7
        assert x - max(b for b in GRID.blocks if b <= x) in (0, 1, 4, 5)  # a DSP site's X
    for r in range(8):  # each array row left to right, neighbours at most a tile block apart
        xs = [pe[r, c][0] for c in range(8)]  # (11 columns across the die's middle)
        assert xs == sorted(xs) and max(b - a for a, b in zip(xs, xs[1:], strict=False)) <= 11
    xs = [x for x, _ in pe.values()]
    assert max(xs) - min(xs) <= 6 * 9  # six tile blocks, centred on the die
    assert abs((max(xs) + min(xs)) / 2 - GRID.middle[0]) <= 9
    rams = {name: xy(site) for name, site in plan.bels.items() if "ram_" in name}
    assert {y for name, (_, y) in rams.items() if name.startswith("scratchpad.")} == {22}
    assert {y for name, (_, y) in rams.items() if name.startswith("accumulator.")} == {46}
    assert min(x for x, _ in rams.values()) == min(xs)  # under the array's first column


def test_a_4x4_array_takes_the_two_middle_dsp_rows():
    plan = plan_floorplan(accelerator_cells(4, 4, rams=8), "LFE5U-85F")
    ys = {xy(site)[1] for name, site in plan.bels.items() if ".pe_" in name}
    assert ys == {34, 58}
    assert plan.summary.startswith("16 PE DSPs on Y34/58")
    assert "scratchpad RAMs on Y46" in plan.summary  # the row between them


def test_the_same_cells_inside_an_soc_are_found_by_hierarchy():
    cells = {f"soc.accel.{name}": cell for name, cell in accelerator_cells(2, 2, 8).items()}
    assert len(plan_floorplan(cells, "lfe5um5g-85f").bels) == 4 + 8 + 8


@pytest.mark.parametrize(("cells", "part"), [
    ({"mac.product": {"type": "MULT18X18D"}, "r": {"type": "TRELLIS_FF"}}, "LFE5U-85F"),
    (accelerator_cells(8, 8), "LFE5U-45F"),  # no site data for this die
    # a 16x16 on the 85F: 156 PEs on DSPs, rows too long for whole array rows per DSP row
    ({f"compute.array.pe_{i // 16}_{i % 16}.mult.mult": {"type": "MULT18X18D"}
      for i in range(156)}, "LFE5U-85F"),
])
def test_what_it_cannot_plan_is_left_to_the_placer(cells, part):
    plan = plan_floorplan(cells, part)
    assert plan.bels == {} and plan.summary == "none"


@pytest.mark.synth
def test_nextpnr_places_a_generated_arrays_dsps_where_the_floorplan_says(module_workspace):
    """A 2x2 ``ecp5`` PE array through the flow: the floorplan (on by default) pins its four
    MULT18X18D on the DSP row nearest the die's middle, nextpnr places them there, and the
    report names it; without it nothing is pinned."""
    from tensorforge.dse.calibrate import Design, _config, block_verilog
    from tensorforge.fpga.ecp5 import synthesize_ecp5
    from tensorforge.store import ResultStore

    text, top = block_verilog(Design("pe_array", _config(2, 2, "none")), target="ecp5")
    store = ResultStore(module_workspace / "floorplan.sqlite")
    kept = module_workspace / "planned"
    planned = synthesize_ecp5(text, top, out_of_context=True, store=store, keep_run=kept)
    assert planned.dsps == 4 and planned.floorplan == "4 PE DSPs on Y58 X58-63"
    assert "Placed 4 cells based on constraints" in (kept / "nextpnr.log").read_text()
    free = synthesize_ecp5(text, top, out_of_context=True, store=store, floorplan=False,
                           keep_run=module_workspace / "free")
    assert free.floorplan == "none" and free.dsps == 4
    assert "Placed 0 cells based on constraints" in (
        module_workspace / "free" / "nextpnr.log").read_text()
