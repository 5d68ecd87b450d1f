"""Which blocks of a design fail timing on ECP5: every endpoint's slack, grouped by hierarchy.

nextpnr-ecp5's log and ``--report`` JSON name only the worst path of each clock. A run kept with
``synth --keep-run DIR`` has two more files (`synthesize_ecp5` asks nextpnr for them then):

* ``report.json`` with ``detailed_net_timings`` (``--detailed-timing-report``): for every
  timing endpoint (a registered input: flip-flop DI/M/CE/LSR, distributed-RAM write port,
  block-RAM input) the ``[min, max]`` arrival time in ns, launch clock delay included, and the
  launch and capture clock events. It carries no required time and no slack.
* ``timing.sdf`` (``--sdf``): the setup time of each registered input (``SETUPHOLD``) and the
  routed delay of every net arc (``INTERCONNECT``), clock nets included where they are routed.

nextpnr's own slack of an endpoint (``TimingAnalyser``, with clock skew, as in its slack
histogram) is ``period - (arrival_max - required_min)`` with ``required_min = capture clock
delay - setup_max``; `endpoint_slacks` computes exactly that from the two files. The period is
the clock's constraint from the report, halved when launch and capture edges differ;
asynchronous and cross-clock endpoints are left out, as nextpnr's histogram leaves them out.
`histogram_lines` bins the slacks the way nextpnr's log does, so a run checks itself against
the "Slack histogram" nextpnr printed (`log_histogram_lines`).

Endpoints are grouped by the dotted prefix of their cell's name: nextpnr names a flip-flop
after the register it holds (``compute.target_TRELLIS_FF_Q_3`` is a bit of ``compute.target``),
a RAM after its memory, so the Amaranth module path survives (`block_of`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tensorforge.errors import ConfigError

#: Slack bins (ns) of the per-block table: failing endpoints by how far they miss.
DEFAULT_BINS_NS = (-4.0, -3.0, -2.0, -1.0, -0.5, 0.0)
TOP_LEVEL = "(top)"
UNNAMED = "(unnamed)"

_SDF_CELL = re.compile(r"\(INSTANCE\s+([^)\s]*)\s*\)")
_SDF_SETUP = re.compile(
    r"\(SETUPHOLD\s+\((?:posedge|negedge)\s+(\S+?)\)\s+\((posedge|negedge)\s+(\S+?)\)\s+"
    r"\(([-\d.]*):([-\d.]*):([-\d.]*)\)"
)
_SDF_INTERCONNECT = re.compile(
    r"\(INTERCONNECT\s+(\S+)\s+(\S+)\s+\(([-\d.]*):([-\d.]*):([-\d.]*)\)"
)
_SDF_TIMESCALE = re.compile(r"\(TIMESCALE\s+(\d+)\s*(ps|ns)\)")
_LOG_HISTOGRAM_ROW = re.compile(r"^Info: (\[\s*-?\d+,\s*-?\d+\) \|[*]*[+ ]?)\s*$")


@dataclass(frozen=True)
class Endpoint:
    """One timing endpoint's setup slack: ``cell.port`` captured by ``clock``."""

    cell: str
    port: str
    clock: str
    arrival_ns: float
    setup_ns: float
    clock_delay_ns: float
    slack_ns: float
    launch_known: bool = True


@dataclass
class BlockTiming:
    """The endpoints of one hierarchy prefix: how many, how many fail and by how much."""

    block: str
    endpoints: int = 0
    failing: int = 0
    worst_slack_ns: float = math.inf
    total_negative_slack_ns: float = 0.0
    bins: list[int] = field(default_factory=list)
    worst: list[Endpoint] = field(default_factory=list)


@dataclass(frozen=True)
class SdfTiming:
    """What `endpoint_slacks` needs from an SDF file: setups and clock-pin delays (ns)."""

    setup_ns: dict[tuple[str, str], float]
    clock_port: dict[tuple[str, str], str]
    clock_delay_ns: dict[tuple[str, str], float]


def _unescape(name: str) -> str:
    return re.sub(r"\\(.)", r"\1", name)


def _split_pin(pin: str) -> tuple[str, str]:
    cell, _, port = _unescape(pin).rpartition("/")
    return cell, port


def read_sdf(text: str) -> SdfTiming:
    """The setup time (max, ns) and clock pin of each registered input, and the routed delay
    (min, ns) of each net arc into one of those clock pins, from nextpnr's SDF."""
    scale_match = _SDF_TIMESCALE.search(text)
    scale = 1.0
    if scale_match:
        scale = float(scale_match[1]) * (0.001 if scale_match[2] == "ps" else 1.0)
    setup: dict[tuple[str, str], float] = {}
    clock_port: dict[tuple[str, str], str] = {}
    cell = None
    for line in text.splitlines():
        if "(INSTANCE" in line:
            match = _SDF_CELL.search(line)
            cell = _unescape(match[1]) if match else None
            continue
        if "SETUPHOLD" not in line or cell is None:
            continue
        match = _SDF_SETUP.search(line)
        if not match:
            continue
        port, clock = _unescape(match[1]), _unescape(match[3])
        value = float(match[6] or 0.0) * scale
        key = (cell, port)
        setup[key] = max(setup.get(key, -math.inf), value)
        clock_port[key] = clock
    wanted = {(c, clk) for (c, _), clk in clock_port.items()}
    clock_delay: dict[tuple[str, str], float] = {}
    for match in _SDF_INTERCONNECT.finditer(text):
        sink = _split_pin(match[2])
        if sink in wanted:
            clock_delay[sink] = float(match[3] or 0.0) * scale
    return SdfTiming(setup, clock_port, clock_delay)


def _edge_and_clock(event: str) -> tuple[str, str]:
    edge, _, clock = event.partition(" ")
    return edge, clock


def endpoint_slacks(report: dict, sdf: SdfTiming | None) -> list[Endpoint]:
    """Every same-clock timing arc into an endpoint of ``report`` (nextpnr's JSON with
    ``detailed_net_timings``) with its setup slack; ``sdf`` None takes setup times and clock
    delays as 0.

    nextpnr lists an endpoint once per launch domain (a flip-flop fed both from registers and
    from an input port: clock and ``<async>``) but names only the launch of its net's first
    entry (the net's ``event``); an endpoint's later entries have no launch, and are taken as
    launched by the capture clock's edge (``launch_known`` False). `read_run`'s check against
    nextpnr's histogram tells whether that guess held.
    """
    if "detailed_net_timings" not in report:
        raise ConfigError("the nextpnr report has no detailed_net_timings; run nextpnr with "
                          "--detailed-timing-report (synth --keep-run DIR does)")
    periods = {clock: 1000.0 / float(entry["constraint"])
               for clock, entry in report.get("fmax", {}).items()
               if float(entry.get("constraint", 0) or 0) > 0}
    endpoints = []
    for net in report["detailed_net_timings"]:
        seen: set[tuple[str, str]] = set()
        for sink in net.get("endpoints", []):
            key = (sink["cell"], sink["port"])
            capture_edge, capture_clock = _edge_and_clock(sink.get("event", ""))
            launch_known = key not in seen
            seen.add(key)
            if launch_known:
                launch_edge, launch_clock = _edge_and_clock(net.get("event", ""))
            else:
                launch_edge, launch_clock = capture_edge, capture_clock
            if launch_clock != capture_clock or capture_clock not in periods:
                continue  # asynchronous or cross-clock: not in nextpnr's histogram either
            period = periods[capture_clock]
            if launch_edge != capture_edge:
                period /= 2
            setup = sdf.setup_ns.get(key, 0.0) if sdf else 0.0
            clock_delay = 0.0
            if sdf and key in sdf.clock_port:
                clock_delay = sdf.clock_delay_ns.get((key[0], sdf.clock_port[key]), 0.0)
            arrival = float(sink["delay"][1])
            slack = period - (arrival - (clock_delay - setup))
            endpoints.append(Endpoint(sink["cell"], sink["port"], capture_clock, arrival, setup,
                                      clock_delay, slack, launch_known))
    return endpoints


def endpoints_under(endpoints: Iterable[Endpoint], prefix: str | None) -> list[Endpoint]:
    """The endpoints in module ``prefix`` or below it (all of them for ``None``)."""
    if not prefix:
        return list(endpoints)
    return [ep for ep in endpoints if ep.cell == prefix or ep.cell.startswith(prefix + ".")]


def block_of(cell: str, depth: int = 1) -> str:
    """The hierarchy prefix of a cell name, ``depth`` dotted components at most.

    The last component is the signal itself and never part of the prefix
    (``compute.target_TRELLIS_FF_Q_3`` -> ``compute``); a name without a dot is the top
    module's; Yosys' ``$``-names (``$auto$ff.cc:266...``) carry no hierarchy.
    """
    if cell.startswith("$"):
        return UNNAMED
    parts = cell.split(".")[:-1]
    if not parts:
        return TOP_LEVEL
    return ".".join(parts[:depth])


def signal_of(cell: str) -> str:
    """The register or memory a cell holds a bit of: the name up to nextpnr's and Yosys'
    suffixes (``compute.target_TRELLIS_FF_Q_3`` -> ``compute.target``)."""
    name = re.split(r"_TRELLIS_|\$|_DP16KD|_MULT18X18D", cell, maxsplit=1)[0]
    return name or cell


def group_by_block(endpoints: Iterable[Endpoint], depth: int = 1,
                   bins_ns: Sequence[float] = DEFAULT_BINS_NS, keep_worst: int = 3,
                   key=None) -> list[BlockTiming]:
    """Endpoints grouped by `block_of` (or ``key``), worst block first; an endpoint listed
    once per launch domain counts once, with its worst slack.

    ``bins`` counts the failing endpoints in ``(-inf, b0), [b0, b1), ... [b_last-1, b_last)``;
    ``bins_ns`` must end at 0 so that the bins hold exactly the failing endpoints.
    """
    if not bins_ns or bins_ns[-1] != 0.0 or list(bins_ns) != sorted(bins_ns):
        raise ConfigError(f"slack bins must rise and end at 0 ns, not {list(bins_ns)}")
    key = key or (lambda ep: block_of(ep.cell, depth))
    worst_arc: dict[tuple[str, str, str], Endpoint] = {}
    for ep in endpoints:  # an endpoint with several launch domains counts once, its worst
        arc = (ep.cell, ep.port, ep.clock)
        if arc not in worst_arc or ep.slack_ns < worst_arc[arc].slack_ns:
            worst_arc[arc] = ep
    blocks: dict[str, BlockTiming] = {}
    members: dict[str, list[Endpoint]] = defaultdict(list)
    for ep in worst_arc.values():
        name = key(ep)
        block = blocks.setdefault(name, BlockTiming(name, bins=[0] * len(bins_ns)))
        block.endpoints += 1
        block.worst_slack_ns = min(block.worst_slack_ns, ep.slack_ns)
        if ep.slack_ns < 0:
            block.failing += 1
            block.total_negative_slack_ns += ep.slack_ns
            block.bins[_bin_index(ep.slack_ns, bins_ns)] += 1
            members[name].append(ep)
    for name, failing in members.items():
        blocks[name].worst = sorted(failing, key=lambda ep: ep.slack_ns)[:keep_worst]
    return sorted(blocks.values(), key=lambda b: (-b.failing, b.worst_slack_ns, b.block))


def _bin_index(slack: float, bins_ns: Sequence[float]) -> int:
    for index, edge in enumerate(bins_ns):
        if slack < edge:
            return index
    raise AssertionError("a failing slack is below the last bin edge, 0")


def histogram_lines(slacks_ns: Iterable[float], num_bins: int = 20,
                    bar_width: int = 60) -> list[str]:
    """nextpnr's "Slack histogram" rows (`log_histogram` in its timing_log.cc) for these
    slacks: integer picoseconds, the same bins and bars, so they compare line by line."""
    counts: dict[int, int] = defaultdict(int)
    for slack in slacks_ns:
        counts[round(slack * 1000.0)] += 1
    if not counts:
        return []
    low, high = min(counts), max(counts)
    size = max(1, math.ceil((high - low + 1) / num_bins))
    bins = [0] * num_bins
    for slack_ps, n in counts.items():
        bins[min(max((slack_ps - low) // size, 0), num_bins - 1)] += n
    most = max(bins)
    width = min(bar_width, most)
    return [f"[{low + size * i:6d}, {low + size * (i + 1):6d}) |{'*' * (bins[i] * width // most)}"
            f"{'+' if (bins[i] * width) % most else ' '}" for i in range(num_bins)]


def log_histogram_lines(log: str) -> list[str]:
    """The rows of the last "Slack histogram" in a nextpnr log (the one after routing)."""
    rows: list[str] = []
    collecting = False
    for line in log.splitlines():
        if "Slack histogram:" in line:
            rows, collecting = [], True
            continue
        if collecting:
            match = _LOG_HISTOGRAM_ROW.match(line)
            if match:
                rows.append(match[1].rstrip())
            elif rows:
                collecting = False
    return rows


@dataclass
class RunTiming:
    """A kept run's endpoints and whether they reproduce nextpnr's own slack histogram."""

    run_dir: Path
    endpoints: list[Endpoint]
    clocks: dict[str, float]
    histogram_matches: bool | None
    has_sdf: bool


def read_run(run_dir: Path) -> RunTiming:
    """The endpoints of a run directory kept by ``synth --keep-run`` (report.json, timing.sdf
    when present, nextpnr.log for the check against nextpnr's histogram)."""
    run_dir = Path(run_dir)
    try:
        report = json.loads((run_dir / "report.json").read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(f"{run_dir}: no readable nextpnr report.json ({error})") from None
    sdf_path = run_dir / "timing.sdf"
    sdf = read_sdf(sdf_path.read_text()) if sdf_path.exists() else None
    endpoints = endpoint_slacks(report, sdf)
    log_path = run_dir / "nextpnr.log"
    matches = None
    if log_path.exists():
        theirs = log_histogram_lines(log_path.read_text(errors="replace"))
        if theirs:
            ours = histogram_lines(ep.slack_ns for ep in endpoints)
            matches = [r.rstrip() for r in ours] == [r.rstrip() for r in theirs]
    clocks = {clock: float(entry["achieved"]) for clock, entry in report.get("fmax", {}).items()}
    return RunTiming(run_dir, endpoints, clocks, matches, sdf is not None)


def format_table(blocks: Sequence[BlockTiming], bins_ns: Sequence[float] = DEFAULT_BINS_NS,
                 markdown: bool = False) -> str:
    """The per-block table: endpoints, failing, worst slack, TNS and the failing histogram."""
    edges = [-math.inf, *bins_ns]
    bin_names = [f"<{bins_ns[0]:g}" if i == 0 else f"{edges[i]:g}..{edges[i + 1]:g}"
                 for i in range(len(bins_ns))]
    header = ["block", "endpoints", "failing", "worst ns", "TNS ns", *bin_names]
    rows = [[b.block, str(b.endpoints), str(b.failing),
             f"{b.worst_slack_ns:.2f}", f"{b.total_negative_slack_ns:.1f}",
             *(str(n) for n in b.bins)] for b in blocks]
    total = BlockTiming("total", bins=[0] * len(bins_ns))
    for b in blocks:
        total.endpoints += b.endpoints
        total.failing += b.failing
        total.worst_slack_ns = min(total.worst_slack_ns, b.worst_slack_ns)
        total.total_negative_slack_ns += b.total_negative_slack_ns
        total.bins = [x + y for x, y in zip(total.bins, b.bins, strict=True)]
    rows.append([total.block, str(total.endpoints), str(total.failing),
                 f"{total.worst_slack_ns:.2f}", f"{total.total_negative_slack_ns:.1f}",
                 *(str(n) for n in total.bins)])
    if markdown:
        lines = ["| " + " | ".join(header) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*row) for row in [header, *rows])


def main(argv: list[str] | None = None) -> int:
    """The per-block table of a kept run (benchmarks/ecp5_failing_paths.py); exit status 1
    when the slacks do not reproduce the histogram nextpnr printed."""
    parser = argparse.ArgumentParser(
        prog="ecp5_failing_paths",
        description="Which blocks of a kept ECP5 run (synth --keep-run DIR) fail timing.")
    parser.add_argument("run_dir", type=Path, help="a directory kept by synth --keep-run")
    parser.add_argument("--depth", type=int, default=1,
                        help="hierarchy levels to group by (default 1: compute, load, ...)")
    parser.add_argument("--under", default=None, metavar="PREFIX",
                        help="only endpoints under this module prefix (e.g. compute)")
    parser.add_argument("--signals", type=int, default=15, metavar="N",
                        help="list the N registers with the most failing bits (default 15)")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args(argv)

    try:
        run = read_run(args.run_dir)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    endpoints = endpoints_under(run.endpoints, args.under)
    clocks = ", ".join(f"{clock} {mhz:.2f} MHz" for clock, mhz in run.clocks.items())
    match = {True: "yes", False: "NO", None: "no histogram in the log"}[run.histogram_matches]
    distinct = {(ep.cell, ep.port, ep.clock) for ep in run.endpoints}
    guessed = sum(not ep.launch_known for ep in run.endpoints)
    print(f"{run.run_dir}: {len(distinct)} endpoints ({len(run.endpoints)} same-clock arcs, "
          f"{guessed} of them with the launch clock guessed); achieved {clocks}")
    print(f"setup times and clock delays from timing.sdf: {'yes' if run.has_sdf else 'NO (0)'}; "
          f"matches nextpnr's histogram: {match}")
    print()
    print(format_table(group_by_block(endpoints, args.depth, DEFAULT_BINS_NS),
                       DEFAULT_BINS_NS, markdown=args.markdown))
    if args.signals:
        failing = {(ep.cell, ep.port, ep.clock): ep for ep in sorted(
            endpoints, key=lambda ep: -ep.slack_ns) if ep.slack_ns < 0}.values()
        bits = Counter(signal_of(ep.cell) for ep in failing)
        worst = {}
        for ep in failing:
            name = signal_of(ep.cell)
            worst[name] = min(worst.get(name, 0.0), ep.slack_ns)
        print()
        print(f"registers and memories with the most failing endpoints (of {len(failing)}):")
        for name, count in bits.most_common(args.signals):
            print(f"  {count:5d}  worst {worst[name]:6.2f} ns  {name}")
    return 0 if run.histogram_matches is not False else 1


if __name__ == "__main__":
    sys.exit(main())
