"""Final hypervolume and wall time of each search method on each synthetic problem.

    .venv/bin/python benchmarks/bench_optimizers.py [--budget 50] [--batch 5] [--seeds 3]

Every method gets the same number of evaluations; hypervolume is reported as a fraction of the
problem's optimum (found by enumerating its whole space), mean +- std over seeds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from tensorforge.dse.optimizers import OPTIMIZERS, Optimizer, make_optimizer
from tensorforge.dse.synthetic import BENCHMARKS, Benchmark


def run(optimizer: Optimizer, benchmark: Benchmark, budget: int, batch: int) -> Optimizer:
    """The co-design driver's loop in miniature: ask, evaluate, tell, until the budget is spent."""
    while len(optimizer.history) < budget:
        points = optimizer.ask(min(batch, budget - len(optimizer.history)))
        if not points:
            break
        objectives, constraint_values = benchmark.evaluate(points)
        optimizer.tell(points, objectives, constraint_values)
    return optimizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--methods", nargs="*", default=sorted(OPTIMIZERS))
    parser.add_argument("--problems", nargs="*", default=list(BENCHMARKS))
    args = parser.parse_args()
    torch.set_num_threads(1)

    table = Table(title=f"hypervolume / optimum after {args.budget} evaluations")
    for column in ("problem", "method", "HV fraction (mean +- std)", "wall s / run"):
        table.add_column(column)
    runs = len(args.problems) * len(args.methods) * args.seeds
    with Progress(transient=True) as progress:
        task = progress.add_task("searching", total=runs)
        for problem_name in args.problems:
            benchmark = BENCHMARKS[problem_name]()
            optimum = benchmark.optimal_hypervolume
            for method in args.methods:
                fractions, seconds = [], []
                for seed in range(args.seeds):
                    progress.update(task, description=f"{problem_name} {method} seed {seed}")
                    start = time.perf_counter()
                    optimizer = make_optimizer(method, benchmark.problem, seed=seed)
                    run(optimizer, benchmark, args.budget, args.batch)
                    seconds.append(time.perf_counter() - start)
                    fractions.append(optimizer.history.hypervolume / optimum)
                    progress.advance(task)
                table.add_row(
                    problem_name,
                    method,
                    f"{np.mean(fractions):.3f} +- {np.std(fractions):.3f}",
                    f"{np.mean(seconds):.2f}",
                )
    Console().print(table)


if __name__ == "__main__":
    main()
