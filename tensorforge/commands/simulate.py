"""`tensorforge simulate`: run a workload's program on the generated RTL and check it.

Compiles the workload for the accelerator the hardware flags describe, runs it on the
Verilator model of that accelerator with seeded random inputs, compares the output with the
numpy reference, and reports the accelerator's counters: cycles, ideal cycles (MACs / PEs),
PE utilization, unit busy cycles, bank conflicts, token waits and DRAM traffic, and beside
them the sweep's cost model's cycles for the same program and DRAM timing (``model_cycles``,
with ``model_error``: model / RTL - 1; its held-out error is in docs/fidelity.md). ``--power``
also records the switching activity of every register and the accesses of every memory over
the run and prices them on the synthesized design (`tensorforge.sim.power`): power and energy
split into logic (its clock part beside it), memories and leakage. A result that differs
from numpy prints the first differing elements and exits 1. A synthesis or OpenSTA run that
fails or outlasts ``--timeout`` still prints the RTL's figures, beside the tool's error, and
exits 1: a large design's simulation is not lost to its pricing.

A workload of three or more inputs (MTTKRP) with ``--output-pipeline`` runs all its stages
as one chained program instead (`tensorforge.commands.staged`), reporting its cycles, its
instructions, its host ops (none) and whether it equals the staged numpy reference.

The DRAM is `tensorforge.memory.DEFAULT_MEMORY` (DDR3 behind an FPGA controller: 32 cycles of
latency) unless ``--memory`` or the ``--dram-*`` overrides say otherwise: the cycles and the
utilization a user reads should be those of a memory that exists, and ``--memory ideal``
shows what the accelerator alone can do.
"""

from __future__ import annotations

import argparse
import json
import sys

from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args
from tensorforge.commands.memflags import add_memory_arguments, memory_from_args
from tensorforge.commands.workload_args import add_workload_arguments, workload_from_args
from tensorforge.errors import ConfigError, ToolError
from tensorforge.fpga.technology import DEFAULT_TECH, TECHNOLOGIES

#: Per tool run of ``--power``: OpenSTA prices a 4x4 accelerator in seconds, a 32x32 one
#: (1.4M cells) in tens of minutes.
DEFAULT_POWER_TIMEOUT_S = 3600.0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--timeout takes a positive number of seconds, "
                                         f"not {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="run a workload on the generated RTL (Verilator) and check it against numpy",
        description="Compile a workload, run it on the Verilator model of the accelerator and "
        "report whether the result equals numpy's, with cycle counts and utilization.",
    )
    add_workload_arguments(parser)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--max-cycles", type=int, default=None,
                        help="stop the run after this many cycles (default: generous)")
    parser.add_argument("--waves", action="store_true",
                        help="record a waveform (FST, or VCD where Verilator lacks FST)")
    parser.add_argument("--power", action="store_true",
                        help="record every register's switching activity and report ASIC "
                             "area, power and energy split into logic, memories, leakage")
    parser.add_argument("--clock-ns", type=float, default=10.0,
                        help="clock period for --power (default 10 ns)")
    parser.add_argument("--tech", choices=sorted(TECHNOLOGIES), default=DEFAULT_TECH,
                        help=f"ASIC technology for --power (default {DEFAULT_TECH})")
    parser.add_argument("--timeout", type=_seconds, default=DEFAULT_POWER_TIMEOUT_S,
                        metavar="SECONDS",
                        help="bound on each synthesis and OpenSTA run of --power (default "
                             f"{DEFAULT_POWER_TIMEOUT_S:g} s; a 1,024-PE design needs more)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_hardware_arguments(parser)
    add_memory_arguments(parser)
    parser.set_defaults(func=run)


def _print_table(summary: dict, power: dict | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # escape: rich would read a workload's [i,j] as markup and drop it
    table = Table(title=escape(f"{summary['workload']}\n{summary['config']}"),
                  show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    verdict = "[green]yes[/green]" if summary["match"] else "[red]NO[/red]"
    rows = [
        ("matches numpy", verdict),
        ("cycles", f"{summary['cycles']:,}"),
        ("ideal cycles (MACs / PEs)", f"{summary['ideal_cycles']:,.1f}"),
        (f"model cycles ({summary['model']})",
         f"{summary['model_cycles']:,.0f} ({summary['model_error']:+.1%})"),
        ("PE utilization", f"{summary['utilization']:.1%}"),
        ("load / compute / store busy",
         f"{summary['load_busy']:,} / {summary['compute_busy']:,} / {summary['store_busy']:,}"),
        ("bank conflict stalls", f"{summary['bank_conflict_stalls']:,}"),
        ("token waits (unit-cycles)", f"{summary['dependency_waits']:,}"),
        ("DRAM bytes read / written",
         f"{summary['dram_bytes_read']:,} / {summary['dram_bytes_written']:,}"),
        ("simulated cycles per second", f"{summary['sim_cycles_per_second']:,.0f}"),
    ]
    if "memory" in summary:
        rows.insert(1, ("DRAM", summary["memory"]["name"]))
    if "model_power" in summary:
        model = summary["model_power"]
        error = summary.get("model_power_error")
        rows.append((f"model power mW ({model['technology']}, {model['clock_ns']:g} ns)",
                     f"{model['power_mw']['total_mw']:.3f}"
                     + (f" ({error:+.1%})" if error is not None else "")))
    if power is not None:
        energy = power["energy_uj"]
        rows += [
            (f"area (um^2, {power['technology']})", f"{power['area_um2']:,.0f}"),
            ("power: logic (of it clock) mW",
             f"{power['logic_mw']:.3f} ({power['clock_mw']:.3f})"),
            ("power: memories / leakage mW",
             f"{power['memory_mw']:.3f} / {power['leakage_mw']:.4f}"),
            ("power: total mW", f"{power['total_mw']:.3f}"),
            ("energy: logic / memories / leakage uJ",
             f"{energy['logic']:.4f} / {energy['memory']:.4f} / {energy['leakage']:.5f}"),
            ("energy: total uJ", f"{energy['total']:.4f}"),
            ("flip-flops annotated", f"{power['flops_annotated']:,} of {power['flops_total']:,}"),
        ]
    if summary.get("host_ops"):
        rows.append(("host ops (--output-pipeline: none)",
                     escape("; ".join(summary["host_ops"]))))
    if summary.get("waveform"):
        rows.append(("waveform", summary["waveform"]))
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def instruction_kinds(workload, mapping, config) -> dict[str, int]:
    """The program's instructions per kind (LOAD, COMPUTE, STORE, FINISH), as
    ``compile --json`` reports them."""
    from tensorforge.compiler.codegen import generate

    return generate(workload, mapping, config).statistics()["instructions"]


def model_summary(workload, mapping, config, memory, rtl_cycles: int) -> dict:
    """The sweep's cost model on the same program and DRAM timing: its cycles, which model
    made them, and their error against this run."""
    from tensorforge.dse.fidelity import MODEL_NAME, model_cycles

    cycles = model_cycles(workload, mapping, config, memory)
    return {"model": MODEL_NAME, "model_cycles": cycles,
            "model_error": cycles / rtl_cycles - 1 if rtl_cycles else None}


def model_power_summary(workload, mapping, config, memory, clock_ns: float) -> dict:
    """The default hardware model's on-chip power and energy of the same program at
    ``clock_ns`` (`dse.model_power.program_power`), where that model prices events."""
    from tensorforge.dse.model_power import program_power

    model = program_power(workload, mapping, config, memory=memory, clock_ns=clock_ns)
    if model is None:
        return {}
    return {"model_power": model, "model_energy_uj": model["energy_uj"]}


def run(args: argparse.Namespace) -> int:
    from tensorforge.api import resolve_mapping
    from tensorforge.commands import staged
    from tensorforge.compiler.lowering import Lowering
    from tensorforge.compiler.stage_chain import is_multi_stage
    from tensorforge.sim.rtl_run import run_on_rtl

    workload = workload_from_args(args)
    config = config_from_args(args)
    memory = memory_from_args(args)
    if is_multi_stage(workload) and config.output_pipeline:
        return staged.simulate_run(args, workload, config, memory)
    mapping = resolve_mapping(workload, config, args.mapping, memory)
    if args.power and args.waves:
        raise ConfigError("--power and --waves need two runs (the activity model records no "
                          "waveform); run the command once with each")
    result = run_on_rtl(
        workload, config, mapping, seed=args.seed, memory=memory, max_cycles=args.max_cycles,
        waves=args.waves, register_activity=args.power,
    )
    summary = result.to_dict()
    summary["instructions_by_kind"] = instruction_kinds(workload, mapping, config)
    summary["host_ops"] = staged.host_stages(
        Lowering(workload, mapping.groups, mapping.choice.stage))
    summary["memory"] = {"name": memory.describe(), **memory.to_dict()}
    summary.update(model_summary(workload, mapping, config, memory, result.cycles))
    summary.update(model_power_summary(workload, mapping, config, memory, args.clock_ns))
    power, power_error = None, None
    if args.power:
        from tensorforge.sim.power import power_of_activity

        try:
            power = power_of_activity(config, result.register_activity, clock_ns=args.clock_ns,
                                      tech=args.tech, timeout_s=args.timeout).to_dict()
        except ToolError as error:
            power_error = str(error)
            summary["power_error"] = power_error
    if power is not None:
        summary["power"] = power
        model = summary.get("model_power")
        if model is not None and args.tech == model["technology"]:
            summary["model_power_error"] = model["power_mw"]["total_mw"] / power["total_mw"] - 1
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_table(summary, power)
    if power_error is not None:
        print(f"error: --power could not price the run: {power_error}\n(the RTL figures above "
              f"stand; rerun with a larger --timeout, now {args.timeout:g} s)", file=sys.stderr)
        return 1
    if not result.match:
        print(f"error: the RTL result differs from numpy in {result.mismatch_count} elements "
              f"(seed {args.seed}); first:", file=sys.stderr)
        for mismatch in result.mismatches:
            print(f"  {list(mismatch.index)}: RTL {mismatch.observed}, numpy {mismatch.expected}",
                  file=sys.stderr)
        return 1
    return 0
