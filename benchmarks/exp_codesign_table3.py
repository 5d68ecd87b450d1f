"""HASCO Table III style: co-design under an edge (2 W) and a cloud (20 W) power budget against
a fixed baseline accelerator running library software.

``python benchmarks/exp_codesign_table3.py [--trials 12] [--layers 3] [--budget 200]``
writes ``docs/experiments/codesign_table3.md`` (and a JSON next to it).

Per scenario and CNN (a subset of distinct layers, `exp_common.heaviest_layers`):

* **baseline**: the paper's classic GEMMCore (edge: 8x8 = 64 PEs, 128 KiB (the paper's
  256 KiB exceeds what the ISA addresses with 8-byte lines), 4 banks; cloud:
  64x64 = 4096 PEs, 1 MiB, 4 banks; every other primitive at its `AcceleratorConfig` default)
  running the im2col library (`compiler.mappers.library_mapping`) under the cost model;
* **separated**: the same baseline hardware with HASCO's software search per layer (our
  stand-in for the paper's AutoTVM-tuned baseline: software optimized, hardware fixed);
* **co-design GEMM / CONV2D**: MOBO over the hardware space with the intrinsic fixed, every
  trial's layers mapped by HASCO's software search, under the power bound; the lowest-latency
  feasible design.

Latency is whole-subset time (cycles x repeat counts at the hardware model's clock).
"""

from __future__ import annotations

import argparse
import json
import re
import time

import torch
from exp_common import MODELS, OUT, heaviest_layers, lowest_latency, table

from tensorforge.config import AcceleratorConfig
from tensorforge.dse.codesign import SweepSpec, make_hardware_model, run_sweep
from tensorforge.dse.evaluate import LayerMetrics, aggregate
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.scenarios import scenario
from tensorforge.dse.sw_evaluator import SoftwareSearchEvaluator
from tensorforge.dse.sw_search import library
from tensorforge.dse.sweep_store import SweepStore

#: The paper's baselines, except the edge scratchpad: an 8-wide array has 8-byte scratchpad
#: lines, and the ISA addresses 16384 lines, so 128 KiB is the most it can have (not 256 KiB).
#: The accumulator is the co-design space's (32 KiB; the library cannot tile the cloud
#: array's im2col GEMMs into the smaller default one).
BASELINES = {
    "edge": {
        "array": {"rows": 8, "cols": 8},
        "scratchpad": {"capacity": 128 << 10, "banks": 4, "accumulator": 32 << 10},
    },
    "cloud": {
        "array": {"rows": 64, "cols": 64},
        "scratchpad": {"capacity": 1 << 20, "banks": 4, "accumulator": 32 << 10},
    },
}
#: The co-design space per scenario (the rest is `hwspace.DEFAULT_SPACE`): the cloud one
#: reaches the baseline's 4096 PEs and 1 MiB and beyond.
SPACES = {
    "edge": {},
    "cloud": {
        "rows": {"low": 16, "high": 64, "power_of_two": True},
        "cols": {"low": 16, "high": 64, "power_of_two": True},
        "spad_kib": {"low": 256, "high": 2048, "power_of_two": True},
    },
}


def fixed_design(layers, config: AcceleratorConfig, hardware_model, software) -> dict:
    """Whole-subset metrics of ``config`` with ``software(layer) -> (cycles, energy_pj)``."""
    measured = []
    for layer in layers:
        cycles, energy = software(layer)
        measured.append((LayerMetrics(int(cycles), float(energy)), layer.count))
    return aggregate(measured, hardware_model(config)).to_dict()


def run_case(name: str, model: str, args: argparse.Namespace, store: SweepStore) -> dict:
    label, layers, share = heaviest_layers(model, args.layers)
    bounds = scenario(name)
    hardware_model = make_hardware_model(args.hardware_model)
    evaluator = SoftwareSearchEvaluator(budget=args.budget)
    baseline = AcceleratorConfig.from_dict(BASELINES[name])

    def library_software(layer):
        found = library(layer.workload, baseline)
        return found.cycles, found.energy_pj

    def searched_software(layer):
        found = evaluator(layer.workload, baseline, 0)
        return found.cycles, found.energy_pj

    case = {
        "scenario": name,
        "model": label,
        "layers": [la.name for la in layers],
        "mac_share": share,
        "baseline_config": baseline.describe(),
        "library": fixed_design(layers, baseline, hardware_model, library_software),
        "separated": fixed_design(layers, baseline, hardware_model, searched_software),
        "codesign": {},
    }
    for intrinsic in ("gemm", "conv2d"):
        spec = SweepSpec(
            workload_name=f"{label} ({len(layers)} layers)",
            layers=layers,
            space=HardwareSpace({**SPACES[name], "intrinsic": intrinsic}),
            scenario=bounds,
            method="mobo",
            trials=args.trials,
            seed=0,
            batch_size=3,
            method_options={"initial_points": 6, "candidates": 256, "fit_iterations": 50},
            evaluator=evaluator,
            hardware_model=hardware_model,
        )
        started = time.monotonic()
        result = run_sweep(spec, store=store, workers=args.workers)
        feasible, best = lowest_latency(result)
        case["codesign"][intrinsic] = (
            None
            if best is None
            else {
                **best.metrics,
                "config": AcceleratorConfig.from_dict(best.config).describe(),
                "feasible": feasible,
                "seconds": time.monotonic() - started,
            }
        )
        print(
            f"{name} {label} {intrinsic}: {feasible} feasible, {time.monotonic() - started:.0f} s",
            flush=True,
        )
    return case


def report(cases: list[dict], args: argparse.Namespace, seconds: float) -> str:
    lines = [
        "# Co-design under edge and cloud power budgets (HASCO Table III)",
        "",
        f"Generated by `python benchmarks/exp_codesign_table3.py --trials {args.trials} "
        f"--layers {args.layers} --budget {args.budget} --hardware-model "
        f"{args.hardware_model}` in {seconds / 60:.1f} min on 2 shared cores.",
        "",
        "Latencies are the analytical cost model's cycles (`dse/cost_model.py`) at the",
        f"`{args.hardware_model}` hardware model's clock, summed over the evaluated layers times",
        "their repeat counts; power is that model's too. Co-design: MOBO (6 initial points,",
        f"{args.trials} trials asked 3 at a time, one seed), HASCO's software search with",
        f"{args.budget} cost-model evaluations per layer and trial.",
        "",
    ]
    rows = []
    for case in cases:
        lib, sep = case["library"], case["separated"]
        row = [
            case["scenario"],
            case["model"],
            f"{case['mac_share']:.0%}",
            case["baseline_config"],
            f"{lib['latency_ms']:.4g} ({lib['power_w']:.2g} W)",
            f"{sep['latency_ms']:.4g}",
        ]
        for intrinsic in ("gemm", "conv2d"):
            best = case["codesign"][intrinsic]
            row.append(
                "none feasible"
                if best is None
                else f"{best['latency_ms']:.4g} ({best['power_w']:.2g} W): {best['config']}"
            )
        rows.append(row)
    lines += table(
        [
            "scenario",
            "CNN",
            "MACs evaluated",
            "baseline hardware",
            "library ms (power)",
            "separated ms",
            "co-design GEMM ms (power): design",
            "co-design CONV2D ms (power): design",
        ],
        rows,
    )
    lines += ["", "## Latency reductions", ""]
    rows, vs_library, vs_separated = [], [], []
    for case in cases:
        lib, sep = case["library"]["latency_ms"], case["separated"]["latency_ms"]
        found = [b for b in case["codesign"].values() if b]
        best = min((b["latency_ms"] for b in found), default=None)
        gemm = case["codesign"]["gemm"]
        cells = [case["scenario"], case["model"], f"{lib / sep:.2f}x"]
        if gemm:
            cells += [f"{sep / gemm['latency_ms']:.2f}x", f"{lib / gemm['latency_ms']:.2f}x"]
        else:
            cells += ["n/a", "n/a"]
        cells.append("n/a" if best is None else f"{lib / best:.2f}x")
        if best is not None:
            vs_library.append(lib / best)
            vs_separated.append(sep / best)
        rows.append(cells)
    lines += table(
        [
            "scenario",
            "CNN",
            "software only (library -> search)",
            "co-design GEMM vs separated",
            "co-design GEMM vs library",
            "best co-design vs library",
        ],
        rows,
    )
    if vs_library:
        lines += [
            "",
            f"Average best co-design vs library: **{sum(vs_library) / len(vs_library):.2f}x** "
            "(HASCO: 2.14x); vs the separated design (fixed hardware, searched software): "
            f"**{sum(vs_separated) / len(vs_separated):.2f}x** (HASCO vs AutoTVM: 1.25x-1.44x).",
        ]
    lines += ["", *SHORTFALLS, *_headroom(cases)]
    return "\n".join(lines) + "\n"


def _pes(description: str) -> int:
    """PE count of an `AcceleratorConfig.describe()` text ("gemm 8x8 systolic ws, ...")."""
    rows, cols = re.search(r"(\d+)x(\d+)", description).groups()
    return int(rows) * int(cols)


def _headroom(cases: list[dict]) -> list[str]:
    """How much of its power budget each baseline uses under our model: the main reason the
    edge gains exceed the paper's."""
    used = {
        f"{c['scenario']} {c['model']}": c["library"]["power_w"] / scenario(c["scenario"]).power_w
        for c in cases
    }
    shown = ", ".join(f"{name} {share:.0%}" for name, share in used.items())
    ratios = sorted(_pes(design["config"]) / _pes(c["baseline_config"])
                    for c in cases if c["scenario"] == "edge"
                    for design in c["codesign"].values() if "config" in design)
    ends = sorted({ratios[0], ratios[-1]}) if ratios else []  # one figure when they agree
    grown = "-".join(f"{r:g}" for r in ends) + "x" if ends else "more than"
    return [
        "- **Power headroom.** Under the first-order 45 nm model the baselines use part of",
        f"  their budget ({shown}). In HASCO's model the next square GEMMCore (16x16 = 256",
        "  PEs) already broke the 2 W edge budget, so its co-design kept 64 PEs (ConvCore",
        f"  121-144); ours fits {grown} the baseline's PEs into the edge budget, which is most",
        "  of the edge gain over the separated design (far above the paper's",
        "  1.25x-1.44x). In the cloud the space stops at 64x64 (the baseline's 4096 PEs), so",
        "  the gains there come from the memory, interconnect and dataflow primitives, and a",
        "  12-trial search can end below the baseline (a ratio under 1x).",
    ]


SHORTFALLS = [
    "## Against the paper, and why",
    "",
    "- *Separated* is our stand-in for HASCO's AutoTVM baseline: the same fixed hardware with",
    "  our own software search (AutoTVM is not part of this stack), so the co-design gain over",
    "  it is the hardware search's share alone (HASCO attributes 29.5 % of its gain to it).",
    "- The library's im2col/col2im is charged as host DRAM traffic at full bus rate: a lower",
    "  bound on what HASCO measured on its FPGA SoC, so the library baseline is faster here and",
    "  the gaps to it smaller (docs/experiments/sw_search_resnet50.md has the speedup of",
    "  software alone on ResNet-50, against HASCO's 3.17x).",
    "- Latencies are the analytical cost model's (checked against RTL cycles in",
    "  docs/cost_model.md) at the first-order model's clock (45 nm); power is that model's",
    "  estimate, not Vivado's.",
    "  The co-designed accelerators may run at a different clock than the baseline (a broadcast",
    "  or crossbar array pays wire delay in that model), which is part of the comparison.",
    "- A subset of each CNN's layers (the heaviest that both intrinsics run), one seed, few",
    "  trials and a reduced software-search budget, for the machine's budget: the co-design",
    "  numbers are what this short search found, a lower bound on what it can find.",
    "- The edge baseline has 128 KiB, not 256 KiB: an 8-wide array cannot address more with",
    "  our ISA's 14-bit line field.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--layers", type=int, default=3, help="distinct layers per model")
    parser.add_argument("--budget", type=int, default=200, help="software search budget")
    parser.add_argument("--hardware-model", default="first-order")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the report from the stored JSON"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = OUT / "codesign_table3.json"
    if args.report_only:
        kept = json.loads(results.read_text())
        cases, seconds = kept["cases"], kept["seconds"]
    else:
        store = SweepStore()
        started = time.monotonic()
        cases = [run_case(s, m, args, store) for s in ("edge", "cloud") for m in args.models]
        seconds = time.monotonic() - started
        OUT.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps({"cases": cases, "seconds": seconds}, indent=1) + "\n")
    (OUT / "codesign_table3.md").write_text(report(cases, args, seconds))
    print(f"wrote {OUT / 'codesign_table3.md'}")


if __name__ == "__main__":
    main()
