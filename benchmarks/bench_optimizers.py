"""Final hypervolume and wall time of each search method on each synthetic problem.

    .venv/bin/python benchmarks/bench_optimizers.py [--budget 40] [--batch 5] [--seeds 5]

Every method gets the same number of evaluations (40 by default: HASCO's trial budget, the
one the co-design sweep runs with); hypervolume is reported as a fraction of the problem's
optimum (found by enumerating its whole space), mean +- std over seeds, next to the mean over
the same seeds of random search. Time per trial is the method's own cost (the synthetic
problems evaluate in microseconds), so it is what each trial adds to a real sweep: wall
time, and CPU time, which is what to compare on a shared machine.
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
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", nargs="*", default=sorted(OPTIMIZERS))
    parser.add_argument("--problems", nargs="*", default=list(BENCHMARKS))
    args = parser.parse_args()
    torch.set_num_threads(1)

    table = Table(title=f"hypervolume / optimum after {args.budget} evaluations")
    columns = ("problem", "method", "HV fraction (mean +- std)", "/ random", "ms / trial", "CPU ms")
    for column in columns:
        table.add_column(column)
    runs = len(args.problems) * len(set(args.methods) | {"random"}) * args.seeds
    with Progress(transient=True) as progress:
        task = progress.add_task("searching", total=runs)
        for problem_name in args.problems:
            benchmark = BENCHMARKS[problem_name]()
            optimum = benchmark.optimal_hypervolume
            random_mean = None
            for method in ["random", *(m for m in args.methods if m != "random")]:
                fractions, seconds, cpu_seconds = [], [], []
                for seed in range(args.seeds):
                    progress.update(task, description=f"{problem_name} {method} seed {seed}")
                    start, cpu_start = time.perf_counter(), time.process_time()
                    optimizer = make_optimizer(method, benchmark.problem, seed=seed)
                    run(optimizer, benchmark, args.budget, args.batch)
                    seconds.append(time.perf_counter() - start)
                    cpu_seconds.append(time.process_time() - cpu_start)
                    fractions.append(optimizer.history.hypervolume / optimum)
                    progress.advance(task)
                random_mean = np.mean(fractions) if method == "random" else random_mean
                if method not in args.methods:
                    continue
                table.add_row(
                    problem_name,
                    method,
                    f"{np.mean(fractions):.3f} +- {np.std(fractions):.3f}",
                    f"{np.mean(fractions) / random_mean:.2f}x",
                    f"{1e3 * np.sum(seconds) / (args.budget * args.seeds):.1f}",
                    f"{1e3 * np.sum(cpu_seconds) / (args.budget * args.seeds):.1f}",
                )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
