"""`tensorforge validate`: the sweep's cost model against the RTL on programs it never saw.

Runs the fidelity programs (`tensorforge.dse.fidelity_cases`: the calibration set the model's
terms were measured on, and the disjoint held-out set) on the Verilator models of their
accelerators, asks the cost model for the same programs under the same DRAM timing, and
prints the agreement: mean and max |error|, Spearman and Kendall rank correlation, per set.
RTL results are kept in the result store by content hash, so a second run only re-evaluates
the model; ``--jobs`` runs configurations in parallel. ``--write`` regenerates
docs/fidelity.md and its scatter plot, and (for the whole set) the summary that sweep reports
quote (``dse/data/fidelity_summary.json``); ``--check`` exits 1 when the held-out set misses the
targets (mean <= 5%, max <= 10%, Spearman >= 0.98). ``--restamp`` only records that edited
model or compiler code still gives every program the summary's figures and the same RTL run
(no simulator run; refused when a figure, a program or the RTL changed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SETS = ("all", "held-out", "calibration", "ci")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check the cost model's cycles against RTL simulation (held-out programs)",
        description="Run the fidelity programs on RTL and through the cost model; report "
        "their agreement.",
    )
    parser.add_argument("--set", choices=SETS, default="all", dest="which",
                        help="which programs: all (default), held-out, calibration, or the "
                        "12-program CI sample")
    parser.add_argument("--only", default=None, metavar="TEXT",
                        help="only the programs whose name contains TEXT")
    parser.add_argument("--jobs", type=int, default=2,
                        help="configurations simulated in parallel (default 2)")
    parser.add_argument("--write", action="store_true",
                        help="regenerate docs/fidelity.md and docs/fidelity.png")
    parser.add_argument("--out", type=Path, default=None,
                        help="write fidelity.md and its plot into this folder instead")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the held-out programs miss the targets")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--restamp", action="store_true",
                        help="the model's or compiler's code changed but not its figures: "
                        "check every program's model cycles and RTL run against the shipped "
                        "summary (no RTL run) and, if all are the same, record the new code")
    parser.set_defaults(func=run)


def _cases(which: str, only: str | None):
    from tensorforge.dse.fidelity_cases import calibration_cases, ci_sample, held_out_cases
    from tensorforge.errors import ConfigError

    cases = {
        "all": [*calibration_cases(), *held_out_cases()],
        "held-out": list(held_out_cases()),
        "calibration": calibration_cases(),
        "ci": list(ci_sample()),
    }[which]
    if only:
        cases = [c for c in cases if only in c.name]
        if not cases:
            raise ConfigError(f"no fidelity program's name contains {only!r}; "
                              "`tensorforge validate --json` lists them")
    return cases


def _print(summaries: dict, outcomes) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="cost model against RTL cycles")
    for column in ("set", "programs", "mean |error|", "max |error|", "mean error", "Spearman",
                   "Kendall"):
        table.add_column(column, justify="left" if column == "set" else "right")
    for name, a in summaries.items():
        table.add_row(name, str(a.count), f"{a.mean_abs_error:.1%}", f"{a.max_abs_error:.1%}",
                      f"{a.bias:+.1%}", f"{a.spearman:.3f}", f"{a.kendall:.3f}")
    console = Console()
    console.print(table)
    worst = sorted(outcomes, key=lambda o: -abs(o.error))[:10]
    detail = Table(title="largest errors")
    for column in ("program", "RTL", "model", "error"):
        detail.add_column(column, justify="left" if column == "program" else "right")
    for o in worst:
        detail.add_row(o.case.name, f"{o.rtl.cycles:,}", f"{o.model_cycles:,.0f}",
                       f"{o.error:+.1%}")
    console.print(detail)


def run(args: argparse.Namespace) -> int:
    from tensorforge.dse import fidelity_report
    from tensorforge.dse.fidelity import Agreement, validate
    from tensorforge.dse.fidelity_cases import HELD_OUT
    from tensorforge.errors import ConfigError
    from tensorforge.paths import repo_root, rtl_commit

    if args.restamp:
        return _restamp()
    cases = _cases(args.which, args.only)
    progress = None if args.json else (lambda line: print(line, file=sys.stderr))
    outcomes = validate(cases, jobs=max(1, args.jobs), progress=progress)
    summaries = {}
    for split in sorted({o.case.split for o in outcomes}):
        summaries[split] = Agreement.of([o for o in outcomes if o.case.split == split])
    mismatched = [o.case.name for o in outcomes if not o.rtl.match]
    directory = args.out
    if args.write and directory is None:
        root = repo_root()
        if root is None:
            raise ConfigError("--write regenerates docs/ of a source checkout; this tensorforge "
                              "is installed, not a checkout: use --out DIR")
        directory = root / "docs"
    if directory is not None:
        path = fidelity_report.write(outcomes, directory, commit=rtl_commit())
        print(f"wrote {path}", file=sys.stderr)
    if args.write and args.which == "all" and not args.only:
        path = fidelity_report.write_summary(outcomes, commit=rtl_commit())
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "summary": {name: vars(a) for name, a in summaries.items()},
            "programs": [{"name": o.case.name, "set": o.case.split, "rtl_cycles": o.rtl.cycles,
                          "model_cycles": o.model_cycles, "error": o.error,
                          "match": o.rtl.match} for o in outcomes],
        }, indent=2))
    else:
        _print(summaries, outcomes)
    if mismatched:
        print(f"error: the RTL result differs from numpy on {', '.join(mismatched)}",
              file=sys.stderr)
        return 1
    held = summaries.get(HELD_OUT)
    if args.check and held is not None and not held.meets_targets():
        print(f"error: the held-out programs miss the targets (mean {held.mean_abs_error:.1%}, "
              f"max {held.max_abs_error:.1%}, Spearman {held.spearman:.3f})", file=sys.stderr)
        return 1
    return 0


def _restamp() -> int:
    from tensorforge.dse.fidelity import load_summary, restamped_summary
    from tensorforge.dse.fidelity_report import summary_path
    from tensorforge.errors import ConfigError

    measured = load_summary()
    if measured is None:
        raise ConfigError("there is no fidelity summary to restamp; run validate --write")
    restamped = restamped_summary(measured, _cases("all", None))
    path = summary_path()
    path.write_text(json.dumps(restamped, indent=1, sort_keys=True) + "\n")
    print("every program's model cycles and RTL run equal the summary's; "
          f"wrote {path}", file=sys.stderr)
    return 0

