"""`tensorforge generate`: an accelerator configuration -> synthesizable Verilog.

Writes into ``--out DIR``: ``accelerator.v`` (top module ``accelerator``), ``config.json`` (the
`AcceleratorConfig`, reloadable with ``--config`` after conversion to TOML or by
`AcceleratorConfig.from_dict`) and ``ports.md`` (the port list, the register map and the
derived buffer geometry). Memories are not zero-filled by ``initial`` blocks
(`tensorforge.verilog_text`) unless ``--zero-init`` asks for it, e.g. for a simulator that
starts memories at X and a bench that reads a line before writing it. ``--target ecp5`` builds
the PE multipliers from ECP5 DSP slices with their own registers (`tensorforge.hw.targets`),
for the ECP5 flow; the default, ``generic``, is plain RTL for simulation and ASIC flows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import time
from pathlib import Path

from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError
from tensorforge.fpga.progress import StageProgress
from tensorforge.hw.targets import Target

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate the accelerator's Verilog from hardware parameters",
        description="Generate synthesizable Verilog (top module 'accelerator'), its "
        "configuration and a port summary.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="output directory (created if missing)",
    )
    parser.add_argument(
        "--zero-init",
        action="store_true",
        help="fill the memories with zeros in initial blocks (default: no initial value)",
    )
    parser.add_argument(
        "--target",
        choices=[target.value for target in Target],
        default=Target.GENERIC.value,
        help="primitives to build from: generic RTL (simulation, ASIC; default) or ecp5 "
        "(MULT18X18D DSPs with their own registers, pipelined control; same results, a few "
        "more cycles; for `synth --flow ecp5`)",
    )
    add_hardware_arguments(parser)
    parser.set_defaults(func=run)


def port_table(component) -> list[tuple[str, str, int]]:
    """``(verilog name, "input"/"output", bits)`` of each port of a top-level component."""
    from amaranth.hdl import Shape
    from amaranth.lib import wiring

    rows = []
    for path, member, _ in component.signature.flatten(component):
        direction = "output" if member.flow == wiring.Out else "input"
        rows.append(("__".join(map(str, path)), direction, Shape.cast(member.shape).width))
    return rows + [("clk", "input", 1), ("rst", "input", 1)]


def port_summary(config: AcceleratorConfig, component) -> str:
    """The ``ports.md`` text: configuration, buffers, ports and registers."""
    from tensorforge.hw import registers

    lines = [
        "# accelerator",
        "",
        f"Configuration: {config.describe()}",
        "",
        "| buffer | lines | line |",
        "|---|---|---|",
        f"| scratchpad | {config.spad_lines} in {config.scratchpad.banks} banks of "
        f"{config.bank_depth} | {config.spad_line_elems} x int{config.precision.in_bits} |",
        f"| accumulator | {config.acc_lines} | {config.acc_line_elems} x "
        f"int{config.precision.acc_bits} |",
        "",
        "## Ports",
        "",
        "| port | direction | bits |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{name}` | {direction} | {bits} |" for name, direction, bits in port_table(component)
    ]
    lines += ["", "## Control registers (AXI4-Lite `s_axil`)", "", registers.markdown()]
    return "\n".join(lines)


def generate(config: AcceleratorConfig, out: Path, *, zero_init: bool = False,
             target: Target | str = Target.GENERIC,
             progress: StageProgress | None = None) -> dict[str, Path]:
    """Write the three files for ``config`` into ``out``; returns their paths by kind.
    ``progress`` reports the stages (the command's goes to stderr; None: silent)."""
    from tensorforge.hw.accelerator import TOP_NAME, Accelerator
    from tensorforge.verilog_text import component_verilog

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot create the output directory {out}: {error.strerror}") from None
    started = time.perf_counter()
    with _stage(progress, "elaborate"):
        top = Accelerator(config, target=target)
    with _stage(progress, "write Verilog"):  # a 32x32 array converts for minutes
        # `tensorforge.api.generate_verilog`'s text (elaborated once here: the ports need it)
        text = component_verilog(top, TOP_NAME, zero_init=zero_init)
    logger.info("converted %s in %.1f s", config.describe(), time.perf_counter() - started)
    paths = {
        "verilog": out / f"{TOP_NAME}.v",
        "config": out / "config.json",
        "ports": out / "ports.md",
    }
    paths["verilog"].write_text(text)
    paths["config"].write_text(config.to_json() + "\n")
    paths["ports"].write_text(port_summary(config, top))
    return paths


def _stage(progress: StageProgress | None, name: str) -> contextlib.AbstractContextManager:
    return progress.stage(name) if progress is not None else contextlib.nullcontext()


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    paths = generate(config, args.out, zero_init=args.zero_init, target=args.target,
                     progress=StageProgress("generate"))
    print(f"{config.describe()}")
    for kind, path in paths.items():
        print(f"  {kind:8s} {path}")
    return 0


def load_config_json(path: Path) -> AcceleratorConfig:
    """Read back a ``config.json`` written by `generate`."""
    return AcceleratorConfig.from_dict(json.loads(Path(path).read_text()))
