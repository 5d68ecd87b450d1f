"""Units as types, so a byte count is never mistaken for KiB or a line count."""

from __future__ import annotations

import re

_SUFFIXES = {"": 1, "b": 1, "kib": 1024, "k": 1024, "mib": 1024**2, "m": 1024**2}


class Bytes(int):
    """A size in bytes. ``Bytes.parse("64KiB") == Bytes(65536)``; prints as ``64 KiB``."""

    @classmethod
    def kib(cls, value: float) -> Bytes:
        return cls(round(value * 1024))

    @classmethod
    def parse(cls, text: str | int) -> Bytes:
        if isinstance(text, int):
            return cls(text)
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
        if not match or match.group(2).lower() not in _SUFFIXES:
            raise ValueError(f"not a size: {text!r} (write e.g. 65536, 64KiB or 1MiB)")
        return cls(round(float(match.group(1)) * _SUFFIXES[match.group(2).lower()]))

    @property
    def in_kib(self) -> float:
        return self / 1024

    def __str__(self) -> str:
        for unit, scale in (("MiB", 1024**2), ("KiB", 1024)):
            if self >= scale and self % scale == 0:
                return f"{self // scale} {unit}"
        return f"{int(self)} B"

    def __repr__(self) -> str:
        return f"Bytes({int(self)})"
