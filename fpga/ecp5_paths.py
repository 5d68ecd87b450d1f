"""Where the failing paths of a kept ECP5 run start: a whole-design static timing analysis from
nextpnr's SDF.

nextpnr's ``report.json`` gives every endpoint's arrival time (`ecp5_timing` turns it into a
slack) but not the path behind it; its log names one path per clock. The SDF that
``synth --keep-run`` keeps (``timing.sdf``) has every delay the arrival was summed from:

* ``INTERCONNECT driver/PIN sink/PIN`` -- one net arc: 0 ps for the carry chains' ``FCO ->
  FCI`` and the wide muxes' ``OFX -> FXA``/``F -> F1``, 80 ps for LUT-RAM's ``WADO -> WAD``,
  from 0.04 to 3 ns through the routing on speed 6 (a path's "routed nets" are its nets of
  nonzero delay);
* ``IOPATH IN OUT`` in a cell -- a combinational arc (LUT, carry, mux, combinational multiplier)
  or, from a clock pin (``CLK``, ``CLKA``, ``WCK``, ``CLK0``, or written ``(posedge CLK)``), the
  launch of a clocked output (flip-flop Q, block-RAM DO, registered multiplier P);
* ``SETUPHOLD`` / ``SETUP`` -- the registered inputs and their clock pins.

`read_sdf_graph` reads the arcs (max of ``(min:typ:max)``, both transitions) into flat arrays;
`propagate` walks the combinational graph once in topological order from every launch point and
keeps, for each pin, the worst arrival and the arc it came over, so `worst_path` rebuilds the
worst path into any endpoint. A clock pin's arrival is the routed delay into it when the SDF has
one (0 otherwise: nextpnr writes no arcs for the global clock network), as nextpnr adds the
launch clock delay to its arrivals.

`check_against_report` compares every endpoint's arrival with the one in ``report.json``
(`ecp5_timing.endpoint_slacks`); `analyse_run` refuses a run where fewer than
`MIN_MATCHING_SHARE` of them agree within `MATCH_TOLERANCE_NS`, so nobody reads a table built
from a misread SDF. Slacks stay `ecp5_timing`'s (checked against nextpnr's histogram); this
module only says which path each failing endpoint's arrival came from.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tensorforge.errors import ConfigError
from tensorforge.fpga.ecp5_timing import (
    UNNAMED,
    Endpoint,
    RunTiming,
    block_of,
    endpoints_under,
    read_run,
    signal_of,
)

#: Computed and nextpnr's arrival agree when within this (ns); nextpnr's delays are integer ps.
MATCH_TOLERANCE_NS = 0.01
#: The share of report endpoints whose arrival must match for the analysis to be trusted.
MIN_MATCHING_SHARE = 0.99
#: Routed-net columns of the grouped table: ``<=first``, each value, ``>=last``.
ROUTED_NET_COLUMNS = (5, 6, 7, 8, 9, 10)
#: Clock pins of ECP5 cells whose IOPATHs nextpnr writes without an edge.
CLOCK_PORTS = frozenset({"CLK", "CLKA", "CLKB", "CLK0", "CLK1", "CLK2", "CLK3", "WCK"})

_NAME = r"(?:\\.|[^\s()\\])+"
_PORT = rf"(?:\((?:posedge|negedge)\s+({_NAME})\)|({_NAME}))"
_VALUE = r"\(([^()]*)\)"
_INSTANCE = re.compile(rf"\(INSTANCE\s*({_NAME})?\s*\)")
_INTERCONNECT = re.compile(rf"\(INTERCONNECT\s+({_NAME})\s+({_NAME})\s+{_VALUE}(?:\s*{_VALUE})?")
_IOPATH = re.compile(rf"\(IOPATH\s+{_PORT}\s+{_PORT}\s+{_VALUE}(?:\s*{_VALUE})?")
_SETUP = re.compile(rf"\((SETUPHOLD|SETUP)\s+{_PORT}\s+{_PORT}\s+{_VALUE}")
_TIMESCALE = re.compile(r"\(TIMESCALE\s+(\d+)\s*(ps|ns)\)")
_ESCAPE = re.compile(r"\\(.)")


def unescape(name: str) -> str:
    """An SDF identifier without its backslash escapes (``a\\$b`` -> ``a$b``)."""
    return _ESCAPE.sub(r"\1", name) if "\\" in name else name


def split_pin(pin: str) -> tuple[str, str]:
    """``cell/PORT`` (unescaped) -> (cell, port); a port never holds the divider ``/``."""
    cell, _, port = pin.rpartition("/")
    return cell, port


def _max_value(*fields: str | None) -> float | None:
    """The largest number in SDF value fields such as ``430:477:525`` (None when all empty)."""
    numbers = [float(part) for text in fields if text for part in text.split(":") if part.strip()]
    return max(numbers) if numbers else None


@dataclass
class SdfGraph:
    """The timing arcs of one SDF, pins numbered in `pins` (``cell/PORT``, unescaped), delays
    in ps.

    ``arc_*`` are the combinational arcs (routed nets and cell IOPATHs), ``arc_is_net`` tells
    which; ``launch_*`` the clocked arcs from a clock pin to the output it launches; ``setup_ps``
    the setup time (max) of each registered input pin, ``clock_pin`` its clock pin;
    ``clock_arrival_ps`` the routed delay into a clock pin where the SDF has one.
    """

    pins: list[str] = field(default_factory=list)
    pin_ids: dict[str, int] = field(default_factory=dict)
    arc_from: array = field(default_factory=lambda: array("l"))
    arc_to: array = field(default_factory=lambda: array("l"))
    arc_ps: array = field(default_factory=lambda: array("d"))
    arc_is_net: array = field(default_factory=lambda: array("b"))
    launch_clock: array = field(default_factory=lambda: array("l"))
    launch_to: array = field(default_factory=lambda: array("l"))
    launch_ps: array = field(default_factory=lambda: array("d"))
    setup_ps: dict[int, float] = field(default_factory=dict)
    clock_pin: dict[int, int] = field(default_factory=dict)
    clock_arrival_ps: dict[int, float] = field(default_factory=dict)

    def pin(self, name: str) -> int:
        """The number of pin ``name`` (``cell/PORT``, unescaped), new pins numbered in order."""
        number = self.pin_ids.get(name)
        if number is None:
            number = self.pin_ids[name] = len(self.pins)
            self.pins.append(name)
        return number

    def add_arc(self, source: int, sink: int, delay_ps: float, is_net: bool) -> None:
        self.arc_from.append(source)
        self.arc_to.append(sink)
        self.arc_ps.append(delay_ps)
        self.arc_is_net.append(is_net)


def read_sdf_graph(lines: Iterable[str]) -> SdfGraph:
    """Every timing arc of nextpnr's SDF, read line by line (nextpnr writes one construct a
    line), so a 42 MB file never sits in memory as text or as per-arc objects.

    An IOPATH is a launch arc when its input has an edge, is a clock pin of one of the cell's
    timing checks, or is one of `CLOCK_PORTS`; the cell's arcs are classified at its end since
    nextpnr writes its DELAY block before its TIMINGCHECK block.
    """
    graph = SdfGraph()
    scale = 1.0
    cell = ""
    pending: list[tuple[str, str, bool, float]] = []  # the cell's IOPATHs: in, out, edge, ps
    clocks: set[str] = set()

    def finish_cell() -> None:
        for source, sink, edge, delay in pending:
            if edge or source in clocks or source in CLOCK_PORTS:
                graph.launch_clock.append(graph.pin(f"{cell}/{source}"))
                graph.launch_to.append(graph.pin(f"{cell}/{sink}"))
                graph.launch_ps.append(delay)
            else:
                graph.add_arc(graph.pin(f"{cell}/{source}"), graph.pin(f"{cell}/{sink}"),
                              delay, False)
        pending.clear()
        clocks.clear()

    for line in lines:
        if "(INTERCONNECT" in line:
            match = _INTERCONNECT.search(line)
            delay = _max_value(match[3], match[4]) if match else None
            if delay is not None:
                graph.add_arc(graph.pin(unescape(match[1])), graph.pin(unescape(match[2])),
                              delay * scale, True)
        elif "(IOPATH" in line:
            match = _IOPATH.search(line)
            delay = _max_value(match[5], match[6]) if match else None
            if delay is not None:
                source = unescape(match[1] or match[2])
                pending.append((source, unescape(match[3] or match[4]), match[1] is not None,
                                delay * scale))
        elif "(SETUP" in line:
            match = _SETUP.search(line)
            if match:
                data = graph.pin(f"{cell}/{unescape(match[2] or match[3])}")
                clock = unescape(match[4] or match[5])
                clocks.add(clock)
                setup = (_max_value(match[6]) or 0.0) * scale
                graph.setup_ps[data] = max(graph.setup_ps.get(data, -math.inf), setup)
                graph.clock_pin[data] = graph.pin(f"{cell}/{clock}")
        elif "(INSTANCE" in line:
            finish_cell()
            match = _INSTANCE.search(line)
            cell = unescape(match[1] or "") if match else ""
        elif "(TIMESCALE" in line:
            match = _TIMESCALE.search(line)
            if match:  # to ps
                scale = float(match[1]) * (1.0 if match[2] == "ps" else 1000.0)
    finish_cell()
    clock_pins = set(graph.launch_clock)
    for sink, delay in zip(graph.arc_to, graph.arc_ps, strict=True):
        if sink in clock_pins:
            graph.clock_arrival_ps[sink] = max(graph.clock_arrival_ps.get(sink, 0.0), delay)
    if not graph.launch_to:
        raise ConfigError("the SDF has no clocked arcs (no IOPATH from a clock pin); is it "
                          "nextpnr's --sdf output of a placed and routed design?")
    return graph


@dataclass
class Arrivals:
    """The worst arrival (ps) at every pin and where it came from.

    ``via_arc[pin]`` is the combinational arc of the worst arrival, -1 at a launched output
    (``via_launch[pin]`` is then its launch arc) and at a pin no launch reaches
    (``arrival_ps`` -inf). ``looped`` counts pins left out because they sit on a
    combinational loop.
    """

    arrival_ps: list[float]
    via_arc: list[int]
    via_launch: list[int]
    looped: int


def propagate(graph: SdfGraph) -> Arrivals:
    """Arrival times from every launch point through the combinational arcs, in topological
    order (Kahn's algorithm over the whole graph, so pins no launch reaches do not block)."""
    count = len(graph.pins)
    arrival = [-math.inf] * count
    via_arc = [-1] * count
    via_launch = [-1] * count
    for index, (clock, sink, delay) in enumerate(zip(graph.launch_clock, graph.launch_to,
                                                     graph.launch_ps, strict=True)):
        value = graph.clock_arrival_ps.get(clock, 0.0) + delay
        if value > arrival[sink]:
            arrival[sink], via_launch[sink] = value, index
    fanout: list[list[int]] = [[] for _ in range(count)]
    indegree = [0] * count
    for index, (source, sink) in enumerate(zip(graph.arc_from, graph.arc_to, strict=True)):
        fanout[source].append(index)
        indegree[sink] += 1
    ready = [pin for pin in range(count) if indegree[pin] == 0]
    done = 0
    arc_to, arc_ps = graph.arc_to, graph.arc_ps
    while ready:
        pin = ready.pop()
        done += 1
        here = arrival[pin]
        for index in fanout[pin]:
            sink = arc_to[index]
            value = here + arc_ps[index]
            if value > arrival[sink]:
                arrival[sink], via_arc[sink] = value, index
            indegree[sink] -= 1
            if indegree[sink] == 0:
                ready.append(sink)
    return Arrivals(arrival, via_arc, via_launch, count - done)




@dataclass(frozen=True)
class PathStep:
    """One arc of a path: ``clock-to-out`` (the launch), ``logic`` (a cell arc) or ``net``."""

    kind: str
    source: str
    sink: str
    delay_ns: float


@dataclass(frozen=True)
class TimingPath:
    """The worst path into one endpoint pin, launch first."""

    endpoint: str
    arrival_ns: float
    steps: tuple[PathStep, ...]

    @property
    def launch_cell(self) -> str:
        return split_pin(self.steps[0].source)[0]

    @property
    def routed_nets(self) -> int:
        """Nets that cost routing: carry-chain and LUT-RAM-internal nets (0 ps) do not."""
        return sum(step.kind == "net" and step.delay_ns > 0 for step in self.steps)

    @property
    def routing_ns(self) -> float:
        return sum(step.delay_ns for step in self.steps if step.kind == "net")

    @property
    def logic_levels(self) -> int:
        """Cell arcs that end the way out of a cell: a LUT, mux or an adder counts once (its
        ``-> FCO`` carry arcs do not), zero-delay pass-throughs not at all."""
        return sum(step.kind == "logic" and step.delay_ns > 0
                   and split_pin(step.sink)[1] != "FCO" for step in self.steps)

    def blocks(self, depth: int = 1) -> list[str]:
        """The blocks (`block_of`) the path runs through, in order, each stay once."""
        names = [block_of(split_pin(self.steps[0].source)[0], depth)]
        for step in self.steps:
            name = block_of(split_pin(step.sink)[0], depth)
            if name != names[-1]:
                names.append(name)
        return names


def worst_path(graph: SdfGraph, arrivals: Arrivals, pin: str) -> TimingPath | None:
    """The worst path into ``pin`` (``cell/PORT``), rebuilt from the back-pointers; None when
    no launch reaches it."""
    node = graph.pin_ids.get(pin)
    if node is None or arrivals.arrival_ps[node] == -math.inf:
        return None
    steps: list[PathStep] = []
    while arrivals.via_arc[node] >= 0:
        arc = arrivals.via_arc[node]
        source = graph.arc_from[arc]
        steps.append(PathStep("net" if graph.arc_is_net[arc] else "logic",
                              graph.pins[source], graph.pins[node], graph.arc_ps[arc] / 1000.0))
        node = source
    launch = arrivals.via_launch[node]
    clock = graph.launch_clock[launch]
    steps.append(PathStep("clock-to-out", graph.pins[clock], graph.pins[node],
                          graph.launch_ps[launch] / 1000.0))
    return TimingPath(pin, arrivals.arrival_ps[graph.pin_ids[pin]] / 1000.0,
                      tuple(reversed(steps)))


@dataclass(frozen=True)
class ArrivalCheck:
    """How many of nextpnr's endpoint arrivals the SDF analysis reproduces."""

    compared: int
    matching: int
    missing: int
    worst: tuple[tuple[str, float, float], ...]  # (pin, ours, nextpnr's), biggest gap first

    @property
    def share(self) -> float:
        return self.matching / self.compared if self.compared else 0.0


def check_against_report(graph: SdfGraph, arrivals: Arrivals, endpoints: Iterable[Endpoint],
                         tolerance_ns: float = MATCH_TOLERANCE_NS) -> ArrivalCheck:
    """Compare each endpoint's computed arrival with nextpnr's (the latest of its listings,
    since the analysis here takes all launches of the clock together). An endpoint the SDF
    does not reach counts as compared and not matching (``missing``)."""
    theirs: dict[str, float] = {}
    for ep in endpoints:
        pin = f"{ep.cell}/{ep.port}"
        theirs[pin] = max(theirs.get(pin, -math.inf), ep.arrival_ns)
    matching = missing = 0
    gaps: list[tuple[float, str, float, float]] = []
    for pin, arrival in theirs.items():
        node = graph.pin_ids.get(pin)
        ours = arrivals.arrival_ps[node] / 1000.0 if node is not None else -math.inf
        if ours == -math.inf:
            missing += 1
        if abs(ours - arrival) <= tolerance_ns:
            matching += 1
        else:
            gaps.append((abs(ours - arrival), pin, ours, arrival))
    gaps.sort(reverse=True)
    return ArrivalCheck(len(theirs), matching, missing,
                        tuple((pin, ours, arrival) for _, pin, ours, arrival in gaps[:5]))


@dataclass
class RunPaths:
    """A kept run's endpoints (`ecp5_timing`) with the worst path behind each arrival."""

    timing: RunTiming
    graph: SdfGraph
    arrivals: Arrivals
    check: ArrivalCheck

    def path_of(self, ep: Endpoint) -> TimingPath | None:
        return worst_path(self.graph, self.arrivals, f"{ep.cell}/{ep.port}")


def analyse_run(run_dir: Path, min_share: float = MIN_MATCHING_SHARE) -> RunPaths:
    """The SDF analysis of a run kept by ``synth --keep-run``, checked against its report.json;
    ConfigError when the SDF is missing or fewer than ``min_share`` of the arrivals match."""
    run = read_run(Path(run_dir))
    sdf_path = Path(run_dir) / "timing.sdf"
    if not sdf_path.exists():
        raise ConfigError(f"{run_dir}: no timing.sdf; keep the run with a tensorforge that "
                          "asks nextpnr for --sdf (synth --flow ecp5 --keep-run DIR)")
    with sdf_path.open() as lines:
        graph = read_sdf_graph(lines)
    arrivals = propagate(graph)
    check = check_against_report(graph, arrivals, run.endpoints)
    if check.share < min_share:
        worst = "; ".join(f"{pin}: {ours:.3f} vs {theirs:.3f} ns"
                          for pin, ours, theirs in check.worst)
        raise ConfigError(
            f"{run_dir}: the SDF analysis reproduces nextpnr's arrival at only "
            f"{check.matching} of {check.compared} endpoints ({check.share:.1%}; "
            f"{check.missing} unreached, {arrivals.looped} pins on combinational loops); "
            f"its paths would be wrong. Worst: {worst}")
    return RunPaths(run, graph, arrivals, check)


@dataclass
class PathGroup:
    """The failing endpoints whose worst path goes from block ``launch`` to block ``capture``."""

    launch: str
    capture: str
    failing: int = 0
    worst_slack_ns: float = math.inf
    total_negative_slack_ns: float = 0.0
    routed_nets: Counter = field(default_factory=Counter)
    through_other: int = 0
    worst: Endpoint | None = None


NO_PATH = "(no path)"


def worst_failing(endpoints: Iterable[Endpoint]) -> list[Endpoint]:
    """The failing endpoints, each once with its worst slack (`ecp5_timing.group_by_block`'s
    rule), worst first."""
    worst: dict[tuple[str, str, str], Endpoint] = {}
    for ep in endpoints:
        key = (ep.cell, ep.port, ep.clock)
        if ep.slack_ns < 0 and (key not in worst or ep.slack_ns < worst[key].slack_ns):
            worst[key] = ep
    return sorted(worst.values(), key=lambda ep: (ep.slack_ns, ep.cell, ep.port))


def group_by_boundary(failing: Iterable[Endpoint], path_of, depth: int = 1) -> list[PathGroup]:
    """Failing endpoints grouped by (`block_of` launch cell, `block_of` endpoint cell), most
    failing first; ``path_of(endpoint)`` gives an endpoint's worst `TimingPath` or None.
    ``through_other`` counts the worst paths that pass through a third block on the way: a
    cell named after neither end (Yosys names logic after a signal it drives, so that is logic
    of another module's signal, or the top module's), unnamed cells (``$nextpnr_CCU2C_7``)
    not counted."""
    groups: dict[tuple[str, str], PathGroup] = {}
    for ep in failing:
        path = path_of(ep)
        launch = block_of(path.launch_cell, depth) if path else NO_PATH
        capture = block_of(ep.cell, depth)
        group = groups.setdefault((launch, capture), PathGroup(launch, capture))
        group.failing += 1
        group.total_negative_slack_ns += ep.slack_ns
        if ep.slack_ns < group.worst_slack_ns:
            group.worst_slack_ns, group.worst = ep.slack_ns, ep
        if path:
            group.routed_nets[path.routed_nets] += 1
            group.through_other += bool(set(path.blocks(depth)) - {launch, capture, UNNAMED})
    return sorted(groups.values(),
                  key=lambda g: (-g.failing, g.worst_slack_ns, g.launch, g.capture))


def _net_columns(columns: Sequence[int]) -> list[str]:
    return [f"<={columns[0]}", *(str(n) for n in columns[1:-1]), f">={columns[-1]}"]


def _net_bins(counts: Counter, columns: Sequence[int]) -> list[int]:
    bins = [0] * len(columns)
    for nets, n in counts.items():
        index = next((i for i, top in enumerate(columns[:-1]) if nets <= top), len(columns) - 1)
        bins[index] += n
    return bins


def format_groups(groups: Sequence[PathGroup], limit: int | None = None,
                  columns: Sequence[int] = ROUTED_NET_COLUMNS, markdown: bool = False) -> str:
    """The (launch -> capture) table: failing endpoints, worst slack, TNS and how many routed
    nets their worst paths have; groups past ``limit`` are summed in one row."""
    shown = list(groups if limit is None else groups[:limit])
    rest = list(groups[len(shown):])
    rows = [[g.launch, g.capture, str(g.failing), f"{g.worst_slack_ns:.2f}",
             f"{g.total_negative_slack_ns:.1f}", *map(str, _net_bins(g.routed_nets, columns)),
             str(g.through_other)] for g in shown]

    def summed(name: str, members: Sequence[PathGroup]) -> list[str]:
        nets = sum((g.routed_nets for g in members), Counter())
        return [name, "", str(sum(g.failing for g in members)),
                f"{min(g.worst_slack_ns for g in members):.2f}",
                f"{sum(g.total_negative_slack_ns for g in members):.1f}",
                *map(str, _net_bins(nets, columns)), str(sum(g.through_other for g in members))]

    if rest:
        rows.append(summed(f"({len(rest)} more groups)", rest))
    if groups:
        rows.append(summed("total", groups))
    header = ["launch", "capture", "failing", "worst ns", "TNS ns",
              *(f"{name} nets" for name in _net_columns(columns)), "via other"]
    return _table(header, rows, markdown, left=2)


def _table(header: list[str], rows: list[list[str]], markdown: bool, left: int) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |",
                 "|" + "|".join(["---"] * left + ["---:"] * (len(header) - left)) + "|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:{'<' if i < left else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*row).rstrip() for row in [header, *rows])


def format_path(path: TimingPath, slack_ns: float | None = None) -> str:
    """A path the way nextpnr's critical path report reads: each arc's delay and the arrival
    after it, the launch first."""
    slack = f"slack {slack_ns:.3f} ns, " if slack_ns is not None else ""
    lines = [f"{path.endpoint}: {slack}arrival {path.arrival_ns:.3f} ns, from "
             f"{path.launch_cell}; {path.routed_nets} routed nets ({path.routing_ns:.3f} ns), "
             f"{path.logic_levels} logic levels; through {' > '.join(path.blocks())}"]
    at = path.arrival_ns - sum(step.delay_ns for step in path.steps)  # the launch clock's
    for step in fold_carry_ripples(path.steps):
        at += step.delay_ns
        if step.kind == "net":
            where = f"net -> {step.sink}"
        elif step.kind == "carry":
            where = f"carry ripple -> {step.sink}"
        else:
            cell, source = split_pin(step.source)
            where = f"{step.kind} {cell} {source} -> {split_pin(step.sink)[1]}"
        lines.append(f"  {step.delay_ns:6.3f} {at:7.3f}  {where}")
    return "\n".join(lines)


def _is_ripple(step: PathStep) -> bool:
    source, sink = split_pin(step.source)[1], split_pin(step.sink)[1]
    if step.kind == "net":
        return step.delay_ns == 0 and sink == "FCI"
    return step.kind == "logic" and source == "FCI" and sink == "FCO"


def fold_carry_ripples(steps: Iterable[PathStep]) -> list[PathStep]:
    """The steps with each carry ripple (``FCI -> FCO`` arcs and the 0 ps ``FCO -> FCI`` nets
    between them) as one ``carry`` step: a 16-bit adder is one line, not 32."""
    folded: list[PathStep] = []
    ripple: list[PathStep] = []
    for step in [*steps, None]:
        if step is not None and _is_ripple(step):
            ripple.append(step)
            continue
        if ripple:
            folded.append(PathStep("carry", ripple[0].source, ripple[-1].sink,
                                   sum(arc.delay_ns for arc in ripple)))
            ripple = []
        if step is not None:
            folded.append(step)
    return folded


def distinct_worst(failing: Sequence[Endpoint], path_of, count: int) -> list[Endpoint]:
    """The ``count`` worst failing endpoints, one per (launch register, captured register),
    so that the bits of one bus do not fill the list."""
    chosen, seen = [], set()
    for ep in failing:
        path = path_of(ep)
        pair = (signal_of(path.launch_cell) if path else NO_PATH, signal_of(ep.cell))
        if pair not in seen:
            seen.add(pair)
            chosen.append(ep)
            if len(chosen) == count:
                break
    return chosen


def main(argv: list[str] | None = None) -> int:
    """``ecp5_failing_paths.py RUN_DIR --paths``: the (launch -> capture) table and the worst
    paths of a kept run; exit status 2 when the SDF analysis does not reproduce nextpnr's
    arrivals (or the run cannot be read), 1 when the slacks miss nextpnr's histogram."""
    parser = argparse.ArgumentParser(
        prog="ecp5_failing_paths --paths",
        description="Where the failing paths of a kept ECP5 run (synth --keep-run DIR) start.")
    parser.add_argument("run_dir", type=Path, help="a directory kept by synth --keep-run")
    parser.add_argument("--paths", action="store_true", help="(this report; the default here)")
    parser.add_argument("--depth", type=int, default=1,
                        help="hierarchy levels of launch and capture blocks (default 1)")
    parser.add_argument("--under", default=None, metavar="PREFIX",
                        help="only endpoints under this module prefix (e.g. compute)")
    parser.add_argument("--groups", type=int, default=20, metavar="N",
                        help="list the N (launch -> capture) groups with most failing "
                             "endpoints, the rest in one row (default 20)")
    parser.add_argument("--worst", type=int, default=5, metavar="N",
                        help="list the worst paths of the N worst failing endpoints, one per "
                             "register pair (default 5)")
    parser.add_argument("--path", default=None, metavar="CELL",
                        help="list the worst path into each endpoint of this cell instead")
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = parser.parse_args(argv)

    try:
        run = analyse_run(args.run_dir)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    check = run.check
    histogram = {True: "yes", False: "NO", None: "no histogram"}[run.timing.histogram_matches]
    print(f"{args.run_dir}: SDF arrivals match nextpnr's report at {check.matching} of "
          f"{check.compared} endpoints (within {MATCH_TOLERANCE_NS} ns); slacks match "
          f"nextpnr's histogram: {histogram}")
    if args.path:
        return _print_cell_paths(run, args.path)
    failing = worst_failing(endpoints_under(run.timing.endpoints, args.under))
    print()
    print(format_groups(group_by_boundary(failing, run.path_of, args.depth), args.groups,
                        markdown=args.markdown))
    if args.worst:
        print()
        print(f"worst paths (one per launch/capture register pair, of {len(failing)} failing):")
        fence = ["```"] if args.markdown else []
        print("\n".join(fence + [format_path(run.path_of(ep), ep.slack_ns)
                                 for ep in distinct_worst(failing, run.path_of, args.worst)
                                 if run.path_of(ep)] + fence))
    return 0 if run.timing.histogram_matches is not False else 1


def _print_cell_paths(run: RunPaths, cell: str) -> int:
    endpoints = {ep.port: ep for ep in sorted(run.timing.endpoints, key=lambda ep: -ep.slack_ns)
                 if ep.cell == cell}
    if not endpoints:
        print(f"error: no timing endpoint in cell {cell!r}; give a cell name as "
              "report.json or this report prints it (e.g. compute.acc_TRELLIS_FF_Q_3)",
              file=sys.stderr)
        return 2
    for port, ep in sorted(endpoints.items()):
        path = run.path_of(ep)
        print(format_path(path, ep.slack_ns) if path else f"{cell}/{port}: no launch reaches it")
    return 0
