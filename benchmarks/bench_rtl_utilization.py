"""PE utilization of compute-bound programs on the generated RTL, and where the lost cycles go.

Runs, on the Verilator model of an 8x8 int8 weight-stationary systolic GEMM accelerator with
8 banks and 16-beat bursts on a 128-bit bus, a 64x64x64 GEMM and a 3x3 convolution layer
under the default mapping and under hand-picked ones (each checked against numpy), on a DRAM
with the given latency and bandwidth (`MemorySystem`, ideal by default). Prints per run:
cycles, ideal cycles (MACs / 64 PEs), utilization (target >= 90%), the cost model's cycles
for the same program and memory (`dse.fidelity.model_cycles`, the `evaluate_mapping`
timeline), and a breakdown of the cycles lost against the ideal, from the accelerator's
counters:

* compute idle = cycles - compute_busy: the compute unit had no instruction (waiting for
  LOADs at the start, for tokens, for the last STORE at the end);
* compute overhead = compute_busy - ideal: the compute unit was busy but not issuing MACs
  (stationary loads, pipeline fill and drain, bank conflicts, and the MAC steps spent on the
  zero padding of partial blocks);
* bank conflicts and token waits as the counters count them (overlapping the above).

``--sweep`` runs the default mappings at every DRAM latency of `LATENCIES` and bandwidth of
`BANDWIDTHS` (and the CLI's own 8x8 design, 64-bit bus, at each latency) and writes the
tables into docs/rtl_utilization.md, between its markers, with the commit they ran on.

    nice .venv/bin/python benchmarks/bench_rtl_utilization.py [--latency CYCLES]
        [--bandwidth B] [--only SUBSTRING ...]
    nice .venv/bin/python benchmarks/bench_rtl_utilization.py --sweep [--write]
"""

from __future__ import annotations

import argparse
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tensorforge.compiler.mappers import best_mapping, default_mapping
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.fidelity import model_cycles
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem
from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl, simulation_model

CONFIG = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": "32KiB", "banks": 8, "accumulator": "16KiB"},
    "dma": {"bus_bits": 128, "max_burst": 16},
})
#: What `tensorforge simulate --pe 8x8 --banks 8` builds (its defaults: 64-bit bus, 64 KiB).
CLI_CONFIG = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": "64KiB", "banks": 8, "accumulator": "16KiB"},
    "dma": {"bus_bits": 64, "max_burst": 16},
})
GEMM = ("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")
CONV = ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "k=32,c=32,x=14,y=14,r=3,s=3")
LATENCIES = (0, 16, 32, 64, 128)  # DRAM latency, cycles
BANDWIDTHS = (8, 16, 32)  # DRAM bytes per cycle
DOC = Path(__file__).resolve().parent.parent / "docs" / "rtl_utilization.md"
BEGIN, END = "<!-- bench-sweep:begin -->", "<!-- bench-sweep:end -->"


@dataclass(frozen=True)
class Run:
    """A workload and how to map it: the default mapping, or explicit tiles and loop order
    (on the default mapping's tensorize choice and lowering); ``direct``: the best mapping of
    the workload as written, without the im2col lowering the default may choose."""

    workload: tuple[str, str]
    tiles: dict[str, int] | None = None
    order: tuple[str, ...] | None = None
    direct: bool = False


RUNS = {
    "GEMM 64^3, default mapping": Run(GEMM),
    "GEMM 64^3, one 64^3 tile (old default)": Run(GEMM, {"i": 64, "j": 64, "k": 64}),
    "GEMM 64^3, tiles i=16 (rows)": Run(GEMM, {"i": 16, "j": 64, "k": 64}, ("i", "j", "k")),
    "GEMM 64^3, tiles 64x16x64 (default before 308f8b6)":
        Run(GEMM, {"i": 64, "j": 16, "k": 64}, ("i", "j", "k")),
    "conv 3x3 32ch 14x14, default": Run(CONV),
    "conv 3x3 32ch 14x14, no im2col": Run(CONV, direct=True),
}
SWEPT = ("GEMM 64^3, default mapping", "conv 3x3 32ch 14x14, default")


def _mapping(run: Run, workload: Workload, config: AcceleratorConfig,
             memory: MemorySystem) -> Mapping:
    if run.direct:
        return best_mapping(workload, config, ((),), memory)
    mapping = default_mapping(workload, config, memory)
    if run.tiles is None:
        return mapping
    return Mapping.from_dict({**mapping.to_dict(), "tiles": run.tiles,
                              "order": list(run.order or mapping.order)}, workload)


def _case(name: str, seed: int, config: AcceleratorConfig = CONFIG,
          memory: MemorySystem = DEFAULT_MEMORY) -> RtlCase:
    """The run ``name``, mapped for ``memory`` (the sweep maps once, for the default)."""
    run = RUNS[name]
    workload = parse_workload(*run.workload, name=name)
    return RtlCase(workload, _mapping(run, workload, config, memory), seed=seed)


def _memory(latency: int, bandwidth: float | None) -> MemorySystem:
    return MemorySystem.preset("ideal").with_overrides(latency=latency, bandwidth=bandwidth)


def _run(config: AcceleratorConfig, cases: list[RtlCase], memory: MemorySystem, seed: int):
    """``(result, model cycles)`` per case on ``memory``."""
    results = run_programs_on_rtl(config, cases, RunOptions(memory=memory, seed=seed))
    return [(result, model_cycles(case.workload, case.mapping, config, memory))
            for case, result in zip(cases, results, strict=True)]


def _table(names: list[str], runs: list) -> None:
    header = (f"| {'workload':<50} | match | {'cycles':>8} | {'model':>8} | {'ideal':>8} | "
              f"util. | {'cmp idle':>8} | {'cmp ovh':>8} | {'bank cf':>7} | "
              f"{'tok wait':>8} | {'load busy':>9} | {'store busy':>10} | {'instrs':>6} |")
    print(header)
    print("|" + "|".join("-" * (len(part)) for part in header.split("|")[1:-1]) + "|")
    for name, (result, model) in zip(names, runs, strict=True):
        idle = result.cycles - result.compute_busy
        overhead = result.compute_busy - result.ideal_cycles
        print(f"| {name:<50} | {'yes' if result.match else 'NO':<5} | {result.cycles:>8,} | "
              f"{model:>8,.0f} | {result.ideal_cycles:>8,.0f} | {result.utilization:>5.1%} | "
              f"{idle:>8,} | {overhead:>8,.0f} | {result.bank_conflict_stalls:>7,} | "
              f"{result.dependency_waits:>8,} | {result.load_busy:>9,} | "
              f"{result.store_busy:>10,} | {result.instructions:>6,} |")


# ---------------------------------------------------------------------- the sweep


def _commit() -> str:
    """The checked-out commit, marked where the sources the RTL and programs come from differ
    from it."""
    root = DOC.parent.parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "hw", "compiler", "sim",
                            "tensorforge"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.strip()
    return f"{head} (with uncommitted changes)" if dirty else head


def sweep(seed: int) -> tuple[str, bool]:
    """The sweep's markdown section and whether every run matched numpy."""
    started = time.perf_counter()
    cases = [_case(name, seed) for name in SWEPT]
    cli_case = _case(SWEPT[0], seed, CLI_CONFIG)
    points = {}  # (latency, bandwidth) -> [(result, model), ...]
    for latency in LATENCIES:
        for bandwidth in BANDWIDTHS:
            points[latency, bandwidth] = _run(CONFIG, cases, _memory(latency, bandwidth), seed)
            print(f"latency {latency}, {bandwidth} B/cycle: " + ", ".join(
                f"{result.utilization:.1%} (model {result.ideal_cycles / model:.1%})"
                for result, model in points[latency, bandwidth]), flush=True)
    cli = {latency: _run(CLI_CONFIG, [cli_case], _memory(latency, 16), seed)[0]
           for latency in LATENCIES}
    elapsed = time.perf_counter() - started
    every = [run for runs in points.values() for run in runs] + list(cli.values())
    matched = all(result.match for result, _ in every)
    lines = [
        f"Written by `benchmarks/bench_rtl_utilization.py --sweep --write` on RTL and compiler "
        f"commit `{_commit()}` ({len(every)} runs, {elapsed:.0f} s on the shared 2-core "
        "machine). DRAM: the Verilog DRAM of the simulation top with the given latency (cycles "
        "from a burst's address to its first beat, over the ideal memory's one) and "
        "bandwidth, outstanding bursts unlimited (the DMA's `dma.outstanding` = 16 bounds "
        "them). Each cell: RTL utilization (ideal cycles / RTL cycles), then RTL cycles / the "
        "cost model's cycles for the same program and memory (`model_cycles`: "
        "`dse.cost_model.evaluate_mapping`, the instruction timeline of `dse/cost_trace.py`). "
        f"Every run's output {'equals' if matched else '**does not always equal**'} numpy's.",
        "",
        f"Design: `{CONFIG.describe()}` (128-bit bus: 32 B/cycle is more than the bus moves, "
        "16 B/cycle).",
    ]
    for position, name in enumerate(SWEPT):
        case = cases[position]
        lines += ["", f"### {name}: tiles {dict(case.mapping.tiles)}, order "
                  f"{' '.join(case.mapping.order)}"
                  + (f", lowered {case.mapping.groups}" if case.mapping.groups else ""), "",
                  "| latency | " + " | ".join(f"{b} B/cycle" for b in BANDWIDTHS) + " |",
                  "|---|" + "---|" * len(BANDWIDTHS)]
        for latency in LATENCIES:
            cells = []
            for bandwidth in BANDWIDTHS:
                result, model = points[latency, bandwidth][position]
                mark = "" if result.match else " MISMATCH"
                cells.append(f"{result.utilization:.1%} ({result.cycles:,} / {model:,.0f})"
                             f"{mark}")
            lines.append(f"| {latency} | " + " | ".join(cells) + " |")
    mapping = cli_case.mapping
    lines += ["", f"### The CLI's design: `{CLI_CONFIG.describe()}`, 16 B/cycle", "",
              "`tensorforge simulate --workload \"C[i,j] += A[i,k] * B[k,j]\" --sizes "
              "i=64,j=64,k=64 --pe 8x8 --banks 8 --dram-latency L --json` (its other "
              "defaults: the `ddr3` preset's 16 B/cycle and 16 outstanding bursts, which the "
              f"64-bit bus and the DMA bound anyway); tiles {dict(mapping.tiles)}.", "",
              "| latency | utilization | RTL cycles | model cycles | match |",
              "|---|---|---|---|---|"]
    for latency, (result, model) in cli.items():
        lines.append(f"| {latency} | {result.utilization:.1%} | {result.cycles:,} | "
                     f"{model:,.0f} | {'yes' if result.match else 'NO'} |")
    return "\n".join(lines), matched


def write_doc(section: str) -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{BEGIN}\n{section}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=int, default=0, help="DRAM latency in cycles")
    parser.add_argument("--bandwidth", type=float, default=None, help="DRAM bytes per cycle")
    parser.add_argument("--only", nargs="*", default=(),
                        help="run only the runs whose name contains one of these")
    parser.add_argument("--sweep", action="store_true",
                        help="the default mappings at every latency and bandwidth")
    parser.add_argument("--write", action="store_true",
                        help="with --sweep: write the tables into docs/rtl_utilization.md")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    started = time.perf_counter()
    model = simulation_model(CONFIG)
    print(f"config: {CONFIG.describe()}; model "
          f"{'built' if model.was_built else 'cached'} ({time.perf_counter() - started:.0f} s)")
    if args.sweep:
        section, matched = sweep(args.seed)
        print(section)
        if args.write:
            write_doc(section)
        raise SystemExit(0 if matched else 1)
    memory = _memory(args.latency, args.bandwidth)
    print(f"DRAM: {memory.describe()}")
    names = [n for n in RUNS if not args.only or any(part in n for part in args.only)]
    cases = [_case(name, args.seed, CONFIG, memory) for name in names]
    for name, case in zip(names, cases, strict=True):
        print(f"{name}: tiles {dict(case.mapping.tiles)}, order {case.mapping.order}"
              + (f", groups {case.mapping.groups}" if case.mapping.groups else ""))
    runs = _run(CONFIG, cases, memory, args.seed)
    _table(names, runs)
    for name, (result, _) in zip(names, runs, strict=True):
        print(f"{name}: DRAM read {result.dram_bytes_read:,} B (predicted "
              f"{result.expected_traffic.read:,}), written {result.dram_bytes_written:,} B, "
              f"simulated in {result.sim_seconds:.1f} s")


if __name__ == "__main__":
    main()
