"""Hypothesis fuzzes every input a user types (issue 16, item 6).

Workload text, ``--sizes``, ``--pe``, configuration and design-space TOML files, and the
arguments of every CLI command. The contract: no traceback, ever. A bad input ends in a
`TensorforgeError` (the CLI prints it and exits 1) or an argparse usage error (exit 2), and
the message names the bad input. The expensive stages (RTL simulation, synthesis, sweeps,
Verilog emission) are replaced by a stop sign: reaching one means every argument passed
validation, which is a valid outcome too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorforge.cli import build_parser, main
from tensorforge.commands.hwflags import parse_pe
from tensorforge.compiler.workload import parse_workload
from tensorforge.compiler.workload_syntax import parse_sizes
from tensorforge.config import AcceleratorConfig
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.errors import TensorforgeError

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

WORKLOADS = [
    "C[i,j] += A[i,k] * B[k,j]",
    "C[k,x,y] += A[c,x+r,y+s] * B[k,c,r,s]",
    "C[i] += A[i,k] * B[k]",
]
# Workload-like text: real workloads with characters swapped, or text in their alphabet.
WORKLOAD_TEXT = st.one_of(
    st.text(alphabet="CABijkxyrsc[],+=*- 0123456789()", max_size=40),
    st.builds(
        lambda text, cuts: "".join(ch for n, ch in enumerate(text) if n not in cuts),
        st.sampled_from(WORKLOADS),
        st.sets(st.integers(0, 40), max_size=4),
    ),
    st.text(max_size=20),
)
SIZES_TEXT = st.one_of(
    st.text(alphabet="ijkxyrscAB=,x0123456789- ", max_size=24),
    st.sampled_from(["i=4,j=4,k=4", "k=2,c=2,x=3,y=3,r=2,s=2", "i=0", "A=2x3", "i=1e9"]),
    st.text(max_size=12),
)


def names_the_input(message: str, *inputs: str) -> bool:
    """The message quotes an input, or a token of one, or points at a column of it (the
    parser's caret, which also points at the end of an empty text)."""
    if any(text.strip() and text.strip() in message for text in inputs):
        return True
    if any(repr(text) in message for text in inputs):
        return True
    if re.search(r"at column \d+:\n.*\n *\^", message):
        return True
    quoted = re.findall(r"'([^']*)'|\"([^\"]*)\"", message)
    tokens = [a or b for a, b in quoted]
    return any(token and any(token in text for text in inputs) for token in tokens)


@FUZZ
@given(text=WORKLOAD_TEXT, sizes=SIZES_TEXT)
def test_workload_parser_raises_only_user_errors_that_name_the_input(text, sizes):
    try:
        parse_workload(text, sizes, name="fuzzed")
    except TensorforgeError as error:
        assert names_the_input(str(error), text, sizes), (text, sizes, str(error))


@FUZZ
@given(sizes=SIZES_TEXT)
def test_sizes_parser(sizes):
    try:
        parsed = parse_sizes(sizes)
    except TensorforgeError as error:
        assert names_the_input(str(error), sizes), (sizes, str(error))
    else:
        assert all(isinstance(name, str) for name in parsed)


@FUZZ
@given(text=st.one_of(st.text(alphabet="0123456789xX -+.", max_size=10), st.text(max_size=8)))
def test_pe_parser(text):
    try:
        rows, cols = parse_pe(text)
    except TensorforgeError as error:
        assert names_the_input(str(error), text), (text, str(error))
    else:
        assert rows >= 1 and cols >= 1


TOML_VALUES = st.one_of(
    st.integers(-5, 1 << 20),
    st.sampled_from(["gemm", "conv2d", "systolic", "ws", "is", "64KiB", "", "x", "-1"]),
    st.booleans(),
    st.floats(allow_nan=True),
    st.lists(st.integers(-2, 64), max_size=3),
)
CONFIG_KEYS = {
    "": ["intrinsic", "conv_taps", "nonsense"],
    "array": ["rows", "cols", "interconnect", "dataflow", "local_bytes"],
    "scratchpad": ["capacity", "banks", "accumulator"],
    "dma": ["bus_bits", "max_burst", "outstanding"],
    "precision": ["in_bits", "acc_bits"],
}


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _toml(tables: dict[str, dict[str, object]]) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in tables.get("", {}).items()]
    for table, values in tables.items():
        if table:
            lines.append(f"[{table}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


CONFIG_TABLES = st.fixed_dictionaries(
    {
        table: st.dictionaries(st.sampled_from(keys), TOML_VALUES, max_size=3)
        for table, keys in CONFIG_KEYS.items()
    }
)


@FUZZ
@given(tables=CONFIG_TABLES, garbage=st.sampled_from(["", "[array", "rows = = 3", "\x00"]))
def test_config_toml_loader(tmp_path, tables, garbage):
    path = tmp_path / "config.toml"
    path.write_text(_toml(tables) + garbage)
    try:
        config = AcceleratorConfig.from_toml(path)
    except TensorforgeError as error:
        inputs = [str(path), *(str(v) for t in tables.values() for v in t.values())]
        inputs += [k for t in tables.values() for k in t] + list(tables)
        assert names_the_input(str(error), *inputs), (tables, str(error))
    else:
        assert AcceleratorConfig.from_dict(config.to_dict()) == config


SPACE_VALUES = st.one_of(
    TOML_VALUES,
    st.fixed_dictionaries({"choices": st.lists(TOML_VALUES, max_size=3)}),
    st.fixed_dictionaries({"low": TOML_VALUES, "high": TOML_VALUES}),
)
SPACE_KEYS = ["intrinsic", "rows", "cols", "interconnect", "dataflow", "spad_kib", "banks",
              "bus_bits", "unknown_knob"]


def _space_toml(spec: dict[str, object]) -> str:
    lines = []
    for key, value in spec.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


@FUZZ
@given(spec=st.dictionaries(st.sampled_from(SPACE_KEYS), SPACE_VALUES, max_size=4))
def test_space_toml_loader(tmp_path, spec):
    path = tmp_path / "space.toml"
    path.write_text(_space_toml(spec))
    try:
        HardwareSpace.from_toml(path)
    except TensorforgeError as error:
        inputs = [str(path), *spec, *(str(v) for v in spec.values())]
        inputs += [str(x) for v in spec.values() if isinstance(v, dict) for x in v.values()]
        assert names_the_input(str(error), *inputs), (spec, str(error))


# --- every command's arguments ---------------------------------------------------------------


class ReachedTheWork(BaseException):
    """Raised where a command would start its expensive work: its arguments all passed."""


EXPENSIVE = [
    ("tensorforge.sim.rtl_run", "run_on_rtl"),
    ("tensorforge.sim.rtl_run", "accelerator_verilog"),
    ("tensorforge.fpga.asic", "synthesize_asic"),
    ("tensorforge.fpga.ecp5", "synthesize_ecp5"),
    ("tensorforge.fpga.board_build", "build_board"),
    ("tensorforge.board_runtime", "run_on_board"),
    ("tensorforge.dse.fidelity", "validate"),
    ("tensorforge.dse.codesign", "run_sweep"),
    ("tensorforge.sim.fuzz", "run_cases"),
    ("amaranth.back.verilog", "convert"),
]

ARGUMENT_VALUES = st.one_of(
    st.sampled_from(
        ["", "0", "-1", "3", "8x8", "3x3", "0x4", "x", "1e9", "nan", "64KiB", "gemm", "conv2d",
         "ws", "none", "i=4,j=4,k=4", "i=", "missing.toml", "gemm:3", "resnet50", "none:1",
         WORKLOADS[0], "C[i] += A[i"]
    ),
    st.text(alphabet="abcxyz0123456789=,:-.[]", max_size=8),
)


def _options(command: str) -> list[argparse.Action]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = subparsers.choices[command]._actions
    return [a for a in actions if a.dest != "help"]


def _plausible(action: argparse.Action) -> st.SearchStrategy[str]:
    """Values of the flag's own kind (its choices, or numbers), so draws get past argparse
    and reach the commands' own checks; junk from `ARGUMENT_VALUES` now and then."""
    if action.choices:
        own = st.sampled_from([str(choice) for choice in action.choices])
    elif action.type is int:
        own = st.integers(-2, 70).map(str)
    elif action.type is float:
        own = st.sampled_from(["0", "-1", "0.5", "2", "1e30", "nan", "inf"])
    else:
        own = ARGUMENT_VALUES
    return st.one_of(own, own, own, own, ARGUMENT_VALUES)


@st.composite
def command_lines(draw, command: str) -> list[str]:
    argv = [command]
    for action in _options(command):
        if not action.option_strings:  # a positional argument: always there
            argv.append(draw(st.one_of(st.just("design.v"), ARGUMENT_VALUES)))
            continue
        if not (action.required or draw(st.integers(0, 3)) == 0):
            continue
        argv.append(action.option_strings[-1])
        if action.nargs != 0:
            argv.append(draw(_plausible(action)))
    return argv


def _run(argv: list[str]) -> tuple[int | str, str]:
    stderr, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        try:
            code: int | str = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
        except ReachedTheWork:
            code = "reached the work"
    return code, stderr.getvalue()


def _build_commands() -> list[str]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(subparsers.choices)


@pytest.mark.parametrize("command", _build_commands())
def test_every_command_rejects_bad_arguments_without_a_traceback(command, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever --out a draw names lands here
    monkeypatch.setenv("TENSORFORGE_CACHE", str(tmp_path / "cache"))

    def stop(*args, **kwargs):
        raise ReachedTheWork

    for module, name in EXPENSIVE:
        with contextlib.suppress(ImportError):
            monkeypatch.setattr(f"{module}.{name}", stop)

    @settings(FUZZ, max_examples=25)
    @given(argv=command_lines(command))
    def check(argv):
        code, stderr = _run(argv)
        assert code in (0, 1, 2, "reached the work"), (argv, code, stderr)
        if code == 1:
            message = stderr.split("error:", 1)[-1]
            # A path flag names its input as a path: '' reads as '.'.
            assert names_the_input(message, *argv, *(str(Path(a)) for a in argv)), (argv, stderr)

    check()
