"""Synthesize a matrix of generated accelerators through both flows; write docs/synthesis.md.

Not a test: it runs the real tools for minutes per design (reports are cached in the result
store, so a second run only redoes what changed). Each flow of each design gets a time limit;
a design that runs past it shows ``timeout`` in the table instead of holding up the others.

    .venv/bin/python benchmarks/bench_synthesis.py [--timeout 600] [--jobs 2]
    .venv/bin/python benchmarks/bench_synthesis.py --only gemm-4x4-core gemm-8x8-core \
        [--flows ecp5]

With ``--only`` (a subset of the cases, by name or glob) or ``--flows`` the table goes to
stdout and ``docs/synthesis.md`` is left alone unless ``--output`` names it: the document
always holds every case of both flows (a full run takes the unchanged ones from the cache).
``--jobs N`` synthesizes N designs at once (each tool run is single-threaded), largest first;
``--skip CASE:FLOW`` leaves one flow of one case out (the table says so), e.g. a design that
does not finish in the time at hand; write the document then with ``--output``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import logging
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import TensorforgeError
from tensorforge.fpga.ecp5_fit import DesignDoesNotFit
from tensorforge.fpga.technology import DEFAULT_TECH, technology
from tensorforge.paths import rtl_commit

OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "synthesis.md"
CLOCK_NS = {"ecp5": 8.0, "asic": 10.0}  # ECP5: issue 17's 125 MHz target
TARGETS = {"ecp5": "ecp5", "asic": "generic"}
TECH = DEFAULT_TECH
ACTIVITY = 0.1


@dataclass(frozen=True)
class Case:
    name: str
    block: str  # "accelerator" (the whole top level) or "pe_array" (the compute core)
    config: dict[str, Any]
    ecp5_router: str = "router1"
    note: str = ""  # why a case runs differently, printed under the table

    @property
    def accelerator_config(self) -> AcceleratorConfig:
        return AcceleratorConfig.from_dict(self.config)


def _array(rows: int, cols: int, interconnect: str = "systolic", dataflow: str = "ws",
           local_bytes: int = 0) -> dict[str, Any]:
    return {"rows": rows, "cols": cols, "interconnect": interconnect, "dataflow": dataflow,
            "local_bytes": local_bytes}


CASES = [
    Case("gemm-16x16-core", "pe_array", {"intrinsic": "gemm", "array": _array(16, 16)},
         note="the PE array alone: the first 156 PEs multiply on MULT18X18D with the DSP's own "
              "input and output registers, the other 100 on LUTs and carry chains; its "
              "critical path starts at a DSP's output register and ends at the accumulate "
              "adder's flip-flop (74.5 MHz at `3885914`, when fabric flip-flops sat on both "
              "sides of the DSPs)"),
    Case("gemm-8x8-core", "pe_array", {"intrinsic": "gemm", "array": _array(8, 8)}),
    Case("gemm-4x4-core", "pe_array", {"intrinsic": "gemm", "array": _array(4, 4)}),
    Case("gemm-4x4", "accelerator", {"intrinsic": "gemm", "array": _array(4, 4)}),
    Case("gemm-4x4-none", "accelerator",
         {"intrinsic": "gemm", "array": _array(4, 4, "none")}),
    Case("gemm-4x4-full", "accelerator",
         {"intrinsic": "gemm", "array": _array(4, 4, "full")}),
    Case("dot-4x4", "accelerator", {"intrinsic": "dot", "array": _array(4, 4, dataflow="os")}),
    Case("gemv-4x4", "accelerator", {"intrinsic": "gemv", "array": _array(4, 4)}),
    Case("conv2d-4x4", "accelerator",
         {"intrinsic": "conv2d", "array": _array(4, 4, local_bytes=16)}),
    Case("gemm-8x8", "accelerator", {"intrinsic": "gemm", "array": _array(8, 8)}),
    Case("gemm-16x16", "accelerator", {"intrinsic": "gemm", "array": _array(16, 16)},
         note="the 8x8 is the largest whole accelerator of this configuration that fits the "
              "LFE5U-85F; the 16x16's PEs beyond the part's 156 DSPs multiply on LUTs"),
]


def case_verilog(case: Case, flow: str) -> tuple[str, str]:
    """``(verilog, top)`` of a case for one flow: the ECP5 flow synthesizes the ECP5 build
    (`docs/ecp5_target.md`: PEs on DSP slices, the memory side's extra registers), the ASIC
    flow the generic RTL the cost model and the fits describe."""
    from tensorforge.dse.calibrate import Design, block_verilog

    return block_verilog(Design(case.block, case.accelerator_config), TARGETS[flow])


def nextpnr_critical_path(log: str) -> str:
    """``start -> end`` (the launching flip-flop and the endpoint) of the last critical-path
    report in a nextpnr log tail; ``...`` for a start cut off the stored tail."""
    start = log.rfind("Critical path report for clock")
    section = log[max(start, 0):]
    end = section.find("Max frequency for clock")
    section = section[:end] if end >= 0 else section
    source = re.search(r"\bSource (\S+)", section) if start >= 0 else None
    sinks = re.findall(r"\bSink (\S+)", section)
    if not sinks:
        return ""
    return f"{source[1] if source else '...'} -> {sinks[-1]}"


FLOWS = ("ecp5", "asic")


def run_case(case: Case, timeout_s: float, flows: tuple[str, ...] = FLOWS,
             verilog: dict[str, tuple[str, str]] | None = None,
             skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Both flows on one case; ``verilog`` maps each flow to its (text, top) when already
    elaborated; ``skip`` holds ``case:flow`` pairs not to run."""
    from tensorforge.fpga import synthesize_asic, synthesize_ecp5

    verilog = verilog or {flow: case_verilog(case, flow) for flow in flows}
    config = case.accelerator_config
    row: dict[str, Any] = {"case": case, "macs": config.array.pes, "ecp5_s": 0.0, "asic_s": 0.0}
    row.update({f"{flow}_error": "not run" for flow in FLOWS if flow not in flows})
    row.update({f"{flow}_error": "skipped (--skip)" for flow in flows
                if f"{case.name}:{flow}" in skip})
    if "ecp5" in flows and "ecp5_error" not in row:
        started = time.monotonic()
        try:
            ecp5 = synthesize_ecp5(*verilog["ecp5"], clock_ns=CLOCK_NS["ecp5"],
                                   out_of_context=True,
                                   router=case.ecp5_router, timeout_s=timeout_s)
            row["ecp5"] = ecp5
            row["ecp5_path"] = nextpnr_critical_path(ecp5.logs.get("nextpnr", ""))
        except DesignDoesNotFit as error:  # stored like a report: a rerun is instant
            row["ecp5_error"], row["ecp5_fit"] = "does not fit", error.summary()
        except TensorforgeError as error:
            row["ecp5_error"] = _short(error)
        row["ecp5_s"] = _tool_seconds(row.get("ecp5"), started)
    if "asic" in flows and "asic_error" not in row:
        started = time.monotonic()
        try:
            row["asic"] = synthesize_asic(*verilog["asic"], tech=TECH, clock_ns=CLOCK_NS["asic"],
                                          activity=ACTIVITY,
                                          timeout_s=timeout_s)
        except TensorforgeError as error:
            row["asic_error"] = _short(error)
        row["asic_s"] = _tool_seconds(row.get("asic"), started)
    return row


def select_cases(patterns: list[str] | None) -> list[Case]:
    """The cases named by ``patterns`` (exact names or shell globs), in table order."""
    if not patterns:
        return list(CASES)
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(c.name, p) for c in CASES)]
    if unknown:
        raise SystemExit(f"no case matches {', '.join(unknown)}; cases: "
                         f"{', '.join(c.name for c in CASES)}")
    return [c for c in CASES if any(fnmatch.fnmatchcase(c.name, p) for p in patterns)]


def _tool_seconds(report: Any, started: float) -> float:
    """The tools' own run time (kept in the report, so a cached row shows it too)."""
    if report is not None and report.tool_seconds:
        return sum(report.tool_seconds.values())
    return time.monotonic() - started


def _short(error: Exception) -> str:
    first = str(error).splitlines()[0]
    return "timeout" if "timed out" in first else f"error: {first[:80]}"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(rows: list[dict[str, Any]], timeout_s: float, commit: str) -> str:
    lines = [
        "# Synthesis of generated accelerators",
        "",
        "Written by `benchmarks/bench_synthesis.py` (do not edit by hand). int8 operands, int32",
        "accumulators, 64 KiB / 4-bank scratchpad, 16 KiB accumulator, 64-bit AXI unless noted;",
        "`*-core` rows are the PE array alone. ECP5: the ECP5 build (`--target ecp5`,",
        "`docs/ecp5_target.md`) through Yosys `synth_ecp5` (ABC9 with 1 ns nets) +",
        "nextpnr-ecp5 (router1, placement seed 1, the flow's default floorplan: PE DSPs and",
        "scratchpad/accumulator block RAMs pinned, `fpga/ecp5_floorplan.py`) on",
        f"LFE5U-85F (speed 6, out of context, {CLOCK_NS['ecp5']:g} ns target; multipliers beyond",
        "its 156 DSPs built from LUTs). ASIC: the generic RTL through Yosys onto",
        f"{technology(TECH).description} (`--tech {TECH}`) + OpenSTA at "
        f"{CLOCK_NS['asic']:g} ns,",
        f"input activity {ACTIVITY}, memories as that technology's SRAM macros (see the notes",
        "below).",
        f"A tool run past {timeout_s:g} s shows `timeout`. RTL of commit "
        f"`{commit}`.",
        "",
        "| design | MACs | LUT4 | FF | DSP | DSP/MAC | BRAM | Fmax MHz | area mm^2 "
        "(logic + macros) | crit. path ns | power mW | ECP5 tool s | ASIC tool s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        case, macs = row["case"], row["macs"]
        if "ecp5" in row:
            e = row["ecp5"]
            dsps = str(e.dsps) + (f" (+{e.lut_multipliers} mult. in LUTs)"
                                  if e.lut_multipliers else "")
            ecp5 = [f"{e.luts:,}", f"{e.ffs:,}", dsps, f"{e.dsps / macs:.2f}",
                    str(e.brams), _fmt(e.fmax_mhz)]
        else:
            ecp5 = [row.get("ecp5_error", "-")] + ["-"] * 5
        if "asic" in row:
            a = row["asic"]
            asic = [f"{a.area_um2 / 1e6:.3f} ({a.logic_area_um2 / 1e6:.3f} + "
                    f"{a.macro_area_um2 / 1e6:.3f})", _fmt(a.critical_path_ns, 2),
                    _fmt(a.power_mw.total, 2)]
        else:
            asic = [row.get("asic_error", "-"), "-", "-"]
        lines.append("| " + " | ".join([case.name, str(macs), *ecp5, *asic,
                                         f"{row['ecp5_s']:.0f}", f"{row['asic_s']:.0f}"])
                     + " |")
    notes = [f"* {row['case'].name}: {note}." for row in rows
             for note in (row.get("ecp5_fit"), row["case"].note) if note]
    if notes:
        lines += ["", *notes]
    done = {row["case"].name for row in rows}
    missing = [case.name for case in CASES if case.name not in done]
    if missing:
        lines += ["", f"Not in this run: {', '.join(missing)} (see `--only`)."]
    lines += ["", "## ECP5 critical paths (nextpnr)", ""]
    for row in rows:
        if row.get("ecp5_path"):
            lines.append(f"* {row['case'].name}: `{row['ecp5_path']}`")
    lines += ["", "## SRAM macros (ASIC)", ""]
    for row in rows:
        if "asic" in row and row["asic"].macros:
            macros: dict[str, int] = {}
            for macro in row["asic"].macros:
                cell = macro.get("cell") or f"{macro['words']}x{macro['bits']}"
                key = f"{cell} ({macro['access_ns']:.2f} ns)"
                macros[key] = macros.get(key, 0) + macro.get("count", 1)
            listed = ", ".join(f"{count} x {key}" for key, count in macros.items())
            lines.append(f"* {row['case'].name}: {listed}")
    lines += ["", NOTES]
    return "\n".join(lines) + "\n"


NOTES = """## How to read these numbers

* **Two builds of one design.** The ECP5 columns are the ECP5 build (`--target ecp5`): PE
  multipliers on MULT18X18D with the DSP's own input and output registers, and the memory
  side's extra registers (block-RAM reads and accumulator writes registered, the scratchpad's
  read requests through skid registers, the load unit's gatherer and the store unit's W packer
  split over more cycles), all listed with their equivalence tests in `docs/ecp5_target.md`.
  It computes the same results in a few more cycles. The ASIC columns are the generic RTL,
  the hardware the cost model, `docs/fidelity.md` and the area/energy fits describe.
* **Where ECP5 timing stands.** The PE arrays alone close above 125 MHz (`*-core` rows); the
  whole accelerators do not yet. On speed 6 nextpnr's routing costs about 1 ns per net even
  between neighbouring tiles, so an 8 ns clock leaves room for about five routed nets between
  flip-flops, and the control of every unit (the compute unit's walkers and accumulator
  hazard, the store's line queue, the load unit's gatherer, the controller's fetch) has
  hundreds of paths within 1 ns of that. Which unit holds the worst path changes with the
  placement seed, and Fmax with it by several MHz. `docs/ecp5_target.md` has the
  per-endpoint picture, seed sweeps, the same netlists on a speed-8 part, and every step
  measured so far, kept or not.
* **The PE pipeline.** Each PE is three register stages: the local-store read (a bank x slot
  mux) and the streamed operand are registered, the product is registered, then the
  accumulate adder updates the sum (`hw/pe.py`, `hw/mac.py`; on ECP5 the first two are the
  MULT18X18D's own registers, `hw/dsp.py`), so no clock period holds the mux, the multiplier
  and the 32-bit carry chain together.
* **DSP budget (ECP5).** `synth_ecp5` puts every multiplier on a MULT18X18D, and the
  LFE5U-85F has 156, so gemm-16x16 (256 MACs) would stop in nextpnr with no DSP left to
  place. The ECP5 build instantiates DSPs for the first 156 PEs (row-major) and the flow has
  Yosys' `booth` pass build any other multiplier from LUTs and carry chains
  (`fpga/ecp5_dsp.py`; `synthesize_ecp5(max_dsps=...)`, `tensorforge synth --max-dsps N`), as
  Vivado's `max_dsp` does; the DSP column shows how many went to LUTs. Packing two int8
  products into one MULT18X18D does not work (the two 16-bit products need a 24-bit operand;
  the DSP takes 18 bits), and the slice's 9x9 mode is supported by neither Yosys nor
  nextpnr-ecp5.
* **SRAM macros (ASIC).** Every memory with synchronous read ports becomes an array of the
  technology's SRAM macros (`synthesize_asic(..., memories="macros")`, the default): on IHP
  SG13G2 the foundry's own single- and two-port macros, vendored with their Liberty files
  (`fpga/ihp_sg13g2.py`), picked per memory by `fpga/macro_picker.py`, with the decode and
  read-multiplexing glue mapped onto standard cells. OpenSTA times the paths into and out of
  them with their Liberty tables; their access power is charged per access at `activity` of
  the cycles. `memories="flops"` gives the flip-flop build.
* **ECP5 on PE arrays.** `synth_ecp5` used to stop on PE arrays with ``Assert
  `count_id(wire->name) == 0'`` in ABC9's reintegration: Amaranth emits, next to a port whose
  payload is an `amaranth.lib.data` array (the PE array's `out__payload`), alias wires for its
  elements named `out__payload[0]`, `out__payload[1]`, and ABC9 names bit 0 of the port
  `out__payload[0]` too (Yosys issue #4349). The flow runs `opt_clean -purge` before LUT
  mapping; the hardware is not at fault.
* **OpenSTA.** The mapped netlist is written without left-hand concatenations, `x` constants or
  hex literals (`setundef -zero`, `splitnets`, `opt_clean -purge`, `write_verilog -noexpr
  -nohex -nodec`), which OpenSTA's structural Verilog reader rejected on the DMA units.
* Power is OpenSTA's at a uniform input activity with no wire load, plus the macros' access
  power; area is cell area (no placement, no wiring).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per tool run")
    parser.add_argument("--only", "--cases", nargs="+", metavar="CASE",
                        help="case names or globs to run (default: all); prints the table "
                             f"instead of writing it. Cases: {', '.join(c.name for c in CASES)}")
    parser.add_argument("--flows", nargs="+", choices=FLOWS, default=list(FLOWS),
                        help="flows to run (default: both)")
    parser.add_argument("--skip", nargs="+", default=[], metavar="CASE:FLOW",
                        help="flows of cases not to run (e.g. gemm-16x16:ecp5); the table "
                             "says 'skipped'")
    parser.add_argument("--jobs", type=int, default=1,
                        help="designs synthesized at once (default 1)")
    parser.add_argument("--output", type=Path, default=None,
                        help=f"markdown file to write (default: {OUTPUT.name} for a full run)")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    logging.basicConfig(level=logging.WARNING)
    cases = select_cases(args.only)
    skip = frozenset(args.skip)
    unknown = [item for item in skip
               if item not in {f"{c.name}:{f}" for c in CASES for f in FLOWS}]
    if unknown:
        parser.error(f"--skip takes CASE:FLOW pairs of known cases and flows, not "
                     f"{', '.join(sorted(unknown))}")
    partial = bool(args.only) or set(args.flows) != set(FLOWS) or bool(skip)
    output = args.output if args.output is not None or partial else OUTPUT
    rows: list[dict[str, Any]] = []
    order = {case.name: index for index, case in enumerate(CASES)}
    # Largest designs first, so the long runs do not start last; the table keeps CASES order.
    queue = sorted(cases, key=lambda case: -case.accelerator_config.array.pes)
    # Elaborate every design first: the table is then of one source tree, even if the
    # checkout changes while the tools run.
    commit = rtl_commit()
    verilogs = {case.name: {flow: case_verilog(case, flow) for flow in args.flows}
                for case in queue}
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_case, case, args.timeout, tuple(args.flows),
                               verilogs[case.name], skip): case
                   for case in queue}
        print(f"synthesizing {', '.join(case.name for case in queue)} "
              f"({args.jobs} at a time) ...", flush=True)
        for future in concurrent.futures.as_completed(futures):
            row = future.result()
            rows.append(row)
            rows.sort(key=lambda r: order[r["case"].name])
            if output is not None:
                output.write_text(markdown(rows, args.timeout, commit))  # keep what is done so far
            print(f"  {row['case'].name}: ecp5 {row.get('ecp5_error', 'ok')} "
                  f"({row['ecp5_s']:.0f} s), asic {row.get('asic_error', 'ok')} "
                  f"({row['asic_s']:.0f} s)", flush=True)
    if output is None:
        sys.stdout.write(markdown(rows, args.timeout, commit))


if __name__ == "__main__":
    main()
