"""The memory-system flags (`tensorforge.memory.MemorySystem`), shared by the commands that
need to know the DRAM: ``--memory NAME`` picks a preset, the ``--dram-*`` flags override
single fields of it. A bad value ends in a `ConfigError` the CLI prints without a traceback.
"""

from __future__ import annotations

import argparse

from tensorforge.errors import ConfigError
from tensorforge.memory import DEFAULT_MEMORY, PRESETS, MemorySystem, memory_from_options


def add_memory_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--memory``, ``--dram-latency``, ``--dram-bandwidth`` and ``--dram-outstanding``
    (destinations ``memory, dram_latency, dram_bandwidth, dram_outstanding``)."""
    default = DEFAULT_MEMORY.describe()
    group = parser.add_argument_group("memory system (DRAM timing, in accelerator cycles)")
    group.add_argument("--memory", default=None, metavar="NAME",
                       help=f"DRAM preset: {', '.join(PRESETS)} (default {default})")
    group.add_argument("--dram-latency", default=None, metavar="CYCLES",
                       help="override: cycles from a burst's address to its first data beat")
    group.add_argument("--dram-bandwidth", default=None, metavar="BYTES",
                       help="override: bytes per cycle each way, or 'bus' for one bus beat "
                       "per cycle")
    group.add_argument("--dram-outstanding", default=None, metavar="BURSTS",
                       help="override: bursts in flight per direction, or 'unlimited'")


def _number(text: str | None, flag: str, kind: type, keyword: str | None = None
            ) -> int | float | str | None:
    """A flag's value: ``None`` when absent, ``keyword`` itself, or a number of ``kind``."""
    if text is None:
        return None
    text = str(text).strip()
    if keyword is not None and text.lower() == keyword:
        return keyword
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        also = f" or '{keyword}'" if keyword else ""
        raise ConfigError(f"{flag} must be {what}{also}, not {text!r}") from None


def memory_from_args(args: argparse.Namespace) -> MemorySystem:
    """The memory the flags describe: the preset (default `DEFAULT_MEMORY`) plus overrides."""
    return memory_from_options(
        args.memory,
        latency=_number(args.dram_latency, "--dram-latency", int),
        bandwidth=_number(args.dram_bandwidth, "--dram-bandwidth", float, "bus"),
        outstanding=_number(args.dram_outstanding, "--dram-outstanding", int, "unlimited"),
    )
