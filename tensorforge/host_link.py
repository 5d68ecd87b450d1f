"""The host's end of the board's UART link: word reads and writes at SoC addresses.

Frames are `tensorforge.hw.board.host_protocol`'s. Each frame waits for its answer before the next
goes out: the bridge has a few bytes of receive buffer, not a frame's worth, while it sends a
read's words. The link is any pyserial port (``serial_for_url`` opens ``/dev/ttyUSB0``, a pty,
or ``socket://host:port``).
"""

from __future__ import annotations

import logging
import struct
import time

from tensorforge.errors import TensorforgeError
from tensorforge.hw.board.host_protocol import (
    MAX_WORDS_PER_FRAME,
    WORD_BYTES,
    Response,
    read_frame,
    status_response,
    write_frame,
)

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0


class LinkError(TensorforgeError, RuntimeError):
    """The board did not answer, answered garbage, or refused an access."""


class HostLink:
    """Word access to a board SoC over ``port`` (an open pyserial-like object with ``read``,
    ``write`` and ``reset_input_buffer``)."""

    def __init__(self, port, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.port = port
        self.timeout_s = timeout_s

    @classmethod
    def open(cls, url: str, baud: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> HostLink:
        """Open ``url`` (a device path or a pyserial URL) at ``baud``, 8N1."""
        import serial

        try:
            port = serial.serial_for_url(url, baudrate=baud, timeout=timeout_s)
        except (serial.SerialException, ValueError) as error:
            raise LinkError(f"cannot open the board's port {url!r}: {error}; check the cable "
                            f"and the device name (ls /dev/ttyUSB*)") from None
        return cls(port, timeout_s)

    def close(self) -> None:
        self.port.close()

    def __enter__(self) -> HostLink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_exactly(self, count: int, what: str) -> bytes:
        deadline = time.monotonic() + self.timeout_s
        data = bytearray()
        while len(data) < count:
            chunk = self.port.read(count - len(data))
            data += chunk
            if not chunk and time.monotonic() > deadline:
                raise LinkError(f"the board sent {len(data)} of the {count} bytes of {what} "
                                f"within {self.timeout_s:g} s; is the bitstream loaded and the "
                                f"baud rate the one it was built for?")
        return bytes(data)

    def _check(self, status: int, what: str) -> None:
        try:
            response = status_response(status)
        except ValueError as error:
            raise LinkError(f"{what}: {error}; the link lost its framing") from None
        if response is not Response.OKAY:
            raise LinkError(f"{what} answered {response.name} (SLVERR: past the end of memory, "
                            f"DECERR: no such address)")

    def write_words(self, address: int, words: list[int]) -> None:
        for start in range(0, len(words), MAX_WORDS_PER_FRAME):
            chunk = words[start : start + MAX_WORDS_PER_FRAME]
            at = address + start * WORD_BYTES
            self.port.write(write_frame(at, chunk))
            self._check(self._read_exactly(1, "a write's status")[0],
                        f"writing {len(chunk)} words at {at:#010x}")

    def read_words(self, address: int, count: int) -> list[int]:
        words: list[int] = []
        for start in range(0, count, MAX_WORDS_PER_FRAME):
            size = min(MAX_WORDS_PER_FRAME, count - start)
            at = address + start * WORD_BYTES
            self.port.write(read_frame(at, size))
            answer = self._read_exactly(size * WORD_BYTES + 1, "a read's answer")
            self._check(answer[-1], f"reading {size} words at {at:#010x}")
            words += struct.unpack(f"<{size}I", answer[:-1])
        return words

    def write_word(self, address: int, value: int) -> None:
        self.write_words(address, [value])

    def read_word(self, address: int) -> int:
        return self.read_words(address, 1)[0]

    def write_bytes(self, address: int, data: bytes) -> None:
        """Write ``data`` from ``address`` (both word aligned; the tail is zero-padded)."""
        padded = bytes(data) + bytes(-len(data) % WORD_BYTES)
        self.write_words(address, list(struct.unpack(f"<{len(padded) // 4}I", padded)))

    def read_bytes(self, address: int, length: int) -> bytes:
        """``length`` bytes from ``address`` (word aligned)."""
        words = self.read_words(address, -(-length // WORD_BYTES))
        return struct.pack(f"<{len(words)}I", *words)[:length]
