"""`tensorforge synth`: synthesize one Verilog file with the ECP5 or the ASIC flow.

Prints a table for people, or with ``--json`` one JSON object for scripts. The keys of that
object are a contract: ecp5 gives ``flow, part, luts, ffs, dsps, brams, fmax_mhz``; asic gives
``flow, area_um2, cells, critical_path_ns, slack_ns, power_mw{internal, switching, leakage,
total}`` and ``tech`` (the technology). More keys may follow; these keep their names and
meaning. An ecp5 seed sweep (``--seed 1 2 3``) reports its fastest placement under those keys
(``seed`` says which) and adds ``seeds``: each seed's ``seed, fmax_mhz, critical_path_ns,
cached``, in the order given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tensorforge.errors import ConfigError
from tensorforge.fpga.ecp5 import ROUTERS, SPEED_GRADES
from tensorforge.fpga.technology import DEFAULT_TECH, TECHNOLOGIES


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "synth",
        help="synthesize a Verilog file (ECP5 FPGA, or ASIC on IHP SG13G2 or OSU 0.18um)",
        description="Synthesize a Verilog file and report its resources, timing and power.",
    )
    parser.add_argument("verilog", type=Path, metavar="FILE.v", help="the Verilog source")
    parser.add_argument("--top", required=True, help="name of the top module")
    parser.add_argument("--flow", choices=("ecp5", "asic"), default="ecp5",
                        help="ecp5: Yosys + nextpnr; asic: Yosys + standard cells and SRAM "
                             "macros of --tech + OpenSTA")
    parser.add_argument("--tech", choices=tuple(TECHNOLOGIES), default=DEFAULT_TECH,
                        help=f"asic: the technology (default {DEFAULT_TECH}: IHP's 130 nm "
                             f"open PDK with its SRAM macros; osu018: OSU 0.18um cells with "
                             f"analytical memory macros)")
    parser.add_argument("--part", default="LFE5U-85F", help="ECP5 part (default LFE5U-85F)")
    parser.add_argument("--package", default="CABGA381", help="ECP5 package (default CABGA381)")
    parser.add_argument("--clock-ns", type=float, default=10.0,
                        help="target clock period in ns (default 10)")
    parser.add_argument("--activity", type=float, default=0.1,
                        help="asic: input switching activity per clock period (default 0.1)")
    parser.add_argument("--clock-port", default=None,
                        help="asic: the clock input (default: clk or clock if present)")
    parser.add_argument("--out-of-context", action="store_true",
                        help="ecp5: no I/O buffers, for blocks with more ports than pins")
    parser.add_argument("--max-dsps", type=int, default=None, metavar="N",
                        help="ecp5: multipliers beyond N DSPs are built from LUTs "
                             "(default: the part's DSP count)")
    parser.add_argument("--router", choices=ROUTERS, default=ROUTERS[0],
                        help="ecp5: nextpnr's router (default router1; router2 for large, "
                             "congested designs on which router1 runs too long)")
    parser.add_argument("--speed", type=int, choices=SPEED_GRADES, default=SPEED_GRADES[0],
                        help="ecp5: the part's speed grade nextpnr times against (default 6, "
                             "the slowest; 8 the fastest)")
    parser.add_argument("--seed", type=int, nargs="+", default=None, metavar="N",
                        help="ecp5: nextpnr's placement seed (default 1); Fmax moves by several "
                             "MHz with it, so compare designs over a few seeds: with several "
                             "(--seed 1 2 3) Yosys maps once, nextpnr runs at each seed and the "
                             "fastest placement is reported, with every seed's Fmax")
    parser.add_argument("--no-floorplan", action="store_true",
                        help="ecp5: leave every site to the placer (by default a generated "
                             "accelerator's PE DSPs and scratchpad/accumulator block RAMs are "
                             "pinned compactly first: several MHz faster)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="ecp5 seed sweep: nextpnr runs at once (default 1; each takes a "
                             "core)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds each tool may run (default 1800)")
    parser.add_argument("--store", type=Path, default=None,
                        help="result store file (default $TENSORFORGE_STORE or the cache)")
    parser.add_argument("--no-cache", action="store_true",
                        help="run the tools even when the store has this result")
    parser.add_argument("--keep-run", type=Path, default=None, metavar="DIR",
                        help="run the tools in DIR (new or empty) and keep it: every log, "
                        "netlist and nextpnr's report, which name more than the summary (the "
                        "store is not read; the result is still stored); ecp5: with every "
                        "endpoint's timing, for benchmarks/ecp5_failing_paths.py DIR")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tensorforge.fpga.progress import StageProgress, reporting
    from tensorforge.store import ResultStore

    try:
        verilog = args.verilog.read_text()
    except OSError as error:
        raise ConfigError(
            f"cannot read the Verilog file {args.verilog}: {error.strerror}"
        ) from None
    store = ResultStore(args.store)
    common = {"timeout_s": args.timeout, "store": store, "use_cache": not args.no_cache,
              "keep_run": args.keep_run}
    # each tool's stage, phases and elapsed time on stderr (a whole accelerator maps for
    # minutes to hours); stdout keeps only the table or the JSON
    seeds = args.seed or [1]
    if len(seeds) > 1 and args.flow != "ecp5":
        raise ConfigError("a placement seed sweep (--seed A B ...) is for the ecp5 flow; the "
                          f"{args.flow} flow has no placement seed")
    with reporting(StageProgress(f"synth {args.flow}")):
        summary = _synthesize(args, seeds, verilog, common)
    if args.keep_run is not None:
        where = " (each seed's nextpnr files in seed_N)" if len(seeds) > 1 else ""
        print(f"the run's files are kept in {args.keep_run}{where}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary, sort_keys=False))
    else:
        _print_table(summary, args.verilog)
    return 0


def _synthesize(args: argparse.Namespace, seeds: list[int], verilog: str,
                common: dict[str, Any]) -> dict[str, Any]:
    """The summary to print: a sweep's fastest placement, with ``seeds`` listing each one's."""
    from tensorforge.fpga.asic import synthesize_asic
    from tensorforge.fpga.ecp5 import best_placement, synthesize_ecp5_seeds

    if args.flow != "ecp5":
        return synthesize_asic(
            verilog, args.top, tech=args.tech, clock_ns=args.clock_ns, activity=args.activity,
            clock_port=args.clock_port, **common,
        ).summary()
    reports = synthesize_ecp5_seeds(
        verilog, args.top, seeds, part=args.part, package=args.package,
        clock_ns=args.clock_ns, out_of_context=args.out_of_context, max_dsps=args.max_dsps,
        router=args.router, speed=args.speed, floorplan=not args.no_floorplan,
        jobs=args.jobs, **common,
    )
    summary = best_placement(reports).summary()
    if len(reports) > 1:
        summary["seeds"] = [{"seed": r.seed, "fmax_mhz": r.fmax_mhz,
                             "critical_path_ns": r.critical_path_ns, "cached": r.cached}
                            for r in reports]
    return summary


def _print_table(summary: dict[str, Any], source: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    # The source path goes in the caption, where a long one may wrap without splitting the
    # note on where the result came from.
    table = Table(title=f"{summary['flow']} synthesis of {summary['top']}", caption=str(source))
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in _rows(summary):
        table.add_row(name, value)
    table.add_row("result", "from the result store" if summary["cached"] else "synthesized now")
    Console().print(table)


def _seed_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    sweep = summary.get("seeds")
    if not sweep:
        return [("placement seed", str(summary["seed"]))]
    by_seed = ", ".join(f"{run['seed']}: " + (f"{run['fmax_mhz']:.1f} MHz" if run["fmax_mhz"]
                                              else f"{run['critical_path_ns']:.3f} ns")
                        for run in sweep)
    return [("placement seed", f"{summary['seed']} (the fastest of {len(sweep)})"),
            ("Fmax by seed", by_seed)]


def _rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    if summary["flow"] == "ecp5":
        fmax = summary["fmax_mhz"]
        critical = summary["critical_path_ns"]
        return [
            ("part", f"{summary['part']} ({summary['package']}), speed {summary['speed']}"),
            ("LUT4", str(summary["luts"])),
            ("flip-flops", str(summary["ffs"])),
            ("DSP (MULT18X18D)", f"{summary['dsps']} of {summary['dsp_budget']} allowed"),
            ("multipliers in LUTs", str(summary["lut_multipliers"])),
            ("block RAM (DP16KD)", str(summary["brams"])),
            ("Fmax", f"{fmax:.1f} MHz" if fmax else "no clock"),
            ("critical path", f"{critical:.3f} ns" if critical is not None else "none"),
            ("target clock", f"{summary['clock_ns']:g} ns"),
            ("floorplan", summary["floorplan"]),
            *_seed_rows(summary),
        ]
    power = summary["power_mw"]
    clock = summary["clock_port"] or "virtual"
    macros = sum(m.get("count", 1) for m in summary["macros"])
    flops = sum(1 for m in summary["memory_map"] if m["choice"] == "flops")
    return [
        ("technology", summary["tech"]),
        ("cell area", f"{summary['area_um2']:.0f} um^2"),
        ("  of which SRAM macros", f"{summary['macro_area_um2']:.0f} um^2 ({macros} macros)"),
        ("memories in flip-flops", str(flops)),
        ("cells", str(summary["cells"])),
        ("critical path (data arrival)", f"{summary['critical_path_ns']:.3f} ns"),
        ("slack", f"{summary['slack_ns']:.3f} ns at {summary['clock_ns']:g} ns ({clock})"),
        ("shortest period met (clock - slack)",
         f"{summary['min_period_ns']:.3f} ns, Fmax {summary['fmax_mhz']:.1f} MHz"
         if summary["min_period_ns"] else "no clock"),
        ("input activity", f"{summary['activity']:g}"),
        ("internal power", f"{power['internal']:.4g} mW"),
        ("switching power", f"{power['switching']:.4g} mW"),
        ("leakage power", f"{power['leakage']:.4g} mW"),
        ("total power", f"{power['total']:.4g} mW"),
    ]
