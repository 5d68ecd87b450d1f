"""Run a compiled `Program` on a board SoC over its host link.

What the cocotb driver (`tensorforge.sim.accelerator_driver`) does in simulation, done over
UART: check that the board holds the accelerator the program was compiled for, write the
program's DRAM image (`Program.pack_inputs`) into the on-chip memory, write ``insn_addr`` and
``insn_count``, write 1 to ``control``, poll ``status`` until done, read the counters and the
output region, and unpack the output (`Program.unpack_output`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.program import Program
from tensorforge.host_link import HostLink, LinkError
from tensorforge.hw.board.host_protocol import (
    INFO_MAGIC,
    INFO_WORDS,
    MEMORY_BASE,
    PROTOCOL_VERSION,
    REGISTERS_BASE,
    WORD_BYTES,
    config_digest,
    info_address,
)
from tensorforge.hw.registers import COUNTERS, Status, register

DEFAULT_RUN_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.001


@dataclass(frozen=True)
class BoardRun:
    """The outcome of one program on the board."""

    output: np.ndarray
    counters: dict[str, int]
    status: int
    seconds: float  # wall time from start to done, polling included


def board_info(link: HostLink) -> dict[str, int]:
    """The SoC's information words (`INFO_WORDS`), checked to be a tensorforge SoC."""
    words = dict(zip(INFO_WORDS, link.read_words(info_address(INFO_WORDS[0]), len(INFO_WORDS)),
                     strict=True))
    if words["magic"] != INFO_MAGIC:
        raise LinkError(f"the board answered, but not as a tensorforge SoC (magic "
                        f"{words['magic']:#010x}, expected {INFO_MAGIC:#010x})")
    if words["version"] != PROTOCOL_VERSION:
        raise LinkError(f"the board speaks host protocol {words['version']}, this runtime "
                        f"{PROTOCOL_VERSION}: rebuild the bitstream with this tensorforge")
    return words


def check_board(info: Mapping[str, int], program: Program) -> None:
    """Refuse a board whose accelerator or memory does not fit ``program``."""
    expected = config_digest(program.config)
    if info["config_digest"] != expected:
        raise LinkError(
            f"the board holds a different accelerator (digest {info['config_digest']:08x}, the "
            f"program was compiled for {program.config.describe()}, digest {expected:08x}); "
            f"pass the hardware flags the bitstream was built with, or rebuild it")
    if program.dram_bytes > info["memory_bytes"]:
        raise LinkError(
            f"the program's memory image is {program.dram_bytes} bytes, the board has "
            f"{info['memory_bytes']}; rebuild with a larger --memory-kib or shrink the workload")


def _register(name: str) -> int:
    return REGISTERS_BASE + register(name).offset


def run_on_board(link: HostLink, program: Program, inputs: Mapping[str, np.ndarray], *,
                 timeout_s: float = DEFAULT_RUN_TIMEOUT_S) -> BoardRun:
    """Run ``program`` on ``inputs`` on the board behind ``link`` (see the module docstring).

    Raises `LinkError` when the board is not the one the program needs, the accelerator
    reports an error, or it is not done within ``timeout_s``.
    """
    check_board(board_info(link), program)
    image = program.pack_inputs(inputs)
    link.write_bytes(MEMORY_BASE, image)
    link.write_word(_register("insn_addr"), program.instruction_base)
    link.write_word(_register("insn_count"), len(program.instructions))
    link.write_word(_register("control"), 1)
    started = time.monotonic()
    while True:
        status = link.read_word(_register("status"))
        if status & Status.DONE or status & Status.ERROR:
            break
        if time.monotonic() - started > timeout_s:
            raise LinkError(f"the accelerator was not done after {timeout_s:g} s "
                            f"(status {status:#x})")
        time.sleep(POLL_INTERVAL_S)
    seconds = time.monotonic() - started
    if status & Status.ERROR:
        raise LinkError(f"the accelerator stopped with an error (status {status:#x}): a token "
                        f"counter overflowed or memory answered an error")
    first = register(COUNTERS[0]).offset
    values = link.read_words(REGISTERS_BASE + first, len(COUNTERS))
    counters = {name: values[(register(name).offset - first) // WORD_BYTES]
                for name in COUNTERS}
    after = bytearray(image)
    region = program.output
    after[region.base : region.end] = link.read_bytes(MEMORY_BASE + region.base,
                                                      region.end - region.base)
    return BoardRun(output=program.unpack_output(after), counters=counters, status=status,
                    seconds=seconds)
