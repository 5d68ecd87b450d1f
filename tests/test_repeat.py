"""``controller.repeat``: LOAD and STORE with a repeat count, expanded by the controller.

The references: `isa.expand` is checked on a hand-worked instruction; a folded program must
give back, run by run, the instructions it was folded from (as the controller expands them),
compute what numpy computes, and on the RTL match numpy with the DRAM traffic its
instructions imply and the cycles the timeline model gives within the fidelity target.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping, device_choices
from tensorforge.compiler.mapping import random_mapping
from tensorforge.compiler.repeats import fold_repeats
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig, ControllerConfig
from tensorforge.errors import ConfigError, SimulationError
from tensorforge.isa import Buffer, Finish, Load, Store, decode, expand
from tensorforge.sim.functional import run_program
from tensorforge.sim.rtl_matrix import all_configs

# the regression's gemm 4x4 (2 KiB scratchpad), with and without the expander: one of the two
# is the regression's own model, so the RTL test below builds one more
BASE = all_configs()["gemm4x4-systolic-ws"]
PLAIN = dataclasses.replace(BASE, controller=ControllerConfig(repeat=False))
REPEAT = dataclasses.replace(BASE, controller=ControllerConfig(repeat=True))
CONV = parse_workload("C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]", "k=8,x=10,y=10,c=8,r=3,s=3",
                      name="conv")
GEMM = parse_workload("C[i,j] += A[i,k] * B[k,j]", "i=24,j=20,k=36", name="gemm")
# padded and strided: its window rows are data LOADs with zero-line LOADs between them
STRIDED = parse_workload("C[k,x,y] += A[c,x*2+r-1,y*2+s-1] * B[k,c,r,s]",
                         "k=8,c=4,x=6,y=7,r=3,s=3", name="strided")


def test_expand_by_hand():
    """Three runs of a LOAD with a zero line on each side: lines 0, 5, 10 (1 + 3 + 1 lines a
    run), DRAM 100 + n * 7 rows * 4 elements * 1 byte; tokens at the ends only."""
    load = Load(buffer=Buffer.SPAD, line=0, dram_addr=100, rows=3, row_len=4, stride=4,
                pad_before=1, pad_after=1, repeat=2, repeat_stride=7, pop_next=True,
                push_next=True)
    runs = expand([load, Finish()], in_bytes=1, acc_bytes=4)
    assert [(r.line, r.dram_addr) for r in runs[:3]] == [(0, 100), (5, 128), (10, 156)]
    assert [(r.pop_next, r.push_next) for r in runs[:3]] == [(True, False), (False, False),
                                                            (False, True)]
    assert all(r.repeat == 0 and r.repeat_stride == 0 for r in runs[:3])
    assert isinstance(runs[3], Finish)
    store = Store(line=8, dram_addr=0, rows=2, row_len=4, stride=4, repeat=1, repeat_stride=3)
    assert [(r.line, r.dram_addr) for r in expand([store], 1, 4)] == [(8, 0), (10, 48)]
    assert decode(load.encode()) == load and decode(store.encode()) == store


def test_plain_programs_are_untouched():
    """Without the option nothing folds; the field is left out of a configuration's dict
    (and so of its hash) only at its default, and both settings round-trip."""
    program = generate(CONV, default_mapping(CONV, PLAIN), PLAIN)
    assert fold_repeats(list(program.instructions), PLAIN) == list(program.instructions)
    assert not any(getattr(i, "repeat", 0) for i in program.instructions)
    default = ControllerConfig().repeat
    for config in (PLAIN, REPEAT):
        for depth in (4, 8):
            changed = dataclasses.replace(config, controller=ControllerConfig(
                queue_depth=depth, repeat=config.controller.repeat))
            assert AcceleratorConfig.from_dict(changed.to_dict()) == changed
            written = changed.to_dict().get("controller", {})
            assert ("repeat" in written) == (changed.controller.repeat != default)
    with pytest.raises(ConfigError, match="controller.repeat"):
        ControllerConfig(repeat=1)


def _programs(config, seed=0):
    rng = np.random.default_rng(seed)
    for workload in (CONV, GEMM, STRIDED):
        yield workload, default_mapping(workload, config)
        for choice in device_choices(workload, config)[:2]:
            yield workload, random_mapping(workload, choice, config, rng)


@pytest.mark.parametrize("index", range(9))
def test_folded_programs_give_back_their_instructions_and_are_exact(index, random_seed):
    """A folded program's runs write every line from the same DRAM bytes (or zeros), store
    the same lines to the same bytes, and carry the same tokens as the program it was
    folded from, and it computes what numpy computes; it is shorter wherever a tile has
    several rows."""
    workload, mapping = list(_programs(REPEAT, random_seed))[index]
    plain = generate(workload, mapping, PLAIN).instructions
    folded = generate(workload, mapping, REPEAT).instructions
    assert len(folded) <= len(plain)
    runs = expand(folded, 1, 4)
    assert _effects(runs) == _effects(plain)
    assert sorted(map(_quiet, (i for i in runs if not isinstance(i, Load | Store)))) == sorted(
        map(_quiet, (i for i in plain if not isinstance(i, Load | Store))))
    for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):  # the same tokens
        assert ([(type(i), getattr(i, flag)) for i in runs if getattr(i, flag)]
                == [(type(i), getattr(i, flag)) for i in plain if getattr(i, flag)])
    inputs = workload.random_inputs(np.random.default_rng(random_seed))
    program = generate(workload, mapping, REPEAT)
    np.testing.assert_array_equal(program.run_functional(inputs), workload.reference(inputs))


def _effects(instructions) -> Counter:
    """What the LOADs and STOREs move, line by line: (buffer, line, DRAM byte or None for a
    zero line) per LOADed line and (line, DRAM byte) per STOREd row, as a multiset."""
    moved = Counter()
    for i in instructions:
        if isinstance(i, Load):
            rows = [i.dram_addr + r * i.stride * (4 if i.buffer is Buffer.ACC else 1)
                    if i.row_len else None for r in range(i.rows)]
            lines = [None] * i.pad_before + rows + [None] * i.pad_after
            moved.update((i.buffer, i.line + n, at) for n, at in enumerate(lines))
        elif isinstance(i, Store):
            moved.update(("C", i.line + r, i.dram_addr + r * i.stride * 4) for r in range(i.rows))
    return moved


def _quiet(instruction) -> str:
    return repr(dataclasses.replace(instruction, pop_prev=False, pop_next=False,
                                    push_prev=False, push_next=False))


def test_the_default_conv_mapping_folds_its_rows():
    program = generate(CONV, default_mapping(CONV, REPEAT), REPEAT)
    assert any(getattr(i, "repeat", 0) for i in program.instructions)


def test_zero_line_loads_join_the_load_before_them():
    """The strided window's zero-line LOADs become their data LOADs' pad_after."""
    mapping = default_mapping(STRIDED, REPEAT)
    zero_only = [sum(isinstance(i, Load) and not i.rows for i in generate(
        STRIDED, mapping, config).instructions) for config in (PLAIN, REPEAT)]
    assert zero_only[0] > zero_only[1]


def test_the_c_header_says_whether_transfers_repeat():
    from tensorforge.c_header import accelerator_header

    for config, flag in ((PLAIN, 0), (REPEAT, 1)):
        header = accelerator_header(generate(CONV, default_mapping(CONV, config), config))
        assert f"#define TF_REPEAT {flag}" in header


def test_a_repeat_needs_the_option():
    load = Load(line=0, dram_addr=0, rows=1, row_len=4, stride=4, repeat=1, repeat_stride=1)
    with pytest.raises(SimulationError, match="controller.repeat"):
        run_program(PLAIN, [load, Finish()], bytearray(64))
    run_program(REPEAT, [load, Finish()], bytearray(64))


def test_the_expander_is_absent_without_the_option():
    """The plain accelerator's Verilog has no run counter (it is the calibrated hardware);
    the repeating one has one per DMA gate."""
    from tensorforge.sim.rtl_run import accelerator_verilog

    assert "runs_left" not in accelerator_verilog(PLAIN)
    text = accelerator_verilog(REPEAT)
    assert "load_runs_left" in text and "store_runs_left" in text


@pytest.mark.rtl
def test_rtl_runs_repeated_transfers(random_seed):
    """Folded programs on the repeating accelerator's RTL: equal to numpy, the DRAM bytes
    their runs and fetch imply, and the timeline model no further from the RTL's cycles
    than on the same program unfolded on the plain accelerator (or within the fidelity
    target): the model's error on these load-bound random mappings is its own, not the
    repeats'."""
    from tensorforge.dse.fidelity import TARGET_MAX_ERROR, model_cycles
    from tensorforge.memory import DEFAULT_MEMORY
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    programs = list(_programs(REPEAT, random_seed))
    errors = {}
    for config in (PLAIN, REPEAT):
        cases = [RtlCase(w, program=generate(w, m, config), seed=random_seed)
                 for w, m in programs]
        results = run_programs_on_rtl(config, cases, RunOptions(seed=random_seed))
        for (workload, _), result in zip(programs, results, strict=True):
            assert result.match, (workload, result.mismatches)
            assert result.dram_bytes_read == result.expected_traffic.read
            assert result.dram_bytes_written == result.expected_traffic.written
        errors[config.controller.repeat] = [
            abs(model_cycles(w, m, config, DEFAULT_MEMORY) / r.cycles - 1)
            for (w, m), r in zip(programs, results, strict=True)]
    assert any(getattr(i, "repeat", 0) for w, m in programs
               for i in generate(w, m, REPEAT).instructions)
    for plain, folded, program in zip(errors[False], errors[True], programs, strict=True):
        assert folded <= max(TARGET_MAX_ERROR, plain + 0.03), (program, plain, folded)


@pytest.mark.rtl
def test_rtl_runs_repeated_transfers_on_ecp5(random_seed):
    """The same folded programs on the ``ecp5`` target's RTL (its pipeline registers, the
    scratchpad's registered read requests among them): equal to numpy, with the DRAM bytes
    their runs and fetch imply."""
    from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

    programs = list(_programs(REPEAT, random_seed))
    cases = [RtlCase(w, program=generate(w, m, REPEAT), seed=random_seed) for w, m in programs]
    results = run_programs_on_rtl(REPEAT, cases, RunOptions(seed=random_seed, target="ecp5"))
    for (workload, _), result in zip(programs, results, strict=True):
        assert result.match, (workload, result.mismatches)
        assert result.dram_bytes_read == result.expected_traffic.read
        assert result.dram_bytes_written == result.expected_traffic.written
