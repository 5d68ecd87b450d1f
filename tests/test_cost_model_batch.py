"""The software search's one-pass batch model (`SoftwareSpace.evaluate_all`, `cost_rows`)
against the model priced one tensorize choice at a time: the same figures, bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest
from batch_model_cases import CASES, REFERENCE, case_batch, one_pass, per_choice, reference_of


@pytest.mark.parametrize("name", list(CASES))
def test_one_pass_gives_the_figures_the_per_choice_model_gave(name):
    """Digests written by the per-choice model before the batch model priced mixed batches
    in one pass (``python tests/batch_model_cases.py --write``); a choice the matcher no
    longer offers is skipped, one it added has no reference yet."""
    stored = json.loads(REFERENCE.read_text())[name]
    now = reference_of(name, one_pass)
    shared = stored.keys() & now.keys()
    assert len(shared) >= max(1, len(stored) // 2), f"{name}: the choices changed: regenerate"
    for choice in sorted(shared):
        changed = [k for k, d in stored[choice]["digests"].items()
                   if now[choice]["digests"].get(k) != d]
        assert not changed, f"{name}, {choice}: {changed} differ from the per-choice model's"
        assert now[choice]["legal"] == stored[choice]["legal"]


@pytest.mark.parametrize("name", list(CASES))
def test_one_pass_equals_pricing_each_choice_on_its_own(name):
    """A batch mixing every tensorize choice of the layer, in one pass, against one
    `cost_model.evaluate` call per choice: every figure of every candidate equal."""
    space, batch, _ = case_batch(name)
    together, apart = one_pass(space, batch), per_choice(space, batch)
    assert together.keys() == apart.keys()
    assert together["legal"].any()
    for figure, values in apart.items():
        np.testing.assert_array_equal(together[figure], values, err_msg=figure)


def test_the_search_prices_a_mixed_batch_in_one_pass_per_stack():
    """The choices of a convolution on a GEMM array stack by the form of their tiles: the
    two im2col choices, and the direct ones in pairs (x and y swapped) by the form of their
    shared input windows (`compiler.tiling.sliding_windows`); one pass per stack."""
    space, batch, choices = case_batch("conv3x3_resnet_16x16")
    assert len(choices) == 10 and len(space.stacks) == 5
    assert len(space.evaluate_all(batch)) == 5


#: What the boundary steps and the timeline add: not priced for an illegal mapping.
SCHEDULED = {"compute_cycles", "load_cycles", "store_cycles", "extra.mac_instructions",
             "extra.transfer_instructions", "extra.dma_beats", "extra.dram_bytes"}


@pytest.mark.parametrize("name", ["conv3x3_resnet_16x16", "conv_strided", "depthwise_gemm",
                                  "conv3x3_is_rtl", "gemm_odd_systolic_rtl"])
def test_the_search_skips_only_what_illegal_mappings_never_use(name):
    """Pricing the boundary steps of legal mappings only (the search's pass): every figure
    of a legal mapping and the cycles (infinite), energy and counts of an illegal one are
    those of the full pass; an illegal one's unit cycles are NaN, and `SoftwareSpace.
    evaluate` reports what the full pass gives."""
    space, batch, _ = case_batch(name)
    full, searched = one_pass(space, batch), one_pass(space, batch, legal_only=True)
    legal = full["legal"]
    assert legal.any() and not legal.all()
    for figure, values in full.items():
        if figure in SCHEDULED:
            np.testing.assert_array_equal(searched[figure][legal], values[legal], figure)
            assert np.isnan(searched[figure][~legal]).all(), figure
        else:
            np.testing.assert_array_equal(searched[figure], values, err_msg=figure)
    cycles, energy, extra = space.evaluate(batch)
    np.testing.assert_array_equal(cycles, full["cycles"])
    np.testing.assert_array_equal(energy, full["energy_pj"])
    for figure in ("compute_cycles", "load_cycles", "utilization"):
        np.testing.assert_array_equal(extra[figure][legal], full[figure][legal])
