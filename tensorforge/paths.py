"""Where tensorforge keeps things on disk.

Nothing is resolved relative to the current directory: caches live under the user's cache
directory (or ``$TENSORFORGE_CACHE``), package data is resolved from ``__file__``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The root of every tensorforge cache (Verilator models, synthesis results, sweeps).

    ``$TENSORFORGE_CACHE`` wins; otherwise ``$XDG_CACHE_HOME/tensorforge`` or
    ``~/.cache/tensorforge``. Created on first use.
    """
    override = os.environ.get("TENSORFORGE_CACHE")
    if override:
        root = Path(override).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "tensorforge"
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_subdir(name: str) -> Path:
    """A named subdirectory of the cache root, created on first use."""
    path = cache_dir() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def repo_root() -> Path | None:
    """The source checkout this package runs from, when it runs from one (editable install)."""
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").is_file() else None


def rtl_commit() -> str:
    """The checkout's commit, for reports of results made from its RTL: ``+ uncommitted hw/
    changes`` is appended when hw/ differs from it, and ``unknown`` is returned outside a git
    checkout (an installed package)."""
    import subprocess

    root = repo_root()
    if root is None:
        return "unknown"

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown"
    return head + (" + uncommitted hw/ changes" if git("status", "--porcelain", "--", "hw")
                   else "")
