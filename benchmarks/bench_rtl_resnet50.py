"""Every distinct ResNet-50 layer on the generated 16x16 RTL: the flagship run (issue 13, item 5).

Runs each distinct layer of ResNet-50 at batch 1 (`compiler/zoo/resnet50.toml`) on the Verilator
model of a 16x16 int8 weight-stationary systolic GEMM accelerator, under its default mapping
and the default memory preset (`DEFAULT_MEMORY`), checks every output against numpy, and
writes docs/rtl_resnet50.md: per layer the RTL cycles, the cost model's cycles for the same
program (`dse.fidelity.model_cycles`), PE utilization and the simulation's wall time; the
network total (each layer times its count); the mean utilization over the distinct conv
layers (issue 13, item 4: >= 75%).

Results go to out/rtl_resnet50.jsonl as each layer finishes, so a run that is stopped resumes
with the layers it has not done; the document is rewritten after every layer, marked partial
until all are in. ``--max-ideal-cycles N`` halves a layer's output rows and columns (x, y)
until its ideal cycles fit N, where the whole layer would take too long to simulate; the
document names each layer so reduced.

    nice -n 10 .venv/bin/python benchmarks/bench_rtl_resnet50.py [--max-ideal-cycles N]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.workload import Workload, parse_workload
from tensorforge.compiler.zoo import load_model
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.fidelity import model_cycles
from tensorforge.memory import DEFAULT_MEMORY
from tensorforge.sim.rtl_run import RtlCase, RunOptions, run_programs_on_rtl, simulation_model

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "out" / "rtl_resnet50.jsonl"
DOC = ROOT / "docs" / "rtl_resnet50.md"
# the 16x16 design of docs/experiments/sw_search_resnet50.md: 256 KiB of operand scratchpad
# (16 B lines: the ISA's 16384-line limit), 64 KiB of accumulator, 128-bit bus
CONFIG = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 16, "cols": 16, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": 256 * 1024, "banks": 4, "accumulator": 64 * 1024},
    "dma": {"bus_bits": 128, "max_burst": 16},
})
PES = CONFIG.array.rows * CONFIG.array.cols


def reduced(workload: Workload, max_ideal_cycles: int | None) -> Workload:
    """``workload`` with its x and y halved (rounded up) until its MACs / PEs fit the limit."""
    sizes = dict(workload.sizes)
    while max_ideal_cycles and workload.macs / PES > max_ideal_cycles and sizes.get("x", 1) > 1:
        sizes["x"], sizes["y"] = -(-sizes["x"] // 2), -(-sizes["y"] // 2)
        text = ",".join(f"{n}={v}" for n, v in sizes.items())
        workload = parse_workload(workload.text, text, name=workload.name)
    return workload


def _done() -> dict[str, dict]:
    if not RESULTS.exists():
        return {}
    rows = [json.loads(line) for line in RESULTS.read_text().splitlines() if line.strip()]
    return {row["layer"]: row for row in rows}


def run_layer(layer, workload: Workload, seed: int) -> dict:
    mapping = default_mapping(workload, CONFIG, DEFAULT_MEMORY)
    started = time.perf_counter()
    result = run_programs_on_rtl(CONFIG, [RtlCase(workload, mapping, seed=seed)],
                                 RunOptions(memory=DEFAULT_MEMORY, seed=seed))[0]
    wall = time.perf_counter() - started
    return {"layer": layer.name, "count": layer.count, "sizes": dict(workload.sizes),
            "full_sizes": dict(layer.workload.sizes), "conv": "r" in workload.sizes,
            "tiles": dict(mapping.tiles), "groups": [list(g) for g in mapping.groups],
            "match": bool(result.match), "cycles": result.cycles,
            "ideal": result.ideal_cycles,
            "model": model_cycles(workload, mapping, CONFIG, DEFAULT_MEMORY),
            "sim_seconds": result.sim_seconds, "wall_seconds": wall,
            "instructions": result.instructions}


def write_doc(rows: list[dict], layers: int, elapsed: float, build: float) -> None:
    done = len(rows)
    convs = [r for r in rows if r["conv"]]
    cycles = sum(r["count"] * r["cycles"] for r in rows)
    model = sum(r["count"] * r["model"] for r in rows)
    ideal = sum(r["count"] * r["ideal"] for r in rows)
    simulated = sum(r["sim_seconds"] for r in rows)
    wall = sum(r["wall_seconds"] for r in rows)
    status = ("all distinct layers" if done == layers else
              f"**partial: {done} of {layers} distinct layers**; the totals cover those only")
    lines = [
        "# ResNet-50 on the generated 16x16 RTL",
        "",
        "Written by `benchmarks/bench_rtl_resnet50.py` (issue 13, item 5). Every distinct layer "
        "of ResNet-50 at batch 1 (`compiler/zoo/resnet50.toml`) on the Verilator model of "
        f"`{CONFIG.describe()}`, default mapping, default memory "
        f"(`{DEFAULT_MEMORY.describe()}`), each output compared with numpy. Model cycles: "
        "`dse.fidelity.model_cycles` of the same program and memory (`evaluate_mapping`'s "
        f"instruction timeline). Status: {status}.",
        "",
        "| layer | count | sizes simulated | tiles | match | RTL cycles | model cycles | "
        "model error | utilization | sim s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        size = ",".join(f"{n}={v}" for n, v in r["sizes"].items())
        if r["sizes"] != r["full_sizes"]:
            size += " (reduced)"
        lines.append(
            f"| {r['layer']} | {r['count']} | {size} | "
            f"{','.join(f'{n}={v}' for n, v in r['tiles'].items())} | "
            f"{'yes' if r['match'] else 'NO'} | {r['cycles']:,} | {r['model']:,.0f} | "
            f"{r['model'] / r['cycles'] - 1:+.1%} | {r['ideal'] / r['cycles']:.1%} | "
            f"{r['sim_seconds']:.0f} | {r['wall_seconds']:.0f} |")
    mean = sum(r["ideal"] / r["cycles"] for r in convs) / len(convs) if convs else 0.0
    speed = sum(r["cycles"] for r in rows) / max(simulated, 1e-9)
    shrunk = [r["layer"] for r in rows if r["sizes"] != r["full_sizes"]]
    lines += [
        "",
        f"Network (each layer times its count): {cycles:,} RTL cycles, {model:,.0f} model "
        f"cycles ({model / cycles - 1:+.1%}), utilization {ideal / cycles:.1%}. "
        f"Mean utilization over the {len(convs)} distinct conv layers: {mean:.1%} "
        "(target >= 75%).",
        "",
        f"Time: {elapsed:.0f} s in all on the shared 2-core machine, of which the Verilator "
        f"model's build {build:.0f} s; of the layers' {wall:.0f} s of wall time, {simulated:.0f} s "
        f"are the simulation from start to done ({speed:,.0f} cycles/s); the rest is "
        "compiling, writing the DRAM image into the simulator, reading the output back and the "
        "numpy reference.",
        "",
        (f"Reduced to fit the simulation time (x and y halved until the layer's ideal cycles "
         f"fit the limit; its cycles count in the totals as simulated): {', '.join(shrunk)}."
         if shrunk else "No layer reduced: every one ran at full size."),
    ]
    DOC.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-ideal-cycles", type=int, default=None,
                        help="halve x and y of layers whose ideal cycles exceed this")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    simulation_model(CONFIG)
    build = time.perf_counter() - started
    model = load_model("resnet50")
    done = _done()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    for layer in model.layers:
        if layer.name not in done:
            workload = reduced(layer.workload, args.max_ideal_cycles)
            row = run_layer(layer, workload, args.seed)
            with RESULTS.open("a") as out:
                out.write(json.dumps(row) + "\n")
            done[layer.name] = row
            print(f"{layer.name}: {row['cycles']:,} cycles, model {row['model']:,.0f}, "
                  f"{row['ideal'] / row['cycles']:.1%}, match {row['match']}, "
                  f"{row['wall_seconds']:.0f} s", flush=True)
        rows = [done[layer.name] for layer in model.layers if layer.name in done]
        write_doc(rows, len(model.layers), time.perf_counter() - started, build)


if __name__ == "__main__":
    main()
