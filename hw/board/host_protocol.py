"""The host link of the board SoC: its address map and the framed UART protocol.

One definition for both sides: the bridge (`tensorforge.hw.board.host_bridge`) decodes frames with
these constants, the host runtime (`tensorforge.host_link`) builds them with `write_frame` /
`read_frame`.

Address map (32-bit byte addresses, as the host sees them):

==============  ============  ====================================================
base            size          what
==============  ============  ====================================================
``0x00000000``  memory bytes  on-chip memory: the accelerator's "DRAM" (same addresses)
``0x80000000``  256 B         the accelerator's control registers (`hw.registers`)
``0x90000000``  256 B         SoC information words (`INFO_WORDS`), read-only
==============  ============  ====================================================

Frames, 8N1 bytes, multi-byte fields little-endian. The host sends an opcode, a 4-byte word
address and a count byte ``n`` (``n + 1`` words, 1..256); a write frame carries its words after
the count. The bridge answers a write with one status byte once every word is written, a read
with the words followed by one status byte. The address advances by 4 per word. The status
byte is ``STATUS_BASE | r``, ``r`` the worst AXI response of the frame's words (0 OKAY, 2
SLVERR: past the end of memory, 3 DECERR: no such address). A frame left incomplete for
``frame_timeout`` cycles is abandoned, so a host that died mid-frame cannot desynchronise the
next one.
"""

from __future__ import annotations

import enum
import struct

from tensorforge.config import AcceleratorConfig
from tensorforge.hashing import stable_hash

WORD_BYTES = 4
MAX_WORDS_PER_FRAME = 256
HEADER_BYTES = 6  # opcode, address (4), count

MEMORY_BASE = 0x0000_0000
REGISTERS_BASE = 0x8000_0000
INFO_BASE = 0x9000_0000
WINDOW_BITS = 8  # the register and information windows are 256 bytes each

STATUS_BASE = 0xA0
STATUS_MASK = 0xFC
INFO_MAGIC = 0x54465343  # "TFSC"
PROTOCOL_VERSION = 1


class Opcode(enum.IntEnum):
    WRITE = 0x57  # "W"
    READ = 0x52  # "R"


class Response(enum.IntEnum):
    """The AXI response codes a status byte carries."""

    OKAY = 0
    SLVERR = 2
    DECERR = 3


INFO_WORDS = ("magic", "version", "memory_bytes", "config_digest", "clock_hz", "baud")


def info_address(name: str) -> int:
    """The host address of the information word ``name`` (see `INFO_WORDS`)."""
    return INFO_BASE + WORD_BYTES * INFO_WORDS.index(name)


def config_digest(config: AcceleratorConfig) -> int:
    """32 bits that identify ``config``: the SoC reports them (``config_digest``) so the
    runtime can tell that the board holds the accelerator it compiled for."""
    return int(stable_hash(config.to_json(), length=8), 16)


def _header(opcode: Opcode, address: int, words: int) -> bytes:
    if address % WORD_BYTES:
        raise ValueError(f"address {address:#x} is not word aligned")
    if not 1 <= words <= MAX_WORDS_PER_FRAME:
        raise ValueError(f"a frame carries 1..{MAX_WORDS_PER_FRAME} words, not {words}")
    return struct.pack("<BIB", opcode, address, words - 1)


def write_frame(address: int, words: list[int]) -> bytes:
    """The bytes that write ``words`` (32-bit each) from ``address`` on."""
    return _header(Opcode.WRITE, address, len(words)) + struct.pack(f"<{len(words)}I", *words)


def read_frame(address: int, words: int) -> bytes:
    """The bytes that read ``words`` words from ``address`` on."""
    return _header(Opcode.READ, address, words)


def status_response(status: int) -> Response:
    """The response a status byte carries; ValueError when the byte is not a status byte (the
    link lost its framing)."""
    if status & STATUS_MASK != STATUS_BASE:
        raise ValueError(f"{status:#04x} is not a status byte (expected {STATUS_BASE:#04x}|r)")
    return Response(status & 3)

