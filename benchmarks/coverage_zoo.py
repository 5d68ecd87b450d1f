"""Which zoo layers each intrinsic can run: the measurement behind issue 18 item 3.

For every zoo model and every intrinsic (those of the default design space, or ``--all``),
prints the share of the model's MACs the intrinsic has a tensorize choice for, the share it
runs only through padded choices (part of the array idle), and each layer it cannot run with
the matcher's reason. Before padded choices existed: depthwise layers had none on GEMM or
CONV2D, strided convolutions and matrix products none on CONV2D (MobileNet V2: 93% on GEMM,
89% on CONV2D; BERT, ViT and the MLP 0% on CONV2D).

    .venv/bin/python benchmarks/coverage_zoo.py [--all]
"""

from __future__ import annotations

import argparse

from tensorforge.compiler.zoo import list_models, load_model
from tensorforge.dse.coverage import covered_share, space_coverage
from tensorforge.dse.hwspace import DEFAULT_SPACE
from tensorforge.intrinsics import Intrinsic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--all", action="store_true", help="every intrinsic, not only the "
                        "default space's")
    args = parser.parse_args()
    intrinsics = ([i.value for i in Intrinsic] if args.all
                  else list(DEFAULT_SPACE["intrinsic"]["choices"]))
    print(f"{'model':<14}" + "".join(f"{i + ' (padded)':>22}" for i in intrinsics))
    missing = []
    for model in list_models():
        rows = space_coverage(load_model(model).layers, intrinsics)
        cells = []
        for intrinsic in intrinsics:
            mine = [r for r in rows if r.intrinsic == intrinsic]
            total = sum(r.macs for r in mine) or 1
            padded = sum(r.macs for r in mine if r.padded) / total
            cells.append(f"{covered_share(rows, intrinsic):>13.1%} ({padded:5.1%})")
            missing += [f"{model}:{r.layer} on {intrinsic}: {r.reason}"
                        for r in mine if not r.covered]
        print(f"{model:<14}" + "".join(f"{c:>22}" for c in cells))
    print("\n".join(["", "layers without a choice:", *missing]) if missing
          else "\nevery layer has a tensorize choice on every intrinsic listed")


if __name__ == "__main__":
    main()
