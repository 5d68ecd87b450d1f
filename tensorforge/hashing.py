"""Stable content hashes: the keys of every cache and of the result store."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from typing import Any


def _canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "__type__": type(value).__name__,
            **{f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, enum.Enum):
        return _canonical(value.value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, bytes):
        return hashlib.sha256(value).hexdigest()
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _canonical(value.tolist())
    raise TypeError(f"cannot hash a {type(value).__name__} stably")


def stable_hash(*parts: Any, length: int = 16) -> str:
    """A hex digest of ``parts`` that is the same on every machine and every run.

    Dataclasses, enums, dicts (key order ignored), sequences, bytes, numpy values and plain
    scalars are accepted; anything else is a programming error.
    """
    text = json.dumps([_canonical(p) for p in parts], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def source_digest(*module_names: str, length: int = 12) -> str:
    """A digest of the source files of the named modules (read, not imported): part of the
    identity of results a model written in them computed, so editing the model invalidates
    those results."""
    import importlib.util
    from pathlib import Path

    digest = hashlib.sha256()
    for name in module_names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"no source for module {name!r}")
        digest.update(name.encode() + b"\0" + Path(spec.origin).read_bytes())
    return digest.hexdigest()[:length]


def package_modules(package: str) -> list[str]:
    """The modules of ``package`` (its own, not its subpackages'), sorted: what
    `source_digest` takes for "this package's code"."""
    import importlib
    import pkgutil

    path = importlib.import_module(package).__path__
    return sorted(f"{package}.{module.name}" for module in pkgutil.iter_modules(path))
