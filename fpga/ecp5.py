"""The ECP5 FPGA flow: Yosys ``synth_ecp5`` then nextpnr-ecp5 place-and-route.

What a hardware engineer asks of a generated accelerator is how much of the part it takes
(LUTs, flip-flops, DSP multipliers, block RAMs) and how fast it runs. Utilization is read from
nextpnr's JSON report after packing, which is what the device really holds; Fmax is the
achieved frequency of each clock after routing. A design without a clock has no Fmax
(``fmax_mhz`` is None); its ``critical_path_ns`` is then the longest input-to-output delay.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import math
import re
import shutil
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensorforge.errors import ConfigError, ToolError
from tensorforge.fpga.cache import SynthesisReport, cached_synthesis, run_directory
from tensorforge.fpga.ecp5_dsp import (
    DSPS_BY_SIZE,
    LUT_SELECTION,
    MULTIPLIER_DUMP,
    booth_commands,
    list_multipliers_commands,
    lut_multipliers,
    read_multipliers,
    selection_file,
)
from tensorforge.fpga.ecp5_fit import FitCheck
from tensorforge.fpga.ecp5_floorplan import apply_floorplan
from tensorforge.fpga.tools import (
    NEXTPNR_ECP5,
    YOSYS,
    log_tail,
    run_tool,
    stop_running_tools,
    tool_version,
)
from tensorforge.fpga.yosys import STAT_FILE, check_top_name, read_stat, run_yosys, stat_command
from tensorforge.store import ResultStore

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 1800.0

_PART = re.compile(r"LFE5U(?P<family>M5G|M)?-(?P<size>12|25|45|85)F")
_ASYNC = "<async>"
ROUTERS = ("router1", "router2")
#: ECP5 speed grades, slowest first: nextpnr times a design against one of them.
SPEED_GRADES = (6, 7, 8)


@dataclass(frozen=True)
class Ecp5Options:
    """Everything besides the Verilog that an ECP5 result depends on (part of the cache key)."""

    top: str
    part: str = "LFE5U-85F"
    package: str = "CABGA381"
    clock_ns: float = 10.0
    speed: int = 6
    seed: int = 1
    out_of_context: bool = False
    max_dsps: int | None = None
    router: str = "router1"
    floorplan: bool = True

    def __post_init__(self) -> None:
        nextpnr_device_flag(self.part)
        dsp_budget(self.part, self.max_dsps)
        if self.router not in ROUTERS:
            raise ConfigError(f"nextpnr router must be one of {', '.join(ROUTERS)}, "
                              f"not {self.router!r}")
        if not self.clock_ns > 0:
            raise ConfigError(f"clock_ns must be a positive period in ns, not {self.clock_ns}")
        if self.speed not in SPEED_GRADES:
            raise ConfigError(f"ECP5 speed grade must be one of "
                              f"{', '.join(map(str, SPEED_GRADES))}, not {self.speed}")


def _part(part: str) -> re.Match[str]:
    """The family and size of a Lattice ECP5 part name, or a `ConfigError`."""
    match = _PART.fullmatch(part.upper())
    # Only the plain LFE5U comes in a 12k size.
    if not match or (match["family"] and match["size"] == "12"):
        raise ConfigError(
            f"unknown ECP5 part {part!r}; use one of LFE5U-12F/25F/45F/85F, "
            f"LFE5UM-25F/45F/85F or LFE5UM5G-25F/45F/85F"
        )
    return match


def nextpnr_device_flag(part: str) -> str:
    """The nextpnr-ecp5 device option for a Lattice part name (``LFE5U-85F`` -> ``--85k``)."""
    match = _part(part)
    prefix = {None: "", "M": "um-", "M5G": "um5g-"}[match["family"]]
    return f"--{prefix}{match['size']}k"


def part_dsps(part: str) -> int:
    """The MULT18X18D count of an ECP5 part name (``LFE5U-85F`` -> 156)."""
    return DSPS_BY_SIZE[_part(part)["size"]]


def dsp_budget(part: str, max_dsps: int | None) -> int:
    """The DSPs a design may use: ``max_dsps`` (default: all of the part's)."""
    available = part_dsps(part)
    if max_dsps is None:
        return available
    if not 0 <= max_dsps <= available:
        raise ConfigError(
            f"max_dsps={max_dsps} is outside 0..{available}, the MULT18X18D slices of {part}; "
            f"leave it unset to use them all"
        )
    return max_dsps


@dataclass(frozen=True)
class Ecp5Report(SynthesisReport):
    """Utilization and timing of one design on one ECP5 part.

    ``luts`` counts packed LUT4s (``TRELLIS_COMB``, carry halves included), ``dsps`` 18x18
    multipliers (``MULT18X18D``), ``brams`` 18 Kib block RAMs (``DP16KD``). ``fmax_mhz`` is the
    slowest clock's achieved Fmax, None without a clock. ``lut_multipliers`` counts the
    multipliers built from LUTs because the DSP budget (``dsp_budget``) ran out. ``speed``
    (the grade nextpnr timed against) and ``seed`` (its placement seed) say which run made
    ``fmax_mhz``: the same netlist differs by tens of percent between grades and by several
    MHz between seeds. ``floorplan`` says which hard blocks were pinned where
    (`ecp5_floorplan`), ``none`` when the placer chose every site.
    """

    top: str
    part: str
    package: str
    clock_ns: float
    luts: int
    ffs: int
    dsps: int
    brams: int
    fmax_mhz: float | None
    critical_path_ns: float | None
    fmax_by_clock: dict[str, float] = field(default_factory=dict)
    utilization: dict[str, int] = field(default_factory=dict)
    yosys_cells: dict[str, int] = field(default_factory=dict)
    lut_multipliers: int = 0
    dsp_budget: int | None = None
    speed: int = 6
    seed: int = 1
    floorplan: str = "none"

    def summary(self) -> dict[str, Any]:
        """The flat, stable JSON view the CLI prints (``flow``..``fmax_mhz`` are a contract)."""
        return {
            "flow": "ecp5",
            "part": self.part,
            "luts": self.luts,
            "ffs": self.ffs,
            "dsps": self.dsps,
            "lut_multipliers": self.lut_multipliers,
            "dsp_budget": self.dsp_budget,
            "brams": self.brams,
            "fmax_mhz": self.fmax_mhz,
            "critical_path_ns": self.critical_path_ns,
            "clock_ns": self.clock_ns,
            "speed": self.speed,
            "seed": self.seed,
            "floorplan": self.floorplan,
            "package": self.package,
            "top": self.top,
            "cells": self.yosys_cells,
            "cached": self.cached,
            "key": self.key,
        }


def synthesize_ecp5(
    verilog: str,
    top: str,
    *,
    part: str = "LFE5U-85F",
    package: str = "CABGA381",
    clock_ns: float = 10.0,
    speed: int = 6,
    seed: int = 1,
    out_of_context: bool = False,
    max_dsps: int | None = None,
    router: str = "router1",
    floorplan: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    store: ResultStore | None = None,
    use_cache: bool = True,
    keep_run: Path | None = None,
) -> Ecp5Report:
    """Synthesize and place-and-route ``verilog`` (top module ``top``) on an ECP5 part.

    ``clock_ns`` is the target period nextpnr optimizes for; a design that misses it still
    reports its achieved Fmax (timing failure is a result here, not an error). ``out_of_context``
    skips I/O buffers, for blocks with more ports than the package has pins. Multipliers beyond
    ``max_dsps`` (default: the part's MULT18X18D count) are built from LUTs (`ecp5_dsp`), so a
    design with more multipliers than the part has DSPs still fits. ``router`` is nextpnr's:
    router1 (default) gave the better Fmax on our designs; router2 is the alternative for
    large, congested ones on which router1 runs too long. ``floorplan``: pin a generated
    accelerator's PE multipliers and scratchpad/accumulator block RAMs compactly before
    placement (`ecp5_floorplan`; on parts it has site data for, and a no-op for designs without
    them). ``timeout_s`` bounds each tool run.
    The result is stored and returned from the store on later calls. ``keep_run``: run in
    that new or empty directory and keep it, logs and all (the store is not read then); its
    ``report.json`` then also lists the arrival time of every timing endpoint
    (``--detailed-timing-report``) and ``timing.sdf`` holds each one's setup time and clock
    delay, which `ecp5_timing` turns into per-endpoint slack. Both only add to what nextpnr
    writes after routing, so they are not part of the result's key.
    """
    return synthesize_ecp5_seeds(
        verilog, top, (seed,), part=part, package=package, clock_ns=clock_ns, speed=speed,
        out_of_context=out_of_context, max_dsps=max_dsps, router=router, floorplan=floorplan,
        timeout_s=timeout_s, store=store, use_cache=use_cache, keep_run=keep_run,
    )[0]


def synthesize_ecp5_seeds(
    verilog: str,
    top: str,
    seeds: Sequence[int],
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    store: ResultStore | None = None,
    use_cache: bool = True,
    keep_run: Path | None = None,
    jobs: int = 1,
    **options: Any,
) -> list[Ecp5Report]:
    """`synthesize_ecp5` at each of ``seeds``, one report per seed in that order: a seed sweep.

    ``options`` are `synthesize_ecp5`'s other keywords (``part``, ``clock_ns``, ``speed``...).
    Fmax moves by several MHz between placement seeds of one netlist (docs/ecp5_target.md),
    so timing closure tries a few; Yosys maps the design once and nextpnr places and routes
    that netlist at each seed that is not stored yet. Each report is stored under the key a
    single-seed `synthesize_ecp5` call gives it, as soon as it is made. With ``keep_run`` and
    several seeds, the Yosys files stay in ``keep_run`` and each seed's nextpnr files in
    ``keep_run/seed_N`` (beside links to the netlist and its statistics, so each is a run
    directory `ecp5_timing` reads). ``jobs``: how many nextpnr runs at once (each takes one
    core). `best_placement` picks the fastest.
    """
    check_top_name(top)
    seeds = _checked_seeds(seeds)
    runs = [Ecp5Options(top, seed=seed, **options) for seed in seeds]
    if jobs < 1:
        raise ConfigError(f"jobs must be at least 1 nextpnr run at a time, not {jobs}")
    store = store if store is not None else ResultStore()
    with ExitStack() as directories:
        # (DspMapping, floorplan, its directory), or the error that stopped Yosys
        mapping: list = []
        mapping_lock = threading.Lock()

        def mapped_design(key: str) -> tuple[DspMapping, str, Path]:
            with mapping_lock:  # the first seed that is not stored maps; the others wait
                if not mapping:
                    map_dir = directories.enter_context(run_directory("ecp5", key, keep_run))
                    try:
                        mapping.append((*_map_design(verilog, runs[0], map_dir, timeout_s,
                                                     key), map_dir))
                    except Exception as error:  # every seed's error: Yosys runs once
                        mapping.append(error)
            if isinstance(mapping[0], Exception):
                raise mapping[0]
            return mapping[0]

        def report_at(seed_options: Ecp5Options) -> Ecp5Report:
            def run(key: str) -> Ecp5Report:
                mapped, plan, map_dir = mapped_design(key)
                place_dir = map_dir if len(runs) == 1 else _seed_directory(
                    map_dir, seed_options.seed)
                stage = f"nextpnr seed {seed_options.seed}" if len(runs) > 1 else None
                return _place_and_route(mapped, plan, seed_options, map_dir, place_dir,
                                        timeout_s, key, detailed_timing=keep_run is not None,
                                        stage=stage)

            report = cached_synthesis(
                "ecp5", verilog, seed_options, run, Ecp5Report, store=store,
                use_cache=use_cache and keep_run is None,
            )
            # reports stored before ``speed`` and ``seed`` existed carry their defaults; the
            # options are part of the key, so they are this report's
            return dataclasses.replace(report, speed=seed_options.speed, seed=seed_options.seed)

        if jobs == 1 or len(runs) == 1:
            return [report_at(seed_options) for seed_options in runs]
        with ThreadPoolExecutor(max_workers=min(jobs, len(runs))) as pool:
            # each run in a copy of this context, so it reports to the caller's progress
            futures = [pool.submit(contextvars.copy_context().run, report_at, seed_options)
                       for seed_options in runs]
            try:
                # a seed's error comes after the others finish (and are stored)
                return [future.result() for future in futures]
            except KeyboardInterrupt:  # the runs wait in the pool's threads: stop them
                for future in futures:
                    future.cancel()
                stop_running_tools()
                raise


def best_placement(reports: Sequence[Ecp5Report]) -> Ecp5Report:
    """The report with the highest Fmax (without a clock: the shortest critical path); the
    earliest of equals, so a sweep's answer does not depend on how ties are broken."""
    def speed(report: Ecp5Report) -> tuple[float, float]:
        if report.fmax_mhz is not None:
            return (1.0, report.fmax_mhz)
        critical = report.critical_path_ns
        return (0.0, -critical if critical is not None else -math.inf)

    return max(reports, key=speed)


def _checked_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    seeds = tuple(seeds)
    if not seeds:
        raise ConfigError("give at least one nextpnr placement seed")
    repeated = sorted({seed for seed in seeds if seeds.count(seed) > 1})
    if repeated:
        raise ConfigError(f"placement seed {', '.join(map(str, repeated))} given twice; the "
                          "same seed places the same netlist the same way")
    return seeds


def _seed_directory(map_dir: Path, seed: int) -> Path:
    """``map_dir/seed_N``, holding the mapped netlist (nextpnr's only input) and its Yosys
    statistics as links, where the seed's nextpnr files go."""
    place_dir = map_dir / f"seed_{seed}"
    place_dir.mkdir()
    for name in ("netlist.json", STAT_FILE):
        try:
            (place_dir / name).hardlink_to(map_dir / name)
        except OSError:  # a file system without hard links
            shutil.copyfile(map_dir / name, place_dir / name)
    return place_dir


@dataclass(frozen=True)
class DspMapping:
    """The two Yosys runs of an ECP5 synthesis and the multipliers between them."""

    flatten: Any  # the `ToolRun` that flattened the design and listed its multipliers
    yosys: Any  # the `ToolRun` of synth_ecp5
    multipliers: list
    on_luts: list  # the multipliers built from LUTs because the DSP budget ran out


def map_within_dsp_budget(verilog: str | None, read: list[str], top: str, budget: int,
                          run_dir: Path, timeout_s: float) -> DspMapping:
    """Flatten ``top`` (``verilog`` text, or what the ``read`` commands load), list its
    multipliers, build those beyond ``budget`` DSPs from LUTs (Booth), then run synth_ecp5:
    every ECP5 build (`synthesize_ecp5`, the board build) maps this way. MULT18X18D slices the
    design instantiates itself (the ``ecp5`` target's PEs) count against the budget first."""
    flatten = run_yosys(verilog, [*read, *list_multipliers_commands(top), "write_rtlil flat.il"],
                        run_dir=run_dir, timeout_s=timeout_s, log_name="flatten")
    multipliers = read_multipliers((run_dir / MULTIPLIER_DUMP).read_text())
    instantiated = instantiated_dsps((run_dir / "flat.il").read_text())
    if instantiated > budget:
        raise ConfigError(f"{top} instantiates {instantiated} MULT18X18D slices, more than the "
                          f"{budget} DSPs it may use; generate it for fewer DSPs")
    on_luts = lut_multipliers(multipliers, budget - instantiated)
    (run_dir / LUT_SELECTION).write_text(selection_file(top, on_luts))
    yosys = run_yosys(None, ["read_rtlil flat.il", *booth_commands(len(on_luts)),
                             *ecp5_script(top)], run_dir=run_dir, timeout_s=timeout_s)
    return DspMapping(flatten, yosys, multipliers, on_luts)


def instantiated_dsps(rtlil: str) -> int:
    """MULT18X18D cells instantiated in a flattened design's RTLIL text."""
    return len(re.findall(r"^\s*cell \\MULT18X18D ", rtlil, re.M))


def _map_design(verilog: str, options: Ecp5Options, run_dir: Path, timeout_s: float,
                key: str) -> tuple[DspMapping, str]:
    """Yosys's half of the flow (what every placement seed shares), in ``run_dir``, and the
    floorplan written into its netlist (its summary)."""
    budget = dsp_budget(options.part, options.max_dsps)
    mapped = map_within_dsp_budget(verilog, [], options.top, budget, run_dir, timeout_s)
    if mapped.on_luts:
        logger.info("%s: %d of %d multipliers built from LUTs (budget %d DSPs)",
                    key, len(mapped.on_luts), len(mapped.multipliers), budget)
    plan = "none"
    if options.floorplan:
        plan = apply_floorplan(run_dir / "netlist.json", options.part).summary
        logger.info("%s: floorplan: %s", key, plan)
    return mapped, plan


def _place_and_route(
    mapped: DspMapping, floorplan: str, options: Ecp5Options, map_dir: Path, run_dir: Path,
    timeout_s: float, key: str, *, detailed_timing: bool = False, stage: str | None = None,
) -> Ecp5Report:
    """nextpnr's half of the flow on the netlist in ``run_dir``, mapped in ``map_dir``
    (``stage``: the progress stage's name, default nextpnr's)."""
    stat = read_stat(map_dir, options.top)
    args = [
        nextpnr_device_flag(options.part),
        "--package", options.package,
        "--speed", str(options.speed),
        "--freq", f"{1000.0 / options.clock_ns:.6g}",
        "--seed", str(options.seed),
        "--router", options.router,
        "--json", "netlist.json",
        "--report", "report.json",
        "--timing-allow-fail",
    ]
    if options.out_of_context:
        args.append("--out-of-context")
    if detailed_timing:
        args += ["--detailed-timing-report", "--sdf", "timing.sdf"]
    fit = FitCheck(options.part, lut_multipliers=len(mapped.on_luts))
    nextpnr = run_tool(NEXTPNR_ECP5, args, cwd=run_dir, log_name="nextpnr.log",
                       timeout_s=timeout_s, stage=stage, watch=fit)
    fmax_by_clock, critical_path_ns, utilization = _read_nextpnr_report(
        run_dir / "report.json", nextpnr.log()
    )
    fmax = min(fmax_by_clock.values()) if fmax_by_clock else None
    if fmax is None:
        logger.info("%s has no clock: Fmax is not defined, reporting the critical path", key)
    yosys = mapped.yosys
    return Ecp5Report(
        top=options.top,
        part=options.part,
        package=options.package,
        clock_ns=options.clock_ns,
        luts=utilization.get("TRELLIS_COMB", 0),
        ffs=utilization.get("TRELLIS_FF", 0),
        dsps=utilization.get("MULT18X18D", 0),
        brams=utilization.get("DP16KD", 0),
        fmax_mhz=fmax,
        critical_path_ns=round(1000.0 / fmax, 4) if fmax else critical_path_ns,
        fmax_by_clock=fmax_by_clock,
        utilization=utilization,
        yosys_cells=stat.cells_by_type,
        lut_multipliers=len(mapped.on_luts),
        dsp_budget=dsp_budget(options.part, options.max_dsps),
        speed=options.speed,
        seed=options.seed,
        floorplan=floorplan,
        tool_seconds={"yosys": round(mapped.flatten.seconds + yosys.seconds, 3),
                      "nextpnr": round(nextpnr.seconds, 3)},
        tool_versions={"yosys": tool_version(YOSYS), "nextpnr": tool_version(NEXTPNR_ECP5)},
        logs={"yosys": log_tail(yosys.log()), "nextpnr": log_tail(nextpnr.log())},
        key=key,
    )


#: The delay ABC9 assumes for the net between two LUTs while it maps logic (``abc9 -W``, ps).
#: ``synth_ecp5`` assumes 300; the routed nets of our accelerators' failing paths take about
#: 1 ns each on speed 6, and with the floorplan 1000 gave the faster placements (the whole
#: 8x8: docs/ecp5_target.md, session 17).
LUT_WIRE_DELAY_PS = 1000


def ecp5_script(top: str) -> list[str]:
    """``synth_ecp5`` with the public wire names dropped before LUT mapping.

    Amaranth names the elements of an ``amaranth.lib.data`` array view after the port they
    alias: output ``out__payload`` (64 bits) comes with wires ``out__payload[0]`` and
    ``out__payload[1]``. ABC9 hands LUT outputs back to Yosys as single bits named
    ``<wire>[<bit>]`` and rebuilds buses by that suffix, so bit 0 of the port and the element
    wire become the same name and Yosys stops on ``Assert `count_id(wire->name) == 0'`` (Yosys
    issue #4349; the PE arrays' ``out`` port hits it). ``opt_clean -purge`` removes such alias
    wires (ports stay) before ABC9 runs, as suggested there.

    LUT mapping is ``synth_ecp5``'s own ``map_luts`` step, command by command, but for ABC9's
    wire delay (`LUT_WIRE_DELAY_PS`).
    """
    return [
        f"synth_ecp5 -top {top} -run :map_luts",
        "opt_clean -purge",
        "check -latchonly -assert",
        "techmap -map +/lattice/latches_map.v",
        f"abc9 -W {LUT_WIRE_DELAY_PS}",
        "clean",
        f"synth_ecp5 -top {top} -run map_cells: -json netlist.json",
        stat_command(),
    ]


def _read_nextpnr_report(
    path: Path, log: str
) -> tuple[dict[str, float], float | None, dict[str, int]]:
    """Fmax per clock, the longest reported path (ns) and the used resources per cell type."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ToolError(
            "nextpnr-ecp5", f"did not write a readable report ({path}): {error}", log
        ) from None
    fmax_by_clock = {
        clock: round(float(entry["achieved"]), 3) for clock, entry in report.get("fmax", {}).items()
    }
    path_delays = [
        sum(float(step.get("delay", 0.0)) for step in critical.get("path", []))
        for critical in report.get("critical_paths", [])
    ]
    utilization = {
        cell: int(entry["used"])
        for cell, entry in report.get("utilization", {}).items()
        if int(entry.get("used", 0))
    }
    critical_path_ns = round(max(path_delays), 4) if path_delays else None
    return fmax_by_clock, critical_path_ns, utilization
