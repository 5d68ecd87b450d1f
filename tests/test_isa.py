"""The ISA definition: encoding round trips, field limits, and the generated reference."""

from __future__ import annotations

from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorforge import isa
from tensorforge.errors import ConfigError
from tensorforge.paths import repo_root


def _instruction_strategy(kind: type[isa.Instruction]) -> st.SearchStrategy:
    widths = {name: bits for name, (_, bits) in isa.field_offsets(kind.opcode).items()}
    values = {}
    for f in fields(kind):
        if f.name in ("pop_prev", "push_prev") and kind is isa.Load:
            values[f.name] = st.just(False)
        elif f.name in ("pop_next", "push_next") and kind is isa.Store:
            values[f.name] = st.just(False)
        elif f.name == "buffer":
            values[f.name] = st.sampled_from(list(isa.Buffer))
        elif f.name == "mode":
            values[f.name] = st.sampled_from(list(isa.ComputeMode))
        elif widths[f.name] == 1:
            values[f.name] = st.booleans()
        else:
            values[f.name] = st.integers(0, (1 << widths[f.name]) - 1)
    return st.builds(kind, **values)


any_instruction = st.one_of(*(_instruction_strategy(k) for k in isa.INSTRUCTION_TYPES.values()))


@given(st.lists(any_instruction, max_size=20))
def test_program_round_trips_through_bytes(program):
    blob = isa.encode_program(program)
    assert len(blob) == len(program) * isa.INSTRUCTION_BYTES
    assert isa.decode_program(blob) == program


def test_fields_pack_from_bit_zero_without_overlap():
    for opcode in isa.Opcode:
        offsets = isa.field_offsets(opcode)
        assert offsets["opcode"] == (0, 2)
        end = 0
        for lsb, bits in offsets.values():
            assert lsb == end
            end = lsb + bits
        assert end <= isa.INSTRUCTION_BITS


def test_known_encoding_by_hand():
    # COMPUTE (2) with pop_prev (bit 2) and inner=3 at bit 6+1+11 = 18.
    word = isa.Compute(pop_prev=True, inner=3, outer=0).encode()
    assert word == 2 | (1 << 2) | (3 << 18)


def test_overwrite_bit_follows_the_loop_fields_and_round_trips():
    # bit 125, after b_inner (bits 124:116): no existing COMPUTE field moved
    word = isa.Compute(overwrite=True, outer=0, inner=0).encode()
    assert word == 2 | (1 << 125)
    assert isa.decode(word).overwrite is True
    reduction_inner = isa.Compute(overwrite=True, outer=3, inner=2, acc_outer=8)
    assert [(o, i) for o in range(3) for i in range(2) if reduction_inner.overwrites(o, i)] == [
        (0, 0), (1, 0), (2, 0)]
    assert not isa.Compute(overwrite=False).overwrites(0, 0)
    assert not isa.Compute(mode=isa.ComputeMode.ZERO, overwrite=True).overwrites(0, 0)


def test_value_too_wide_for_its_field_is_a_clear_error():
    with pytest.raises(ConfigError, match="rows = 4096 does not fit its 12-bit field"):
        isa.Load(rows=4096)


def test_impossible_dependency_flags_are_rejected():
    with pytest.raises(ConfigError, match="LOAD has no previous unit"):
        isa.Load(pop_prev=True)
    with pytest.raises(ConfigError, match="STORE has no next unit"):
        isa.Store(push_next=True)


def test_truncated_program_is_rejected():
    with pytest.raises(ConfigError, match="16-byte instructions"):
        isa.decode_program(b"\0" * 17)


def test_checked_in_isa_reference_is_current():
    root = repo_root()
    if root is None:
        pytest.skip("not running from a source checkout")
    checked_in = (root / "docs" / "isa.md").read_text()
    assert checked_in == isa.markdown(), (
        "docs/isa.md is stale: run `python -m tensorforge.isa > docs/isa.md`"
    )
