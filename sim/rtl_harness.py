"""Build a Verilator model of a design once, then run cocotb benches against it from pytest.

Compiling a model costs seconds to minutes of C++; running a bench costs far less. So a model
is built once per (Verilog text, top, build options, waves, Verilator and cocotb version) into
``cache_subdir("verilator")/<top>-<hash>/`` and every later :func:`build_model` of the same
design, in this process or another, finds it there and does not rebuild (``model.was_built``
says which happened). Builds take an exclusive file lock on the key and compile into a private
staging directory that is renamed into place when complete, so two pytest-xdist workers asking
for the same model build it once, and a killed build never leaves a half-built model behind.

Usage (a test module; the bench is an ordinary cocotb module)::

    import functools
    from pathlib import Path

    from tensorforge.hw.mac import MultiplyAccumulate
    from tensorforge.sim.rtl_harness import build_model

    BENCHES = Path(__file__).parent / "cocotb_benches"

    @functools.cache  # one build per configuration per process; the disk cache spans processes
    def mac_model(in_bits: int = 8, acc_bits: int = 32):
        return build_model(MultiplyAccumulate(in_bits, acc_bits), top="mac")

    @pytest.mark.rtl
    def test_mac(tmp_path):
        results = mac_model().run(
            BENCHES / "mac_bench.py", test_dir=tmp_path, config={"cycles": 2000}, seed=1234
        )
        assert len(results.passed) == 1

``run`` raises :class:`SimulationError` naming each failing cocotb test, its message and the
seed to rerun with. On the cocotb side, ``tensorforge.sim.bench_support.bench_config()``
returns the ``config`` mapping.
Waveforms: ``WAVES=1`` in the environment (it wins, as in cocotb) or ``waves=True`` builds a
separate model with ``--trace-fst``; each run then writes ``dump.fst`` into its test directory
and ``results.waveform`` is its path. Verilator's FST writer needs ``lz4.h`` (Debian
``liblz4-dev``); where it is missing the model traces to VCD (``dump.vcd``) instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amaranth.back import verilog
from amaranth.lib import wiring

from tensorforge.errors import SimulationError
from tensorforge.sim.bench_support import CONFIG_ENV
from tensorforge.sim.rtl_build import (
    DEFAULT_BUILD_OPTIONS,
    ModelSource,
    build_into_cache,
    cocotb_runner,
    read_manifest,
)
from tensorforge.sim.rtl_results import RtlResults, crashed_run_error, parse_results
from tensorforge.sim.verilator_env import VerilatorInstall, ensure_verilator_env, fst_supported

logger = logging.getLogger(__name__)

Design = wiring.Component | Path | str


def design_verilog(design: Design, top: str) -> str:
    """Verilog text for ``design``: an Amaranth component, a Verilog file, or Verilog text.

    Components are converted with their signature as the port list and without source
    locations, so the text (and so the cache key) does not depend on where the checkout is.
    """
    if isinstance(design, wiring.Component):
        return with_primitive_models(verilog.convert(design, name=top, emit_src=False))
    if isinstance(design, Path):
        return with_primitive_models(design.read_text())
    if isinstance(design, str):
        if "module" not in design:
            raise SimulationError(
                "build_model takes Verilog text as a str and a file as a pathlib.Path; "
                f"this str holds no module: {design[:60]!r}"
            )
        return with_primitive_models(design)
    raise TypeError(f"cannot simulate a {type(design).__name__}; pass a wiring.Component")


#: Vendor primitives the ``ecp5`` target instantiates, and their simulation models (sim/).
PRIMITIVE_MODELS = {"MULT18X18D": "mult18x18d.v", "DP16KD": "dp16kd.v"}


def with_primitive_models(text: str) -> str:
    """``text`` plus the simulation model of each vendor primitive it instantiates and does not
    define (`PRIMITIVE_MODELS`), so an ``ecp5``-target design simulates like any other."""
    from importlib import resources

    for primitive, model in PRIMITIVE_MODELS.items():
        if re.search(rf"^\s*{primitive}\b", text, re.M) and not re.search(
                rf"^\s*module\s+{primitive}\b", text, re.M):
            text += "\n" + (resources.files("tensorforge.sim") / model).read_text()
    return text


def waves_requested(waves: bool | None = None) -> bool:
    """``$WAVES`` when set (cocotb's runner obeys it too, so the two must agree), else ``waves``."""
    env = os.environ.get("WAVES", "").strip().lower()
    if env:
        return env not in ("0", "false", "no", "off")
    return bool(waves)


@contextlib.contextmanager
def _importable_from(directory: Path | None) -> Iterator[None]:
    """Put ``directory`` on ``sys.path`` while the runner reads it to set the sim's PYTHONPATH."""
    if directory is None or str(directory) in sys.path:
        yield
        return
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(directory))


@dataclass(frozen=True)
class RtlModel:
    """A compiled Verilator model in the cache, ready to run cocotb benches.

    ``was_built`` is True only for the call that compiled it; ``build_seconds`` is the time
    that compile took (recorded in the cache, so it is known on a cache hit too).
    """

    top: str
    directory: Path
    key: str
    trace_format: str | None  # "fst", "vcd", or None for a model built without tracing
    was_built: bool
    build_seconds: float

    @property
    def waves(self) -> bool:
        return self.trace_format is not None

    @property
    def verilog_path(self) -> Path:
        return self.directory / f"{self.top}.v"

    @property
    def executable(self) -> Path:
        return self.directory / self.top

    def run(
        self,
        test_module: str | Path,
        *,
        test_dir: Path | None = None,
        config: Mapping[str, Any] | None = None,
        extra_env: Mapping[str, str] | None = None,
        testcase: str | Sequence[str] | None = None,
        seed: int | None = None,
    ) -> RtlResults:
        """Run the cocotb tests of ``test_module`` on this model; raise if any fails.

        ``test_module`` is an importable module name or the path of a ``.py`` bench. ``config``
        reaches the bench as ``bench_support.bench_config()``; ``seed`` becomes
        ``COCOTB_RANDOM_SEED`` (a fresh one is drawn, and reported on failure, when it is None).
        ``testcase`` selects tests by name, including tests marked ``skip=True`` (cocotb runs
        those when named).
        Without ``test_dir`` the run uses a temporary directory, removed after a passing run
        that recorded no waveform.
        """
        ensure_verilator_env()
        if seed is None:
            seed = random.SystemRandom().randrange(1 << 31)
        own_test_dir = test_dir is None
        test_dir = (
            Path(tempfile.mkdtemp(prefix=f"tensorforge-rtl-{self.top}-"))
            if own_test_dir
            else Path(test_dir).resolve()
        )
        test_dir.mkdir(parents=True, exist_ok=True)
        module_dir = None
        if isinstance(test_module, Path):
            module_dir, test_module = test_module.resolve().parent, test_module.stem
        env = dict(extra_env or {})
        if config is not None:
            env[CONFIG_ENV] = json.dumps(dict(config), sort_keys=True)
        results_xml = test_dir / "results.xml"
        log_path = test_dir / "sim.log"
        waveform = test_dir / f"dump.{self.trace_format}" if self.trace_format else None

        runner = cocotb_runner()
        started = time.perf_counter()
        failure_cause = ""
        with _importable_from(module_dir):
            try:
                runner.test(
                    test_module=test_module,
                    hdl_toplevel=self.top,
                    hdl_toplevel_lang="verilog",
                    build_dir=self.directory,
                    test_dir=test_dir,
                    results_xml=str(results_xml),
                    testcase=testcase,
                    seed=seed,
                    extra_env=env,
                    waves=self.waves,
                    test_args=["--trace-file", str(waveform)] if waveform else [],
                    log_file=log_path,
                )
            except (RuntimeError, SystemExit) as error:
                # Under pytest the runner exits on failed tests; the results file says which.
                failure_cause = f"{type(error).__name__}: {error}"
        logger.info(
            "%s: cocotb run took %.2f s (%s)", self.top, time.perf_counter() - started, log_path
        )
        if not results_xml.is_file():
            raise crashed_run_error(self.top, seed, log_path, failure_cause or "no results")
        results = RtlResults(
            top=self.top,
            tests=parse_results(results_xml),
            seed=seed,
            results_xml=results_xml,
            log_path=log_path,
            waveform=waveform if waveform is not None and waveform.is_file() else None,
        )
        if failure_cause and not results.failed:
            raise crashed_run_error(self.top, seed, log_path, failure_cause)
        results.raise_for_failures()
        if own_test_dir and results.waveform is None:
            shutil.rmtree(test_dir, ignore_errors=True)
        return results


def _trace_format(install: VerilatorInstall) -> str:
    if fst_supported(install.cxx):
        return "fst"
    logger.warning("lz4.h not found (apt-get install liblz4-dev): waveforms are VCD, not FST")
    return "vcd"


def build_model(
    design: Design,
    *,
    top: str = "top",
    build_options: Sequence[str] = DEFAULT_BUILD_OPTIONS,
    waves: bool | None = None,
    public: str | None = None,
) -> RtlModel:
    """The Verilator model of ``design``, built now or found in the cache.

    ``design`` is an Amaranth ``wiring.Component`` (converted with ``top`` as module name), a
    ``Path`` of a Verilog file, or Verilog text; ``top`` names the top module. ``waves`` (or
    ``$WAVES``) builds a tracing model, cached under its own key. ``public`` limits what cocotb
    can reach to the signals a Verilator configuration text names (`ModelSource`); the
    default leaves every signal public.
    """
    install = ensure_verilator_env()
    trace_format = _trace_format(install) if waves_requested(waves) else None
    verilog_text = design_verilog(design, top)
    directory, key, was_built = build_into_cache(
        ModelSource(verilog_text, top, build_options, trace_format, install, public)
    )
    manifest = read_manifest(directory)
    return RtlModel(
        top=top,
        directory=directory,
        key=key,
        trace_format=manifest["trace_format"],
        was_built=was_built,
        build_seconds=float(manifest["build_seconds"]),
    )
