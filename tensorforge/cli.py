"""The `tensorforge` command line.

Each subcommand lives in its own module under `tensorforge.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a function taking the parsed
arguments and returning an exit code. Adding a command is one line in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from tensorforge.errors import TensorforgeError

# Subcommand modules, in the order `--help` lists them.
COMMANDS = (
    "generate",
    "choices",
    "compile",
    "simulate",
    "synth",
    "build",
    "run",
    "validate",
    "fuzz",
    "explore",
    "demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tensorforge",
        description="Hardware/software co-design for tensor accelerators.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"tensorforge.commands.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"tensorforge.commands.{name}":
                raise
            continue  # command not built yet
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except TensorforgeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
