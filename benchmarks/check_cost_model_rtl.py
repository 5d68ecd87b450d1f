"""The cost model's latency against RTL cycle counts: ``python benchmarks/check_cost_model_rtl.py``.

Runs small GEMM, GEMV and padded 2D-convolution programs (default mappings, checked against
numpy) on the Verilator models of three accelerators of the RTL regression suite (so their
models are usually built already) and prints, per program, the cost model's cycles beside the
RTL's, with the ratio, and each unit's busy cycles (load / compute / store) beside the model's
per-unit cycles. The simulated DRAM is ideal unless ``--latency`` adds cycles per burst; the
model is then given the same latency (`rtl_parameters`).

    .venv/bin/python benchmarks/check_cost_model_rtl.py [--latency CYCLES] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.cost_model import evaluate_mapping, rtl_parameters
from tensorforge.dse.cost_parameters import fetch_cycles
from tensorforge.dse.cost_trace import TraceTerms, trace_cycles
from tensorforge.dse.fidelity_cases import (
    CALIBRATION_CONFIGS,
    TEXTS,
    FidelityCase,
    calibration_cases,
    latency_only,
)
from tensorforge.hw.dataflow_plan import plan_for
from tensorforge.isa import Compute, ComputeMode, Load, Store
from tensorforge.paths import rtl_commit
from tensorforge.sim.axi_traffic import dram_rows
from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl

ROOT = Path(__file__).resolve().parent.parent


#: The calibration programs, grouped by configuration (one simulator process each).
PLAN = {name: [c for c in calibration_cases() if c.config_name == name and not c.dram_latency]
        for name in CALIBRATION_CONFIGS}


#: Where each latency term of `CostParameters` comes from (printed under the table).
TERMS = [
    "Where the terms of `CostParameters` come from (per-unit busy counters of these programs,",
    "regressed on their instruction counts, rows and beats):",
    "",
    "| term | value | origin |",
    "|---|---|---|",
    "| LOAD / STORE stream | the larger of its beats (`beat_cycles` each: above 1 where the "
    "DRAM's bandwidth is below the bus's) and its lines (a line a cycle), or its bursts "
    "spaced by (latency + round trip) / bursts in flight; + a cycle per zero line | the DMA "
    "units' contracts (hw/load_unit.py, hw/store_unit.py); bursts in flight = "
    "`dma.outstanding` (and the memory's limit); the round trip `burst_round_trip_cycles` "
    "fitted by `--dram` (`cost_parameters.RTL_FITTED_TERMS`) |",
    "| LOAD / STORE: per instruction | `load_fixed_cycles` / `store_fixed_cycles` + "
    "`issue_cycles` 1, hidden under the stream but for a transfer's first instruction "
    "(`_unit_time`) | the retiring units take the next instruction while the last one's data "
    "streams (hw/load_unit.py, hw/store_unit.py); the fixed costs fitted by `--dram` on the "
    "calibration programs' cycles |",
    "| DRAM latency | `dram_latency_cycles` as a delay: a LOAD's data arrives that long after "
    "its stream, the program ends that long after its last STORE (`cost_timeline.timeline`); "
    "here the simulated DRAM's (`--latency`), in a sweep the `MemorySystem`'s | the units "
    "keep bursts in flight across instructions, so the latency is not their work |",
    "| MAC step | streamed beats; a stationary change costs max(beats, stationary lines) | "
    "`ComputeUnit` contract; bank conflicts of reloads weighted by `reload_conflict_share` "
    "0 (RTL: 24-75 conflict cycles per program, the old model charged up to a beat each) |",
    "| MAC run on one stationary block (`_step_cycles`) | at least (`bank_reuse_gap` + "
    "stationary lines + run beats - 1) / `local_banks` | a PE store bank takes its next "
    "block only `bank_reuse_gap` cycles after its last beat (8 on systolic DOT 8: A changing "
    "every step costs 4.5 cycles a step, Amaranth sim of the compute unit) |",
    "| C line revisited every d steps | d steps take at least `AccumulatorBuffer.read_latency`"
    " + 2 = 3 cycles | the accumulator walker reads a line only after its last write (pending "
    "entry clears, read, writer FIFO); Amaranth sim: 1.53 cycles a step at d = 2, none from "
    "d = 3 on, on gemv 4x6, gemv 4x4 systolic, DOT 4 and DOT 8 alike (the array latency does "
    "not enter) |",
    "| MAC instruction | `instruction_fill_cycles` 2 + `issue_cycles` 1 | `ComputeUnit` "
    "contract (the next instruction starts while the last drains) and the fill of 2 that "
    "`compiler/mappers.py` measured; was stationary lines + array latency + 1 = 16 on 4x4, "
    "which charged gemm 32x24x40 1.9x the RTL's compute |",
    "| ZERO instruction | one isolated step (`step_latency`, 25 on 4x4) + 1 + a line a cycle"
    " | the array drains before a ZERO and refills after it; with the MAC term it gives the "
    "COMPUTE overheads above (bank stalls included) |",
    "| LOAD/STORE instructions, bytes, beats, bursts | per distinct tile, what the code "
    "generator emits for it (`dse/cost_transfers.py` runs its `_load`/`_store`), summed over "
    "full and remainder tiles; a repeated instruction's runs are commands of the DMA unit "
    "(fixed cost each, hidden under the stream but a transfer's first) and wait `run_cycles` "
    "2 each at the gate | equal to the compiled programs' on every fidelity program; "
    "the search ranks with the closed form (`cost_geometry.transfers`, row-major runs, "
    "folded along the tile's second dimension where `repeat_stride` holds its DRAM step: "
    "`tests/test_cost_folds.py`) and re-prices its choice exactly |",
    "| split first / last tile step (`cost_split`) | chunks of 1, 1, 2, 4, ... blocks (the "
    "last step's reversed) along the index the code generator picks, each priced as a tile "
    "step of its own (`cost_tile_step.tile_costs`: its LOADs, micro-loop, STOREs) | "
    "`tile_walk.TileWalker._split_step`, `_chunks`; the MAC instruction counts equal the "
    "programs' on 6 of 7 "
    "(`tests/test_cost_model.py` checks the output-stationary gemm 16x16x16 ones) |",
    "| gate gap | `gate_cycles` (fitted by `--dram`; `Controller.gate_latency` + 1 = 4) "
    "idle cycles before each "
    "LOAD and STORE (none before a COMPUTE: that gate takes the next command while the unit "
    "runs) | `hw/controller.py`: take, check tokens, issue, and the unit lowers `idle` a cycle "
    "after it accepts; RTL: the controller line above (one-row LOADs alone: 11.0 cycles a "
    "command at 6.7 busy) |",
    "| dispatch window | `dispatch_window` = `controller.queue_depth` + 1 (4 + 1 = 5 by "
    "default): an "
    "instruction enters its unit's queue once the one 5 before it on that unit has ended, "
    "and dispatch is in program order | `hw/controller.py`; a step with more STOREs than "
    "that holds back the next step's LOADs and COMPUTEs until its STOREs run: the "
    "output-stationary gemm 16x16x16 programs store a tile in 8 STOREs (a chunk of the last "
    "step too), so their units run nearly one after another (busy counters 1.05-1.08x the "
    "cycles) |",
    "| instruction fetch | `fetch_cycles` = (`fetch_request_cycles` 3 + DRAM latency + the "
    "beats of a chunk of max(16, bus) bytes + 1 a dispatch) / instructions a chunk: 6 here | "
    "`Controller._fetch` reads a chunk only once the last is dispatched; RTL: the controller "
    "line above (LOAD and STORE alternating: 6.2 cycles an instruction) |",
    "| host copy | `host_cycles`, left out of this table's model cycles | a gathered or "
    "im2col layout is built before the run starts, so the RTL does not count it; the DSE "
    "still charges it (a serial DRAM copy at full bus rate) |",
    "",
    "The timeline (`cost_timeline.timeline`) runs the units as a max-plus recurrence over the",
    "chunks of the first and last tile steps and up to `NEAR_STEPS` = 16 unsplit steps next",
    "to them, each unit starting when its tokens, its predecessor on the unit, dispatch and",
    "fetch allow; the steps between (long programs) are summed by the periodic overlap",
    "(`_overlapped`, with the same dispatch and fetch bounds), within 5% of running them",
    "through the timeline on random GEMM mappings.",
    "",
    "Known gaps, by the table: DOT 8 gemv 48x40 stays 1.22 of the RTL, all of it in its",
    "compute (the model's compute is 1.22x the RTL's busy cycles there: A changes every step",
    "and each C tile's first MAC waits one isolated step; neither is re-measured on DOT 8).",
    "The timeline takes each unit's mean cost per unsplit tile step (partial tiles averaged),",
    "counts the dispatch window per group (not instructions of earlier groups still queued),",
    "and leaves out token round trips (2-3 cycles each). The padded convolution was 1.40",
    "before because its host copy (546 cycles) was compared with an RTL run that does not",
    "include it, not because of fill and drain. Agreement on programs the model was not",
    "fitted on: docs/fidelity.md (`tensorforge validate`; `tests/test_fidelity.py` holds a",
    "12-program held-out sample to 10% per program and 5% mean).",
]


@dataclass(frozen=True)
class Comparison:
    """One program: the model's cycles and per-unit cycles beside the RTL's counters."""

    config: str
    workload: str
    match: bool
    model: dict[str, float]
    rtl: dict[str, int]
    counts: dict[str, int]

    @property
    def accelerator_cycles(self) -> float:
        """The model's cycles without the host's copy (`host_cycles`: gathered or im2col
        layouts), which happens before the RTL run starts and so is not in its count."""
        return self.model["cycles"] - self.model["host_cycles"]

    @property
    def ratio(self) -> float:
        """Model / RTL accelerator cycles (1.0: exact; above 1: the model is pessimistic)."""
        return self.accelerator_cycles / self.rtl["cycles"]


def compare(cases: list[FidelityCase], latency: int = 0, seed: int = 1) -> list[Comparison]:
    """Run one configuration's calibration ``cases`` on its RTL and evaluate the model on each."""
    config = cases[0].config
    workloads = [case.workload() for case in cases]
    mappings = [default_mapping(w, config, latency_only(latency)) for w in workloads]
    rtl_cases = [RtlCase(w, m, seed=seed) for w, m in zip(workloads, mappings, strict=True)]
    options = RunOptions(memory=latency_only(latency), seed=seed)
    results = run_programs_on_rtl(config, rtl_cases, options)
    parameters = rtl_parameters(latency_only(latency), config)
    comparisons = []
    for case, workload, mapping, result in zip(cases, workloads, mappings, results,
                                               strict=True):
        model = evaluate_mapping(workload, mapping, config, parameters)
        rtl = {"cycles": result.cycles, "load_cycles": result.load_busy,
               "compute_cycles": result.compute_busy, "store_cycles": result.store_busy,
               "bank_conflicts": result.bank_conflict_stalls}
        counts = instruction_counts(generate(workload, mapping, config), config)
        comparisons.append(Comparison(case.config_name, f"{case.kind} {case.sizes}",
                                      result.match, model, rtl, counts))
    return comparisons


def instruction_counts(program, config: AcceleratorConfig) -> dict[str, int]:
    """What each unit is given: LOAD/STORE instructions, rows and beats; MAC and ZERO
    instructions, MAC steps and cleared lines."""
    counts = dict.fromkeys(("loads", "load_rows", "load_beats", "pad_lines", "stores",
                            "store_beats", "macs", "mac_steps", "zeros", "zero_lines"), 0)
    bus = config.dma.bus_bytes
    for instruction in program.instructions:
        if isinstance(instruction, Load | Store):
            rows = dram_rows(config, instruction)
            beats = sum((start + size - 1) // bus - start // bus + 1 for start, size in rows)
            kind = "load" if isinstance(instruction, Load) else "store"
            counts[f"{kind}s"] += 1
            counts[f"{kind}_beats"] += beats
            if kind == "load":
                counts["load_rows"] += len(rows)
                counts["pad_lines"] += instruction.rows - len(rows) + (
                    instruction.pad_before + instruction.pad_after)
        elif isinstance(instruction, Compute):
            steps = instruction.outer * instruction.inner
            zero = instruction.mode is ComputeMode.ZERO
            counts["zeros" if zero else "macs"] += 1
            counts["zero_lines" if zero else "mac_steps"] += steps * (
                config.blocks["C"].lines if zero else 1)
    return counts


def unit_terms(comparisons: list[Comparison]) -> list[str]:
    """Least-squares per-unit terms from the RTL busy counters: LOAD busy on rows and LOADs
    (all programs), STORE busy beyond its beats per STORE, and on the weight-stationary GEMM
    configuration COMPUTE busy beyond its beats and cleared lines beside the model's (three
    programs cannot separate MAC from ZERO overheads by regression)."""
    load = np.array([[c.counts["load_rows"], c.counts["loads"]] for c in comparisons], float)
    load_busy = [c.rtl["load_cycles"] - c.counts["pad_lines"] for c in comparisons]
    per_row, per_load = np.linalg.lstsq(load, load_busy, rcond=None)[0]
    per_store = [(c.rtl["store_cycles"] - c.counts["store_beats"]) / c.counts["stores"]
                 for c in comparisons]
    ws = [c for c in comparisons if c.config == "gemm4x4-systolic-ws"]
    beats = len(plan_for(CALIBRATION_CONFIGS["gemm4x4-systolic-ws"]).beats)
    streamed = [beats * c.counts["mac_steps"] + c.counts["zero_lines"] for c in ws]
    overheads = ", ".join(
        f"{c.workload}: RTL {c.rtl['compute_cycles'] - s:,.0f}, model "
        f"{c.model['compute_cycles'] - s:,.0f} ({c.counts['macs']} MAC, {c.counts['zeros']} "
        f"ZERO instructions)" for c, s in zip(ws, streamed, strict=True))
    return [f"LOAD busy = {per_row:.2f} x rows + {per_load:.1f} x LOADs (+ pad lines)",
            f"STORE busy - beats per STORE: {min(per_store):.1f} to {max(per_store):.1f}",
            f"COMPUTE busy beyond beats and ZERO lines (gemm 4x4 ws): {overheads}"]


#: Synthetic programs that time the controller alone: each repeats one-row LOADs, one-row
#: STOREs and/or one-step MACs, without tokens (the units never wait for each other).
CONTROLLER_MIXES = {"LOAD": "L", "STORE": "S", "LOAD, STORE": "LS", "LOAD, STORE, MAC": "LSC"}
CONTROLLER_REPEATS = 30


def controller_terms(latency: int = 0) -> list[str]:
    """Cycles an instruction of each `CONTROLLER_MIXES` program on the DOT 8 RTL (its output
    is not checked: the programs only move data), beside what the model takes for the gate's
    gap and the fetch of an instruction. A unit alone shows its busy cycles plus the gate's
    gap; mixes of units, whose own times overlap, show the fetch."""
    config = CALIBRATION_CONFIGS["dot8-systolic-os"]
    workload = parse_workload(TEXTS["gemm"], "i=16,j=16,k=16", name="gemm")
    mapping = default_mapping(workload, config, latency_only(latency))
    program = generate(workload, mapping, config)
    bare = {"pop_prev": False, "pop_next": False, "push_prev": False, "push_next": False}
    pick = {
        "L": next(i for i in program.instructions if isinstance(i, Load) and i.rows == 1),
        "S": next(i for i in program.instructions if isinstance(i, Store) and i.rows == 1),
        "C": dataclasses.replace(
            next(i for i in program.instructions if isinstance(i, Compute)), outer=1, inner=1),
    }
    pick = {k: dataclasses.replace(i, **bare) for k, i in pick.items()}
    finish = program.instructions[-1]
    bodies = [tuple(pick[k] for k in mix * CONTROLLER_REPEATS) + (finish,)
              for mix in CONTROLLER_MIXES.values()]
    cases = [RtlCase(workload, mapping, program=dataclasses.replace(program, instructions=body))
             for body in bodies]
    memory = latency_only(latency)
    results = run_programs_on_rtl(config, cases, RunOptions(memory=memory))
    parameters = rtl_parameters(memory, config)
    parts = []
    for (name, mix), result in zip(CONTROLLER_MIXES.items(), results, strict=True):
        count = len(mix) * CONTROLLER_REPEATS
        busy = (result.load_busy + result.compute_busy + result.store_busy) / count
        parts.append(f"{name}: {result.cycles / count:.1f} ({busy:.1f} busy)")
    return [f"Controller, {CONTROLLER_REPEATS}x each mix, cycles an instruction: "
            + ", ".join(parts) + f"; model: gate gap {parameters.gate_cycles} per LOAD/STORE, "
            f"fetch {fetch_cycles(config, parameters):.1f} an instruction"]


def table(comparisons: list[Comparison]) -> list[str]:
    """Markdown rows: cycles model / RTL and ratio, then each unit model / RTL."""
    lines = ["| configuration | workload | match | model cycles | RTL cycles | model / RTL | "
             "host copy (model) | load model / RTL | compute model / RTL | store model / RTL |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in comparisons:
        units = " | ".join(f"{c.model[k]:,.0f} / {c.rtl[k]:,} ({c.model[k] / max(c.rtl[k], 1):.2f})"
                           for k in ("load_cycles", "compute_cycles", "store_cycles"))
        lines.append(f"| {c.config} | {c.workload} | {'yes' if c.match else 'NO'} | "
                     f"{c.accelerator_cycles:,.0f} | {c.rtl['cycles']:,} | {c.ratio:.2f} | "
                     f"{c.model['host_cycles']:,.0f} | {units} |")
    return lines


REPORT = ROOT / "docs" / "cost_model.md"
RTL_BEGIN, RTL_END = "<!-- rtl-check:begin -->", "<!-- rtl-check:end -->"


def section(comparisons: list[Comparison], controller: list[str], commit: str, latency: int
            ) -> list[str]:
    """The report's latency section: how the model was checked, and the table."""
    ratios = [c.ratio for c in comparisons]
    return [
        RTL_BEGIN,
        "## Latency against RTL cycles (`dse/cost_model.py`, `dse/cost_trace.py`)",
        "",
        "Written by `python benchmarks/check_cost_model_rtl.py --write`. The model cycles are",
        "the figure every report quotes: the instruction-level timeline of the compiled",
        "program (`dse/cost_trace.py`; held-out agreement in docs/fidelity.md). The per-unit",
        "cycles are the batch model's (`dse/cost_model.py`, vectorized over mappings, what a",
        "search ranks with; its MAC/ZERO step counts and DRAM bytes equal the functional",
        "simulator's counts of the compiled program, `tests/test_cost_model.py`). Checked",
        f"here against the Verilator model of the generated RTL (commit {commit}), default",
        f"mappings, simulated DRAM latency {latency} cycles (`rtl_parameters`). Per unit: the",
        "model's load / compute / store cycles beside the RTL's busy counters (the model counts",
        "a unit's own cycles, the RTL counts cycles its `idle` is low). The model's cycles",
        "leave out its host copy (`host_cycles`: the gathered layout of the padded",
        "convolution, copied before the run starts, so not in the RTL's count; the DSE",
        "charges it).",
        "",
        *table(comparisons),
        "",
        f"Model / RTL cycles: {min(ratios):.2f} to {max(ratios):.2f} over {len(ratios)} "
        "programs. Regressed on the programs' instruction counts, the busy counters give:",
        "",
        *(f"* {line}" for line in unit_terms(comparisons) + controller),
        "",
        *TERMS,
        RTL_END,
    ]


def write_section(lines: list[str]) -> None:
    """Replace the section between the markers in docs/cost_model.md (or append it)."""
    text = REPORT.read_text() if REPORT.is_file() else ""
    block = "\n".join(lines)
    if RTL_BEGIN in text and RTL_END in text:
        text = text[:text.index(RTL_BEGIN)] + block + text[text.index(RTL_END) + len(RTL_END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    REPORT.write_text(text)


#: Values tried for the terms of `cost_parameters.RTL_FITTED_TERMS`.
FIT_GRID = {"burst_round_trip_cycles": (0.0, 4.0, 16.0, 32.0), "gate_cycles": (0, 1, 2, 4),
            "load_fixed_cycles": (0, 1, 2, 5), "store_fixed_cycles": (0, 2, 5)}


def _cycle_error(outcomes, mappings, terms: dict) -> float:
    """Mean relative error of the model's accelerator cycles with ``terms`` replaced."""
    errors = []
    for o, mapping in zip(outcomes, mappings, strict=True):
        parameters = dataclasses.replace(rtl_parameters(o.case.memory(), o.case.config), **terms)
        model = evaluate_mapping(o.case.workload(), mapping, o.case.config, parameters)
        errors.append(abs((model["cycles"] - model["host_cycles"]) / o.rtl.cycles - 1))
    return float(np.mean(errors))


def fit_terms(jobs: int = 1) -> dict[str, float]:
    """`cost_parameters.RTL_FITTED_TERMS`: the `FIT_GRID` values whose program cycles have the
    least mean relative error over the calibration programs at every latency (stored RTL
    results are reused). Program cycles, not the units' busy counters: a retiring unit is
    busy while its data is in flight, which the model prices as a delay, not as work."""
    from tensorforge.dse.fidelity import validate

    outcomes = validate(calibration_cases(), jobs=jobs, progress=print)
    mappings = [o.case.resolve_mapping() for o in outcomes]
    scores = {values: _cycle_error(outcomes, mappings, dict(zip(FIT_GRID, values, strict=True)))
              for values in itertools.product(*FIT_GRID.values())}
    values, score = min(scores.items(), key=lambda item: item[1])
    print(f"mean |error| of program cycles {score:.1%}")
    return dict(zip(FIT_GRID, values, strict=True))


def fit_trace_terms(jobs: int = 1) -> TraceTerms:
    """A check of `cost_trace.TraceTerms`: the offsets that best fit the calibration
    programs' cycles at every latency (stored RTL results are reused), by coordinate descent
    over each offset, a few cycles either side of its value, until none moves (the held-out
    programs never enter). The shipped offsets are read off waveforms; this fit lowers the
    calibration error and raises the held-out one."""
    from tensorforge.dse.cost_space import build_space
    from tensorforge.dse.fidelity import validate

    outcomes = validate(calibration_cases(), jobs=jobs, progress=print)
    programs = []
    for o in outcomes:
        workload, mapping = o.case.workload(), o.case.resolve_mapping()
        programs.append((generate(workload, mapping, o.case.config).instructions, o.case.config,
                         build_space(workload, mapping.choice, o.case.config, mapping.groups).step,
                         rtl_parameters(o.case.memory(), o.case.config), o.rtl.cycles))

    def error(terms: TraceTerms) -> float:
        return float(np.mean([abs(trace_cycles(i, c, s, p, terms) / rtl - 1)
                              for i, c, s, p, rtl in programs]))

    terms, best = TraceTerms(), error(TraceTerms())
    print(f"start: mean |error| {best:.2%}")
    for _ in range(4):
        moved = False
        for field in dataclasses.fields(TraceTerms):
            value = getattr(terms, field.name)
            for candidate in range(max(0, value - 3), value + 4):
                trial = dataclasses.replace(terms, **{field.name: candidate})
                score = error(trial)
                if score < best - 1e-9:
                    terms, best, moved = trial, score, True
        print(f"round: mean |error| {best:.2%}: {terms}")
        if not moved:
            break
    return terms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=int, default=0,
                        help="DRAM latency in cycles per burst, for the RTL and the model")
    parser.add_argument("--write", action="store_true",
                        help="write the table into docs/cost_model.md")
    parser.add_argument("--only", nargs="*", default=(),
                        help="only the configurations whose name contains one of these")
    parser.add_argument("--dram", action="store_true",
                        help="fit the terms of cost_parameters.RTL_FITTED_TERMS and stop")
    parser.add_argument("--trace", action="store_true",
                        help="fit the offsets of cost_trace.TraceTerms on the calibration "
                        "programs, print them and stop (a check: nothing is written)")
    args = parser.parse_args()
    if args.trace:
        print(f"TraceTerms = {fit_trace_terms()}")
        return
    if args.dram:
        print(f"RTL_FITTED_TERMS = {fit_terms()}")
        return
    commit = rtl_commit()
    print(f"RTL at {commit}; DRAM latency {args.latency} cycles")
    comparisons = []
    for name, cases in PLAN.items():
        if args.only and not any(part in name for part in args.only):
            continue
        started = time.perf_counter()
        comparisons += compare(cases, args.latency)
        print(f"{name}: {time.perf_counter() - started:.0f} s (build or cache + runs)",
              flush=True)
    controller = controller_terms(args.latency)
    print("\n".join(table(comparisons) + unit_terms(comparisons) + controller))
    if args.write:
        write_section(section(comparisons, controller, commit, args.latency))
        print(f"wrote {REPORT}")


if __name__ == "__main__":
    main()
