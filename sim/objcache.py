"""A compiler wrapper that reuses Verilator's runtime objects across models (ccache in miniature).

Every Verilator model compiles the same runtime (``verilated.cpp``, ``verilated_vpi.cpp``, ...)
before its own few files, and that runtime is ~80% of a model's build time. ``verilated.mk``
runs each compile as ``$(OBJCACHE) $(CXX) ...``, so the harness sets ``OBJCACHE`` to this
script: a compile whose source lives in ``$VERILATOR_ROOT/include`` is keyed by its complete
command line, the source's content and a salt (Verilator version, compiler), and served from
the cache directory when that key was compiled before. Anything else runs unchanged.

Run as a script (``python objcache.py CACHE_DIR SALT compiler args...``); standard library only,
because make starts it once per compile.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def cached_source(argv: list[str], verilator_root: str) -> Path | None:
    """The runtime source a compile command builds, or None if it is not a runtime compile."""
    if not verilator_root or "-c" not in argv or "-o" not in argv:
        return None
    include = Path(verilator_root).resolve() / "include"
    source = Path(argv[-1])
    if source.suffix != ".cpp" or not source.is_absolute():
        return None
    return source if source.resolve().is_relative_to(include) else None


def compile_key(argv: list[str], source: Path, salt: str) -> str:
    """Everything the object depends on: flags, defines, the source text, the toolchain."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps([salt, argv, digest]).encode()).hexdigest()[:32]


def _store(cache: Path, key: str, output: Path, depfile: Path) -> None:
    for path, suffix in ((output, ".o"), (depfile, ".d")):
        if not path.is_file():
            continue
        handle, temporary = tempfile.mkstemp(dir=cache, prefix=f".{key}")
        os.close(handle)
        shutil.copyfile(path, temporary)
        os.replace(temporary, cache / f"{key}{suffix}")  # atomic: readers never see half a file


def main(arguments: list[str]) -> int:
    cache, salt, argv = Path(arguments[0]), arguments[1], arguments[2:]
    source = cached_source(argv, os.environ.get("VERILATOR_ROOT", ""))
    if source is None:
        return subprocess.call(argv)
    output = Path(argv[argv.index("-o") + 1])
    depfile = output.with_suffix(".d")
    key = compile_key(argv, source, salt)
    cached_object, cached_depfile = cache / f"{key}.o", cache / f"{key}.d"
    if cached_object.is_file():
        shutil.copyfile(cached_object, output)  # a fresh mtime, newer than the Makefiles
        if cached_depfile.is_file():
            shutil.copyfile(cached_depfile, depfile)
        print(f"objcache: reused {output.name} ({key})", flush=True)  # lands in build.log
        return 0
    status = subprocess.call(argv)
    if status == 0:
        cache.mkdir(parents=True, exist_ok=True)
        _store(cache, key, output, depfile)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
