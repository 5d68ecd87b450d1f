"""Shared fixtures of the test suite (kept small: helpers live in the packages they test)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def cocotb_benches() -> Path:
    """The folder of cocotb bench modules, handed to ``RtlModel.run`` as ``path / "x.py"``."""
    return Path(__file__).resolve().parent / "cocotb_benches"


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, empty tensorforge cache, for tests that must observe a real (re)build."""
    cache = tmp_path / "tensorforge-cache"
    monkeypatch.setenv("TENSORFORGE_CACHE", str(cache))
    return cache
