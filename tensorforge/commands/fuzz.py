"""`tensorforge fuzz`: random programs through compiler, functional simulator, RTL and numpy.

Draws ``--programs`` random (configuration, workload, mapping, memory timing) cases with
``--seed`` (`tensorforge.sim.fuzz_cases`), runs each through every stage and compares
(`tensorforge.sim.fuzz`), and prints the cases by kind and the failures. Each failing case is
written as a JSON case file; ``--replay FILE`` reruns one. ``--out DIR`` keeps the summary
(``summary.json``, ``fuzz.md``) and the case files there, rewritten after every batch so an
interrupted campaign leaves its summary so far; ``--write`` regenerates docs/fuzz.md.
Exits 1 when any case fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fuzz",
        help="differential fuzzing: random programs on compiler, simulator, RTL and numpy",
        description="Draw random programs and check that the functional simulator, the RTL "
        "and numpy agree on each.",
    )
    parser.add_argument("--programs", type=_positive, default=30, metavar="N",
                        help="how many random programs (default 30)")
    parser.add_argument("--seed", type=_seed, default=0, metavar="S",
                        help="campaign seed; case i is the same for every N (default 0)")
    parser.add_argument("--jobs", type=_positive, default=1, metavar="J",
                        help="simulator processes in parallel (default 1)")
    parser.add_argument("--pool", choices=("default", "all", "space", "repeat"), default="default",
                        help="configurations to draw from: the default 12, all 24 of the "
                        "RTL regression and matrix, 8 small accelerators drawn from the "
                        "default design space by the seed (each one more Verilator build), "
                        "or the default 12 built with controller.repeat")
    parser.add_argument("--replay", type=Path, default=None, metavar="FILE",
                        help="rerun the case in FILE (a case file a failing run wrote)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="write summary.json, fuzz.md and failing case files here")
    parser.add_argument("--write", action="store_true",
                        help="regenerate docs/fuzz.md of this checkout")
    parser.add_argument("--notes", type=Path, default=None, metavar="FILE",
                        help="markdown appended to fuzz.md as 'Found and fixed'")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value


def _seed(text: str) -> int:
    """A campaign seed: numpy's generators take only non-negative integers."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, not {text!r}")
    return value


def _print(data: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    for axis in ("intrinsic", "workload kind", "mapping"):
        table = Table(title=f"programs by {axis}")
        table.add_column(axis)
        table.add_column("programs", justify="right")
        for name, count in data["by"][axis].items():
            table.add_row(name, str(count))
        console.print(table)
    verdicts = ", ".join(f"{v} {n}" for v, n in data["verdicts"].items())
    console.print(f"{data['programs']} programs (seed {data['seed']}): {verdicts}")
    for failure in data["failures"]:
        console.print(f"[red]{failure['verdict']}[/red] {failure['what']}: {failure['detail']}"
                      f"\n  case file: {failure['file']}")


def _case_directory(args: argparse.Namespace) -> Path:
    from tensorforge.paths import cache_subdir

    if args.out is not None:
        return args.out / "cases"
    return cache_subdir("fuzz-failures") / f"seed{args.seed}"


def _docs_path() -> Path:
    from tensorforge.errors import ConfigError
    from tensorforge.paths import repo_root

    root = repo_root()
    if root is None:
        raise ConfigError("--write regenerates docs/ of a source checkout; this tensorforge is "
                          "installed, not a checkout: use --out DIR")
    return root / "docs" / "fuzz.md"


def run(args: argparse.Namespace) -> int:
    from tensorforge.sim import fuzz_report
    from tensorforge.sim.fuzz import read_case_file, run_cases, write_case_file
    from tensorforge.sim.fuzz_cases import draw_cases, pool_configs

    if args.replay is not None:
        cases = [read_case_file(args.replay)]
        command = f"tensorforge fuzz --replay {args.replay}"
    else:
        cases = draw_cases(args.programs, args.seed, pool_configs(args.pool, args.seed))
        command = (f"tensorforge fuzz --programs {args.programs} --seed {args.seed}"
                   + ("" if args.pool == "default" else f" --pool {args.pool}"))
    notes = args.notes.read_text() if args.notes is not None else ""
    directory = _case_directory(args)
    outcomes, case_files = [], {}

    def keep(batch) -> None:
        outcomes.extend(batch)
        for outcome in batch:
            if not outcome.passed and args.replay is None:
                case_files[outcome.case.index] = str(write_case_file(outcome, directory))
        print(f"{len(outcomes)}/{len(cases)} programs, "
              f"{sum(not o.passed for o in outcomes)} failed", file=sys.stderr)
        if args.out is not None:
            _write(args.out, fuzz_report.summary(outcomes, seed=args.seed,
                                                 requested=len(cases), case_files=case_files),
                   command, notes)

    run_cases(cases, jobs=args.jobs, progress=keep)
    data = fuzz_report.summary(outcomes, seed=args.seed, requested=len(cases),
                               case_files=case_files)
    if args.write:
        path = fuzz_report.write_markdown(data, _docs_path(), command=command, notes=notes)
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _print(data)
    return 0 if data["passed"] == data["programs"] else 1


def _write(directory: Path, data: dict, command: str, notes: str) -> None:
    from tensorforge.sim import fuzz_report

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
    fuzz_report.write_markdown(data, directory / "fuzz.md", command=command, notes=notes)
