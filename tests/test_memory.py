"""`MemorySystem`: presets, validation, overrides, and the ``--memory`` flags of the CLI."""

from __future__ import annotations

import argparse

import pytest

from tensorforge.cli import main
from tensorforge.commands.memflags import add_memory_arguments, memory_from_args
from tensorforge.errors import ConfigError
from tensorforge.memory import DEFAULT_MEMORY, PRESETS, MemorySystem, memory_from_options


def test_presets_are_named_and_the_default_is_realistic():
    assert {"ideal", "ddr3", "lpddr4"} <= set(PRESETS)
    assert PRESETS["ideal"].ideal
    assert MemorySystem() == DEFAULT_MEMORY == PRESETS["ddr3"]
    assert not DEFAULT_MEMORY.ideal and DEFAULT_MEMORY.latency >= 16
    for name, memory in PRESETS.items():
        assert MemorySystem.preset(name) is memory
        assert memory.describe() == name
    assert MemorySystem.preset(" LPDDR4 ") == PRESETS["lpddr4"]


def test_bandwidth_becomes_beats_per_cycle_of_a_bus():
    assert MemorySystem(bandwidth=4).beats_per_cycle(8) == 0.5
    assert MemorySystem(bandwidth=16).beats_per_cycle(8) == 1.0  # the bus is the limit
    assert MemorySystem(bandwidth=None).beats_per_cycle(64) == 1.0
    assert MemorySystem(bandwidth=3).bandwidth == 3.0 and isinstance(
        MemorySystem(bandwidth=3).bandwidth, float)


@pytest.mark.parametrize(("fields", "message"), [
    ({"latency": -1}, "latency must be 0 or more cycles, not -1"),
    ({"latency": 2.5}, "latency must be 0 or more cycles, not 2.5"),
    ({"latency": True}, "latency must be 0 or more cycles, not True"),
    ({"bandwidth": 0}, "bandwidth must be a positive number of bytes per cycle"),
    ({"bandwidth": float("inf")}, "bandwidth must be a positive number"),
    ({"bandwidth": "fast"}, "not 'fast'"),
    ({"outstanding": 0}, "outstanding must be a positive number of bursts, not 0"),
    ({"outstanding": 1.5}, "outstanding must be a positive number of bursts, not 1.5"),
])
def test_validation_names_the_field_and_the_value(fields, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        MemorySystem(**fields)


def test_overrides_replace_single_fields_of_a_preset():
    memory = memory_from_options("lpddr4", latency=100)
    assert memory == MemorySystem(latency=100, bandwidth=PRESETS["lpddr4"].bandwidth,
                                  outstanding=PRESETS["lpddr4"].outstanding)
    assert memory.describe() == "latency 100 cycles, 16 B/cycle, 32 outstanding"
    assert memory_from_options(latency=64) == DEFAULT_MEMORY.with_overrides(latency=64)
    assert memory_from_options("ddr3", bandwidth="bus", outstanding="unlimited") == MemorySystem(
        latency=DEFAULT_MEMORY.latency, bandwidth=None, outstanding=None)
    assert memory_from_options("ideal", latency=0) == PRESETS["ideal"]
    assert MemorySystem.from_dict(memory.to_dict()) == memory
    with pytest.raises(ConfigError, match="latency must be 0 or more cycles, not -3"):
        memory_from_options("ddr3", latency=-3)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"memory must be one of ideal, ddr3, lpddr4.*'ddr9'"):
        memory_from_options("ddr9")


def _parse(*argv: str) -> MemorySystem:
    parser = argparse.ArgumentParser()
    add_memory_arguments(parser)
    return memory_from_args(parser.parse_args(list(argv)))


def test_flags_pick_a_preset_and_override_it():
    assert _parse() == DEFAULT_MEMORY
    assert _parse("--memory", "ideal") == PRESETS["ideal"]
    assert _parse("--memory", "ideal", "--dram-latency", "64", "--dram-bandwidth", "16") == (
        MemorySystem(latency=64, bandwidth=16, outstanding=None))
    assert _parse("--dram-outstanding", "4").outstanding == 4
    assert _parse("--dram-outstanding", "unlimited").outstanding is None
    assert _parse("--memory", "lpddr4", "--dram-bandwidth", "bus").bandwidth is None
    with pytest.raises(ConfigError, match="--dram-latency must be an integer, not 'soon'"):
        _parse("--dram-latency", "soon")
    with pytest.raises(ConfigError, match="--dram-bandwidth must be a number or 'bus'"):
        _parse("--dram-bandwidth", "wide")


@pytest.mark.parametrize("argv", [["--memory", "ddr9"], ["--dram-latency", "-1"],
                                  ["--dram-outstanding", "0"]])
def test_bad_memory_flags_are_clean_cli_errors(argv, capsys):
    status = main(["simulate", "--workload", "C[i,j] += A[i,k] * B[k,j]",
                   "--sizes", "i=8,j=8,k=8", *argv])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith("error: ") and "Traceback" not in err
    assert any(word in err for word in ("memory must be one of", "latency must be",
                                        "outstanding must be"))
