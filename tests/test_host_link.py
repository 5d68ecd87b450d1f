"""`HostLink` against a Python model of the board's bridge: frames, splitting, and errors."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tensorforge.host_link import HostLink, LinkError
from tensorforge.hw.board.host_protocol import (
    HEADER_BYTES,
    MAX_WORDS_PER_FRAME,
    STATUS_BASE,
    Opcode,
    Response,
)


class BridgeModel:
    """A serial port whose far end decodes frames as `HostBridge` does, over a bytearray.

    ``status`` replaces the status byte (a garbled link); ``silent`` answers nothing.
    """

    def __init__(self, size: int, status: int | None = None, silent: bool = False) -> None:
        self.memory = bytearray(size)
        self.status = status
        self.silent = silent
        self.frames: list[tuple[int, int, int]] = []
        self.answer = bytearray()

    def write(self, data: bytes) -> None:
        opcode, address, count = struct.unpack("<BIB", data[:HEADER_BYTES])
        words = count + 1
        self.frames.append((opcode, address, words))
        response = Response.OKAY if address + 4 * words <= len(self.memory) else Response.SLVERR
        inside = slice(address, min(address + 4 * words, len(self.memory)))
        if opcode == Opcode.WRITE:
            self.memory[inside] = data[HEADER_BYTES:][: inside.stop - inside.start]
        else:
            read = bytes(self.memory[inside])
            self.answer += read + bytes(4 * words - len(read))
        if not self.silent:
            self.answer.append(STATUS_BASE | response if self.status is None else self.status)

    def read(self, count: int) -> bytes:
        taken, self.answer = bytes(self.answer[:count]), self.answer[count:]
        return taken


def test_words_and_bytes_round_trip_in_frames_of_at_most_256_words(random_seed):
    rng = np.random.default_rng(random_seed)
    port = BridgeModel(8192)
    link = HostLink(port)
    data = rng.integers(0, 256, 1500, dtype=np.uint8).tobytes()  # 375 words: two frames
    link.write_bytes(64, data)
    assert bytes(port.memory[64 : 64 + 1500]) == data
    assert [words for _, _, words in port.frames] == [MAX_WORDS_PER_FRAME, 375 - 256]
    assert port.frames[1][1] == 64 + 4 * MAX_WORDS_PER_FRAME
    assert link.read_bytes(64, 1500) == data
    link.write_word(4, 0xDEADBEEF)
    assert link.read_word(4) == 0xDEADBEEF


def test_a_refused_access_a_garbled_status_and_silence_are_link_errors():
    with pytest.raises(LinkError, match="SLVERR"):
        HostLink(BridgeModel(64)).write_words(60, [1, 2])
    with pytest.raises(LinkError, match="lost its framing"):
        HostLink(BridgeModel(64, status=0x41)).read_word(0)
    with pytest.raises(LinkError, match="within 0.01 s"):
        HostLink(BridgeModel(64, silent=True), timeout_s=0.01).write_word(0, 1)


def test_a_port_that_does_not_exist_is_a_clear_error():
    with pytest.raises(LinkError, match="/dev/tensorforge-no-such-port"):
        HostLink.open("/dev/tensorforge-no-such-port", 115200)
