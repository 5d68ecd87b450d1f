"""Regenerate the area/power model from synthesis:
``python benchmarks/calibrate_cost_model.py --tech ihp-sg13g2``.

Synthesizes `tensorforge.dse.calibrate.calibration_set(tech)` and `accelerator_set(tech)`
through the ASIC flow of ``--tech`` (and ECP5 where asked), writes the raw records and the fit
to ``dse/data/`` (``calibration_records-<tech>.json``, ``area_power_fit-<tech>.json``) and the
report to ``docs/cost_model.md`` (default technology) or ``docs/cost_model-<tech>.md``.
Results are cached by the flows, so a rerun is fast; ``--refit`` refits from the stored
records without synthesis; ``--missing`` synthesizes only the designs of the sets that the
stored records lack (new calibration designs, or a cache made on another machine) and refits.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cost_model_report import report, rtl_section

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.area_power import AreaPowerFit, clock_period_ns, fit_file
from tensorforge.dse.calibrate import (
    accelerator_set,
    acceptance_set,
    calibration_set,
    clock_rule,
    fit,
    run_calibration,
    synthesize,
)
from tensorforge.fpga.technology import DEFAULT_TECH, TECHNOLOGIES
from tensorforge.paths import rtl_commit
from tensorforge.sim.rtl_identity import reference_rtl
from tensorforge.sim.rtl_run import hardware_digest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "dse" / "data"


def records_file(tech: str) -> Path:
    return DATA / f"calibration_records-{tech}.json"


def report_file(tech: str) -> Path:
    return ROOT / "docs" / ("cost_model.md" if tech == DEFAULT_TECH else f"cost_model-{tech}.md")


def design_key(component: str, config: dict) -> str:
    """What identifies a design among the records: its component and configuration."""
    return component + json.dumps(config, sort_keys=True)


def complete_records(tech: str, ecp5: str, progress) -> list[dict]:
    """The stored records of the sets' designs, in the sets' order, with the missing designs
    synthesized now. The stored records must describe today's RTL (the shipped fit is not
    stale): the fit made on them is stamped with today's sources."""
    stored_fit = AreaPowerFit.from_dict(json.loads((DATA / fit_file(tech)).read_text()))
    if stored_fit.stale_reasons():
        raise SystemExit(f"--missing: {stored_fit.stale_reasons()[0]}; synthesize every "
                         "design again (no --missing)")
    commit, digest = rtl_commit(), hardware_digest()
    stored = {design_key(r["component"], r["config"]): r
              for r in json.loads(records_file(tech).read_text())}
    records = []
    for designs, with_ecp5 in ((calibration_set(tech), ecp5 != "none"),
                               (accelerator_set(tech), ecp5 == "all")):
        for design in designs:
            record = stored.get(design_key(design.component, design.config.to_dict()))
            if record is None:
                record = {**run_calibration([design], tech=tech, ecp5=with_ecp5,
                                            progress=progress)[0],
                          "rtl_commit": commit, "hardware_digest": digest}
            records.append(record)
    return records + [r for r in stored.values() if r["component"] == "acceptance"]


def acceptance_records(fitted, progress) -> list[dict]:
    """Designs outside the calibration set, synthesized at the clock the fit predicts for
    them, rounded to 0.01 ns as a report prints it."""
    records = []
    for design in acceptance_set():
        clock_ns = round(clock_period_ns(fitted, design.config), 2)
        progress(f"synthesizing {design.name} at the model's {clock_ns} ns")
        records.append(synthesize(design, tech=fitted.tech, ecp5=False, clock_ns=clock_ns))
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tech", choices=tuple(TECHNOLOGIES), default=DEFAULT_TECH,
                        help=f"the ASIC technology to calibrate on (default {DEFAULT_TECH})")
    parser.add_argument("--ecp5", choices=("none", "blocks", "all"), default="none",
                        help="which designs also go through the ECP5 flow (whole accelerators "
                        "take tens of minutes each there; default: none)")
    parser.add_argument("--refit", action="store_true",
                        help="refit and rewrite the report from the stored records only")
    parser.add_argument("--missing", action="store_true",
                        help="synthesize only the designs the stored records lack, then refit")
    args = parser.parse_args()
    progress = lambda text: print(text, flush=True)  # noqa: E731
    if args.refit:
        records = json.loads(records_file(args.tech).read_text())
        commits = sorted({r.get("rtl_commit", "unknown") for r in records})
        commit, digest = ", ".join(commits), records[0].get("hardware_digest", "")
        shipped = json.loads((DATA / fit_file(args.tech)).read_text())
        references = (shipped.get("reference_rtl", [])
                      if shipped.get("hardware_digest") == digest else [])
    elif args.missing:
        records = complete_records(args.tech, args.ecp5, progress)
        commit = ", ".join(sorted({r.get("rtl_commit", "unknown") for r in records}))
        digest = hardware_digest()
        references = reference_rtl(AcceleratorConfig.from_dict(r["config"]) for r in records
                                   if r["component"] == "accelerator")
    else:
        commit, digest = rtl_commit(), hardware_digest()
        records = run_calibration(calibration_set(args.tech), tech=args.tech,
                                  ecp5=args.ecp5 != "none", progress=progress)
        records += run_calibration(accelerator_set(args.tech), tech=args.tech,
                                   ecp5=args.ecp5 == "all", progress=progress)
        records = [{**record, "rtl_commit": commit, "hardware_digest": digest}
                   for record in records]
        references = reference_rtl(AcceleratorConfig.from_dict(r["config"]) for r in records
                                   if r["component"] == "accelerator")
    fitted = fit(records, args.tech, rtl_commit=commit, hardware_digest=digest,
                 clock_rule=clock_rule(args.tech), reference_rtl=references)
    if not args.refit and fitted.exact_memories:
        records = [r for r in records if r["component"] != "acceptance"]
        records += [{**record, "rtl_commit": commit, "hardware_digest": digest}
                    for record in acceptance_records(fitted, progress)]
    DATA.mkdir(parents=True, exist_ok=True)
    records_file(args.tech).write_text(json.dumps(records, indent=1) + "\n")
    (DATA / fit_file(args.tech)).write_text(json.dumps(fitted.to_dict(), indent=1) + "\n")
    target = report_file(args.tech)
    target.write_text(report(records, fitted, rtl_section(target)))
    print(f"wrote {DATA / fit_file(args.tech)}, {target}")


if __name__ == "__main__":
    main()
