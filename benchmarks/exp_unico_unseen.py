"""UNICO's unseen-workload test (section 4.3): R against the generalization gap.

``python benchmarks/exp_unico_unseen.py [--trials 16] [--batch 4] [--seeds 0 1]``
writes ``docs/experiments/unico_unseen.md``.

UNICO co-designs GEMM accelerators for the training networks (MLP and DQN of the
constrained-BO paper's zoo, layers merged), under the area budget; each feasible Pareto
design is then mapped, by the same HASCO software search, onto the held-out network
(ResNet-18 as Shi et al. use it), and its generalization gap (`dse.generalization`) is put
next to its robustness R. The paper expects robust designs (small R) to have small gaps: a
positive rank correlation.
"""

from __future__ import annotations

import argparse
import math
import time

from exp_common import OUT, table

from tensorforge.commands.explore import resolve_workload
from tensorforge.dse.codesign import SweepSpec, merge_layers, run_sweep
from tensorforge.dse.generalization import unseen_workload_test
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.dse.scenarios import Scenario
from tensorforge.dse.sweep_store import SweepStore

TRAIN = ("mlp", "dqn")
HELD_OUT = ("resnet18_bo",)
AREA_MM2 = 4.0


def layers_of(models: tuple[str, ...]):
    return merge_layers([layer for model in models for layer in resolve_workload(model)[1]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    held_out = layers_of(HELD_OUT)
    lines = [
        "# UNICO: robustness R against the generalization gap",
        "",
        f"`python benchmarks/exp_unico_unseen.py --trials {args.trials} --batch {args.batch} "
        f"--seeds {' '.join(map(str, args.seeds))}`",
        "",
        f"UNICO co-designs GEMM accelerators for {' + '.join(TRAIN)} (area <= {AREA_MM2} mm², "
        f"{args.trials} trials in batches of {args.batch}); each feasible Pareto design is then "
        f"searched on the held-out {' + '.join(HELD_OUT)}. Gap: held-out latency over the "
        "set's best, divided by the same ratio on the training networks (> 1: relatively worse "
        "on the unseen network). The paper expects a positive rank correlation of R and gap.",
        "With about ten designs per seed, a single rho below about 0.65 is not significant at "
        "5 % (two-sided); read the sign across seeds, not one value.",
        "",
    ]
    for seed in args.seeds:
        spec = SweepSpec(
            workload_name="+".join(TRAIN), layers=layers_of(TRAIN),
            space=HardwareSpace({"intrinsic": "gemm"}), scenario=Scenario(area_mm2=AREA_MM2),
            method="unico", trials=args.trials, seed=seed, batch_size=args.batch,
        )
        started = time.monotonic()
        result = run_sweep(spec, store=SweepStore(), workers=args.workers)
        rows, rho = unseen_workload_test(result, held_out)
        seconds = time.monotonic() - started
        lines += [f"## seed {seed}", "",
                  f"{len(rows)} Pareto designs; Spearman rho(R, gap) = "
                  f"{'n/a' if math.isnan(rho) else f'{rho:.2f}'}; {seconds:.0f} s", ""]
        lines += table(
            ("trial", "R", "train latency ms", "held-out latency ms", "gap"),
            [(r.trial, f"{r.robustness:.3f}", f"{r.train_latency_ms:.4g}",
              f"{r.held_out_latency_ms:.4g}", f"{r.gap:.3f}") for r in rows],
        )
        lines.append("")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "unico_unseen.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
