"""PE utilization of compute-bound programs on the generated RTL, and where the lost cycles go.

Runs, on the Verilator model of an 8x8 int8 weight-stationary systolic GEMM accelerator with
8 banks and 16-beat bursts on a 128-bit bus, a 64x64x64 GEMM and a 3x3 convolution layer
under the default mapping and under hand-picked ones (each checked against numpy), on an
ideal DRAM or one with added latency / limited bandwidth. Prints per run: cycles, ideal
cycles (MACs / 64 PEs), utilization (target >= 90%), and a breakdown of the cycles lost
against the ideal, from the accelerator's counters:

* compute idle = cycles - compute_busy: the compute unit had no instruction (waiting for
  LOADs at the start, for tokens, for the last STORE at the end);
* compute overhead = compute_busy - ideal: the compute unit was busy but not issuing MACs
  (stationary loads, pipeline fill and drain, ZERO instructions, bank conflicts, and the
  MAC steps spent on the zero padding of partial blocks);
* bank conflicts and token waits as the counters count them (overlapping the above).

    .venv/bin/python benchmarks/bench_rtl_utilization.py [--latency CYCLES] [--bandwidth B]
        [--only SUBSTRING ...]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from tensorforge.compiler.mappers import best_mapping, default_mapping
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.memory import MemorySystem
from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl, simulation_model

CONFIG = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": "32KiB", "banks": 8, "accumulator": "16KiB"},
    "dma": {"bus_bits": 128, "max_burst": 16},
})
GEMM = ("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64")
CONV = ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]", "k=32,c=32,x=14,y=14,r=3,s=3")


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
    "GEMM 64^3, tiles 64x16x32 (tuned)": Run(GEMM, {"i": 64, "j": 16, "k": 32}, ("i", "j", "k")),
    "conv 3x3 32ch 14x14, default": Run(CONV),
    "conv 3x3 32ch 14x14, no im2col": Run(CONV, direct=True),
}


def _mapping(run: Run, workload: Workload) -> Mapping:
    if run.direct:
        return best_mapping(workload, CONFIG, ((),))
    mapping = default_mapping(workload, CONFIG)
    if run.tiles is None:
        return mapping
    return Mapping.from_dict({**mapping.to_dict(), "tiles": run.tiles,
                              "order": list(run.order or mapping.order)}, workload)


def _case(name: str, seed: int) -> RtlCase:
    run = RUNS[name]
    workload = parse_workload(*run.workload, name=name)
    return RtlCase(workload, _mapping(run, workload), seed=seed)


def _table(names: list[str], results: list) -> None:
    header = (f"| {'workload':<40} | match | {'cycles':>8} | {'ideal':>8} | util. | "
              f"{'cmp idle':>8} | {'cmp ovh':>8} | {'bank cf':>7} | {'tok wait':>8} | "
              f"{'load busy':>9} | {'store busy':>10} | {'instrs':>6} |")
    print(header)
    print("|" + "|".join("-" * (len(part)) for part in header.split("|")[1:-1]) + "|")
    for name, result in zip(names, results, strict=True):
        idle = result.cycles - result.compute_busy
        overhead = result.compute_busy - result.ideal_cycles
        print(f"| {name:<40} | {'yes' if result.match else 'NO':<5} | {result.cycles:>8,} | "
              f"{result.ideal_cycles:>8,.0f} | {result.utilization:>5.1%} | {idle:>8,} | "
              f"{overhead:>8,.0f} | {result.bank_conflict_stalls:>7,} | "
              f"{result.dependency_waits:>8,} | {result.load_busy:>9,} | "
              f"{result.store_busy:>10,} | {result.instructions:>6,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=int, default=0, help="DRAM latency in cycles")
    parser.add_argument("--bandwidth", type=float, default=None, help="DRAM bytes per cycle")
    parser.add_argument("--only", nargs="*", default=(),
                        help="run only the runs whose name contains one of these")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    started = time.perf_counter()
    model = simulation_model(CONFIG)
    print(f"config: {CONFIG.describe()}")
    print(f"DRAM: latency {args.latency} cycles, bandwidth "
          f"{args.bandwidth or CONFIG.dma.bus_bytes} B/cycle; model "
          f"{'built' if model.was_built else 'cached'} ({time.perf_counter() - started:.0f} s)")
    names = [n for n in RUNS if not args.only or any(part in n for part in args.only)]
    cases = [_case(name, args.seed) for name in names]
    for name, case in zip(names, cases, strict=True):
        print(f"{name}: tiles {dict(case.mapping.tiles)}, order {case.mapping.order}"
              + (f", groups {case.mapping.groups}" if case.mapping.groups else ""))
    memory = MemorySystem.preset("ideal").with_overrides(latency=args.latency,
                                                         bandwidth=args.bandwidth)
    options = RunOptions(memory=memory, seed=args.seed)
    results = run_programs_on_rtl(CONFIG, cases, options)
    _table(names, results)
    for name, result in zip(names, results, strict=True):
        print(f"{name}: DRAM read {result.dram_bytes_read:,} B (predicted "
              f"{result.expected_traffic.read:,}), written {result.dram_bytes_written:,} B, "
              f"simulated in {result.sim_seconds:.1f} s")


if __name__ == "__main__":
    main()
