"""The host runtime end to end: `tensorforge run` against the board SoC simulated in Verilator.

The simulated board (`tensorforge.sim.soc_sim`) is the SoC the bitstream holds, with its UART
on a pty; the runtime opens the pty as it would ``/dev/ttyUSB0``, loads a compiled GEMM,
starts the accelerator through its control registers, polls, reads the output back. The
result must equal numpy's. One Verilator model (a 2x2 GEMM accelerator, 16 KiB of memory)
serves every RTL test here. Without RTL, the runtime also runs against a Python model of the
board (`FunctionalBoard`), which can play a failing accelerator.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from tensorforge.api import compile_workload
from tensorforge.board_runtime import check_board
from tensorforge.cli import main
from tensorforge.compiler.workload import parse_workload
from tensorforge.config import AcceleratorConfig
from tensorforge.host_link import HostLink, LinkError
from tensorforge.hw.board.host_protocol import (
    INFO_BASE,
    INFO_MAGIC,
    PROTOCOL_VERSION,
    REGISTERS_BASE,
    STATUS_BASE,
    Opcode,
    config_digest,
)
from tensorforge.hw.registers import COUNTERS, REGISTERS, Status
from tensorforge.sim.functional import run_program

HARDWARE_FLAGS = ["--pe", "2x2", "--spad", "1", "--acc", "1", "--banks", "2"]
CONFIG = AcceleratorConfig.from_dict({
    "intrinsic": "gemm",
    "array": {"rows": 2, "cols": 2, "interconnect": "systolic", "dataflow": "ws"},
    "scratchpad": {"capacity": 1024, "banks": 2, "accumulator": 1024},
})
GEMM_TEXT, GEMM_SIZES = "C[i,j] += A[i,k] * B[k,j]", "i=6,j=5,k=7"
GEMM = parse_workload(GEMM_TEXT, GEMM_SIZES, name="workload")
MEMORY_BYTES = 16 * 1024


def test_the_flags_describe_the_test_configuration():
    """The CLI test passes flags, the API test a config: they must be the same accelerator
    (one Verilator model)."""
    import argparse

    from tensorforge.commands.hwflags import add_hardware_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_hardware_arguments(parser)
    assert config_from_args(parser.parse_args(HARDWARE_FLAGS)) == CONFIG


def test_a_board_with_another_accelerator_or_too_little_memory_is_refused():
    program = compile_workload(GEMM, CONFIG)
    info = {"config_digest": config_digest(CONFIG), "memory_bytes": program.dram_bytes}
    check_board(info, program)  # the right board
    other = AcceleratorConfig.from_dict({**CONFIG.to_dict(), "array": {
        **CONFIG.to_dict()["array"], "rows": 4}})
    with pytest.raises(LinkError, match="different accelerator"):
        check_board({**info, "config_digest": config_digest(other)}, program)
    with pytest.raises(LinkError, match="larger --memory-kib"):
        check_board({**info, "memory_bytes": program.dram_bytes - 64}, program)


class FunctionalBoard:
    """A serial port to a Python model of the SoC: information words, the control registers
    and memory; a start runs the program on the functional simulator and sets ``finish``
    (DONE, or ERROR to play a failing accelerator)."""

    def __init__(self, config: AcceleratorConfig, finish: int = Status.DONE) -> None:
        self.config, self.finish = config, finish
        self.memory = bytearray(MEMORY_BYTES)
        self.registers = {name: 0 for name in ("status", "insn_addr", "insn_count")}
        self.info = [INFO_MAGIC, PROTOCOL_VERSION, MEMORY_BYTES, config_digest(config), 0, 0]
        self.answer = bytearray()

    def _word(self, address: int) -> int:
        if address >= INFO_BASE:
            return self.info[(address - INFO_BASE) // 4]
        if address >= REGISTERS_BASE:
            name = next(r.name for r in REGISTERS if r.offset == address - REGISTERS_BASE)
            return self.registers.get(name, 7)  # counters read 7
        return int.from_bytes(self.memory[address : address + 4], "little")

    def _store(self, address: int, value: int) -> None:
        if address < REGISTERS_BASE:
            self.memory[address : address + 4] = value.to_bytes(4, "little")
            return
        name = next(r.name for r in REGISTERS if r.offset == address - REGISTERS_BASE)
        if name == "control" and value & 1:
            program = self.memory[self.registers["insn_addr"]:][: 16 * self.registers[
                "insn_count"]]
            run_program(self.config, bytes(program), self.memory)
            self.registers["status"] = self.finish
        else:
            self.registers[name] = value

    def write(self, data: bytes) -> None:
        opcode, address, count = struct.unpack("<BIB", data[:6])
        for index in range(count + 1):
            at = address + 4 * index
            if opcode == Opcode.WRITE:
                self._store(at, int.from_bytes(data[6 + 4 * index : 10 + 4 * index], "little"))
            else:
                self.answer += self._word(at).to_bytes(4, "little")
        self.answer.append(STATUS_BASE)

    def read(self, count: int) -> bytes:
        taken, self.answer = bytes(self.answer[:count]), self.answer[count:]
        return taken


def test_runtime_on_a_functional_model_of_the_board(random_seed):
    """The runtime's sequence (check, load, start, poll, read back) without RTL; an ERROR
    status is an error that says so."""
    from tensorforge.board_runtime import run_on_board

    program = compile_workload(GEMM, CONFIG)
    inputs = GEMM.random_inputs(np.random.default_rng(random_seed))
    outcome = run_on_board(HostLink(FunctionalBoard(CONFIG)), program, inputs)
    np.testing.assert_array_equal(outcome.output, GEMM.reference(inputs))
    assert outcome.counters == {name: 7 for name in COUNTERS}
    with pytest.raises(LinkError, match="stopped with an error"):
        run_on_board(HostLink(FunctionalBoard(CONFIG, Status.ERROR)), program, inputs)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A function that starts the simulated board in a fresh folder (the model is shared)."""
    from tensorforge.sim.soc_sim import simulated_board, simulation_options

    options = simulation_options(MEMORY_BYTES)

    def start(name: str):
        return simulated_board(CONFIG, tmp_path_factory.mktemp(name), options)

    return start


@pytest.mark.rtl
def test_runtime_runs_a_gemm_on_the_simulated_board_and_equals_numpy(board, random_seed):
    from tensorforge.board_runtime import board_info, run_on_board

    rng = np.random.default_rng(random_seed)
    program = compile_workload(GEMM, CONFIG)
    inputs = GEMM.random_inputs(rng)
    with board("api") as port, HostLink.open(port, 115200) as link:
        info = board_info(link)
        outcome = run_on_board(link, program, inputs)
    assert info["memory_bytes"] == MEMORY_BYTES
    assert info["config_digest"] == config_digest(CONFIG)
    np.testing.assert_array_equal(outcome.output, GEMM.reference(inputs))
    # the counters are the accelerator's own: at least one cycle per MAC step
    assert outcome.counters["cycles"] >= program.statistics()["mac_steps"]
    assert outcome.counters["bytes_written"] >= GEMM.shapes["C"][0] * GEMM.shapes["C"][1] * 4


@pytest.mark.rtl
def test_cli_compile_then_run_on_the_simulated_board(board, tmp_path, capsys):
    """What a user types: compile to a binary and a mapping, then run it with --inputs."""
    binary, mapping = tmp_path / "gemm.bin", tmp_path / "mapping.json"
    workload = ["--workload", GEMM_TEXT, "--sizes", GEMM_SIZES]
    assert main(["compile", *workload, *HARDWARE_FLAGS, "--out", str(binary),
                 "--save-mapping", str(mapping)]) == 0
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (6, 7), dtype=np.int64)
    b = rng.integers(-128, 128, (7, 5), dtype=np.int64)
    np.savez(tmp_path / "inputs.npz", A=a, B=b)
    capsys.readouterr()
    with board("cli") as port:
        status = main(["run", str(binary), "--port", port, *workload, *HARDWARE_FLAGS,
                       "--mapping", str(mapping), "--inputs", str(tmp_path / "inputs.npz"),
                       "--out", str(tmp_path / "c.npy"), "--json"])
    assert status == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), a @ b)


def test_run_refuses_a_binary_its_flags_do_not_compile_to(tmp_path, capsys):
    binary = tmp_path / "other.bin"
    binary.write_bytes(compile_workload(GEMM, CONFIG).encode()[:-16])
    status = main(["run", str(binary), "--port", "loop://", "--workload", GEMM_TEXT,
                   "--sizes", GEMM_SIZES, *HARDWARE_FLAGS])
    assert status == 1
    assert "is not the program these flags compile to" in capsys.readouterr().err
