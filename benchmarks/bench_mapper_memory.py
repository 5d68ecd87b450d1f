"""What the default mapper gains by reading the memory system.

For each workload, DRAM latency and DMA burst limit, maps the workload twice with
`compiler.mappers.default_mapping`: blind (ranked on the ideal memory, as if the DRAM had no
latency) and aware (ranked on the memory the program runs on), and prices both programs on
that memory with the instruction-level timeline (`dse.fidelity.model_cycles`, the model
docs/fidelity.md checks against RTL). Prints a markdown table; ``--write`` puts it into
docs/mapper_memory.md (between its markers) with the commit it ran on.

    nice .venv/bin/python benchmarks/bench_mapper_memory.py [--write]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import time
from pathlib import Path

from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.fidelity import model_cycles
from tensorforge.memory import MemorySystem

DOC = Path(__file__).resolve().parent.parent / "docs" / "mapper_memory.md"
BEGIN, END = "<!-- bench-mapper-memory:begin -->", "<!-- bench-mapper-memory:end -->"
WORKLOADS = {
    "GEMM 64^3": ("C[i,j] += A[i,k] * B[k,j]", "i=64,j=64,k=64"),
    "GEMM 128^3": ("C[i,j] += A[i,k] * B[k,j]", "i=128,j=128,k=128"),
    "GEMM 32x256x64": ("C[i,j] += A[i,k] * B[k,j]", "i=32,j=256,k=64"),
    "conv 3x3 32ch 14x14": ("C[k,x,y] += A[c,x+r-1,y+s-1] * B[k,c,r,s]",
                            "k=32,c=32,x=14,y=14,r=3,s=3"),
}
LATENCIES = (0, 64, 128)  # DRAM cycles
OUTSTANDING = (16, 4, 1)  # the DMA's bursts in flight (dma.outstanding)


def design(outstanding: int) -> AcceleratorConfig:
    """What `tensorforge simulate --pe 8x8 --banks 8 --outstanding N` builds."""
    return AcceleratorConfig.from_dict({
        "intrinsic": "gemm",
        "array": {"rows": 8, "cols": 8, "interconnect": "systolic", "dataflow": "ws"},
        "scratchpad": {"capacity": "64KiB", "banks": 8, "accumulator": "16KiB"},
        "dma": {"bus_bits": 64, "max_burst": 16, "outstanding": outstanding},
    })


def _tiles(mapping) -> str:
    return "x".join(str(size) for _, size in mapping.tiles) + (" im2col" if mapping.groups
                                                               else "")


def table() -> tuple[list[str], list[float]]:
    """Markdown rows and the aware/blind cycle ratio of every point."""
    ideal = MemorySystem.preset("ideal")
    rows = ["| DMA bursts in flight | workload | latency | blind tiles | blind cycles | "
            "aware tiles | aware cycles | change |", "|---|---|---|---|---|---|---|---|"]
    ratios = []
    for outstanding in OUTSTANDING:
        config = design(outstanding)
        for name, (text, sizes) in WORKLOADS.items():
            workload = parse_workload(text, sizes)
            blind = default_mapping(workload, config, ideal)
            for latency in LATENCIES:
                memory = ideal.with_overrides(latency=latency)
                aware = default_mapping(workload, config, memory)
                before = model_cycles(workload, blind, config, memory)
                after = (before if aware == blind
                         else model_cycles(workload, aware, config, memory))
                ratios.append(after / before)
                same = aware == blind
                rows.append(f"| {outstanding} | {name} | {latency} | {_tiles(blind)} | "
                            f"{before:,.0f} | {'same' if same else _tiles(aware)} | "
                            f"{after:,.0f} | {after / before - 1:+.1%} |")
                print(rows[-1], flush=True)
    return rows, ratios


def _commit() -> str:
    root = DOC.parent.parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "compiler", "dse", "hw"],
                           cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    return f"{head} (with uncommitted changes)" if dirty else head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {DOC.name}")
    args = parser.parse_args()
    started = time.perf_counter()
    rows, ratios = table()
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    summary = (f"{sum(r < 0.999 for r in ratios)} of {len(ratios)} points faster, "
               f"{sum(r > 1.001 for r in ratios)} slower; geometric mean "
               f"{geomean - 1:+.1%}")
    print(summary)
    if args.write:
        section = "\n".join([
            f"Written by `benchmarks/bench_mapper_memory.py --write` on commit `{_commit()}` "
            f"({time.perf_counter() - started:.0f} s). Design: `{design(16).describe()}`, "
            "the DMA's burst limit varied. Tiles: per device index, in the mapping's order of "
            "indices.",
            "",
            *rows,
            "",
            summary + ".",
        ])
        text = DOC.read_text()
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{section}\n{END}{rest.split(END, 1)[1]}")
        print(f"wrote {DOC}")

if __name__ == "__main__":
    main()
