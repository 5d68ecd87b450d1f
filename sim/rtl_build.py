"""Compile Verilog into a cached Verilator model directory, safely under parallel pytest.

A model lives in ``cache_subdir("verilator")/<top>-<key>/`` and is complete exactly when its
``model.json`` manifest exists. Builds hold an exclusive ``flock`` on ``<top>-<key>.lock`` and
compile into a private staging directory that is renamed into place at the end: a second
process asking for the same model waits and then finds it, and a killed build leaves only a
staging directory that nobody reads.

Most of a build is not the design: Verilator's C++ runtime (``verilated.o``, ``verilated_vpi.o``
and friends) takes ~80% of the compile time and depends only on the Verilator install, the
compiler and the flags. :mod:`tensorforge.sim.objcache` wraps each compile (make's ``OBJCACHE``)
and serves those objects from ``cache_subdir("verilator")/objects`` when the same command was
compiled before, so a new model compiles only its own code (MAC on a shared, loaded 2-core
machine: ~20 s for the first model, ~7-9 s for a later one).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorforge.errors import ToolError
from tensorforge.hashing import stable_hash
from tensorforge.paths import cache_subdir
from tensorforge.sim import objcache
from tensorforge.sim.rtl_results import log_tail
from tensorforge.sim.verilator_env import VerilatorInstall, build_make_variables

logger = logging.getLogger(__name__)

#: Bumped when the layout of a cached model changes, so old entries are not trusted.
_CACHE_FORMAT = "rtl-model-2"  # 2: OPT_FAST/OPT_SLOW split (see _makeflags)
MANIFEST = "model.json"

#: Verilator options for every build. Amaranth's netlists trip style lints that are not bugs,
#: so warnings are reported but not fatal. The C++ optimization level is set per file class in
#: `_makeflags`, not with ``-CFLAGS`` (which would apply to every file).
DEFAULT_BUILD_OPTIONS: tuple[str, ...] = ("-Wno-fatal", "-Wno-lint", "-Wno-style")

#: ``-O2`` for the per-cycle ("fast") code: it builds no slower than Verilator's ``-Os`` and
#: ``-O0`` simulates ~40% slower. ``-O0`` for the run-once ("slow") code: at ``-O2`` GCC spent
#: over 20 minutes on the whole accelerator's symbol-table constructor (~3,800 signals that
#: cocotb reaches through VPI), which compiles in 3 s at ``-O0``.
OPTIMIZATION_MAKE_VARIABLES = {"OPT_FAST": "-O2", "OPT_SLOW": "-O0"}


def cocotb_runner(public_flat_rw: bool = True) -> Any:
    """cocotb's Verilator runner (imported late: the import costs ~0.2 s).

    cocotb builds every model with ``--public-flat-rw`` (every signal reachable through VPI),
    which keeps Verilator from optimizing the design: the 8x8 accelerator simulates ~2.5x
    slower with it. ``public_flat_rw=False`` drops the option (the build then names what is
    public in a Verilator configuration file, see `ModelSource`).
    """
    from cocotb_tools.runner import get_runner

    runner = get_runner("verilator")
    if not public_flat_rw:
        build_command = runner._build_command  # the runner offers no switch for it

        def without_public_flat_rw() -> list:
            commands = build_command()
            commands[0] = [arg for arg in commands[0] if arg != "--public-flat-rw"]
            return commands

        runner._build_command = without_public_flat_rw
    return runner


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path``; other processes wait until it is released."""
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _environment(updates: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of a runner call.

    cocotb's runner copies ``os.environ`` into its subprocesses and offers no other way in
    for ``make`` variables at build time.
    """
    saved = {name: os.environ.get(name) for name in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _object_cache_command(install: VerilatorInstall) -> str:
    """The ``OBJCACHE`` prefix that runs every compile through :mod:`objcache`."""
    cxx = Path(install.cxx).resolve()
    salt = stable_hash(install.version, str(cxx), cxx.stat().st_mtime_ns)
    parts = [sys.executable, objcache.__file__, str(cache_subdir("verilator") / "objects"), salt]
    return " ".join(shlex.quote(part) for part in parts)


def _makeflags(install: VerilatorInstall) -> str:
    """``MAKEFLAGS`` for the model build: local tool paths and the runtime object cache."""
    variables = build_make_variables(install) | OPTIMIZATION_MAKE_VARIABLES
    if "OBJCACHE" not in os.environ:  # a user's own ccache wins
        variables["OBJCACHE"] = _object_cache_command(install)
    definitions = " ".join(
        f"{name}={value.replace(' ', chr(92) + ' ')}" for name, value in variables.items()
    )
    existing = os.environ.get("MAKEFLAGS", "").strip()
    return f"{existing} {definitions}".strip()


@dataclass(frozen=True)
class ModelSource:
    """What a Verilator model is compiled from.

    ``public`` is None for cocotb's default, every signal public (``--public-flat-rw``), or
    the text of a Verilator configuration file (``public_flat_rw -module ... -var ...``
    lines) naming the only signals cocotb may reach: the rest is optimized freely.
    """

    verilog_text: str
    top: str
    build_options: Sequence[str]
    trace_format: str | None
    install: VerilatorInstall
    public: str | None = None

    def key(self) -> str:
        """The cache key of the model: everything that changes the compiled binary, including
        where cocotb's libraries are: the binary loads them from that path, so a model built
        in another (since deleted) virtual environment cannot run here."""
        parts = [_CACHE_FORMAT, self.verilog_text, self.top, list(self.build_options),
                 self.trace_format, self.install.version, importlib.metadata.version("cocotb"),
                 str(cocotb_libs())]
        if self.public is not None:  # keeps the keys of models built before the option existed
            parts.append(self.public)
        return stable_hash(*parts)


def cocotb_libs() -> Path:
    """The folder of the cocotb libraries a model links against."""
    import cocotb

    return Path(cocotb.__file__).resolve().parent / "libs"


def _compile(staging: Path, model: ModelSource) -> float:
    """Run Verilator and make in ``staging``; return the seconds it took."""
    top = model.top
    source = staging / f"{top}.v"
    source.write_text(model.verilog_text)
    sources = [source]
    if model.public is not None:
        sources.append(staging / "public.vlt")
        sources[-1].write_text(model.public)
    build_log = staging / "build.log"
    # cocotb's runner adds --trace (VCD) for waves=True; --trace-fst switches the format.
    options = [*model.build_options, *(["--trace-fst"] if model.trace_format == "fst" else [])]
    started = time.perf_counter()
    try:
        with _environment({"MAKEFLAGS": _makeflags(model.install)}):
            cocotb_runner(public_flat_rw=model.public is None).build(
                sources=sources,
                hdl_toplevel=top,
                build_args=options,
                build_dir=staging,
                waves=model.trace_format is not None,
                timescale=("1ns", "1ps"),
                log_file=build_log,
            )
    except (RuntimeError, SystemExit) as error:
        raise ToolError(
            "verilator",
            f"building the model of {top} failed ({error}); options {options}",
            log_tail(build_log, 60),
            log_lines=60,
        ) from error
    return time.perf_counter() - started


#: Build intermediates a finished model never reads again; precompiled headers of a large
#: design alone are ~150 MB, so they are deleted before the model enters the cache.
_INTERMEDIATES = ("*.gch", "*.o", "*.a", "*.d", "*.tmp")


def _prune(staging: Path) -> None:
    for pattern in _INTERMEDIATES:
        for path in staging.glob(pattern):
            path.unlink()


def build_into_cache(model: ModelSource) -> tuple[Path, str, bool]:
    """The directory of ``model``, compiling it unless it is cached.

    Returns ``(directory, key, was_built)``; the directory holds the ``MANIFEST``.
    """
    top, key = model.top, model.key()
    cache = cache_subdir("verilator")
    directory = cache / f"{top}-{key}"
    if (directory / MANIFEST).is_file():
        return directory, key, False

    with exclusive_lock(cache / f"{top}-{key}.lock"):
        if (directory / MANIFEST).is_file():  # another process built it while we waited
            return directory, key, False
        staging = Path(tempfile.mkdtemp(prefix=f".{top}-{key}.", dir=cache))
        try:
            seconds = _compile(staging, model)
            manifest = {
                "top": top,
                "key": key,
                "build_seconds": round(seconds, 3),
                "build_options": list(model.build_options),
                "trace_format": model.trace_format,
                "public": "all" if model.public is None else "listed in public.vlt",
                "verilator": model.install.version,
            }
            _prune(staging)
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2))
            if directory.exists():  # debris of a build killed before the manifest existed
                shutil.rmtree(directory)
            staging.rename(directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    logger.info("built Verilator model %s in %.1f s (%s)", top, seconds, directory)
    return directory, key, True


def read_manifest(directory: Path) -> dict[str, Any]:
    return json.loads((directory / MANIFEST).read_text())
