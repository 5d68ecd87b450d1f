"""What `tensorforge compile --out DIR` writes, for use in a user's own project.

A program is only usable outside tensorforge with everything the host would otherwise compute
in Python: the DRAM image with the packed inputs, the register values that start it, where its
output lands and what it must be, the accelerator's parameters as a C header
(`tensorforge.c_header`), and a cocotb test that runs all of it on ``accelerator.v`` with no
tensorforge installed (`tensorforge/templates/`). The expected output is the numpy reference
(`Workload.reference`) of seeded random inputs; its device-layout bytes come from the
functional simulator started from random buffers, and are written only after they decode to
exactly that reference.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from tensorforge.c_header import accelerator_header
from tensorforge.compiler.layout import DramLayout
from tensorforge.compiler.program import Program
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import ConfigError, SimulationError
from tensorforge.hw.registers import Status, register
from tensorforge.memory import MemorySystem

TEMPLATES = Path(__file__).with_name("templates")
TEST_FILES = ("test_accelerator.py", "run_test.py")
HEADER = "tensorforge_params.h"


def _toml_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def config_toml(config: AcceleratorConfig) -> str:
    """``config`` as the TOML `AcceleratorConfig.from_toml` and ``--config`` read back."""
    data = config.to_dict()
    lines = [f"{key} = {_toml_value(value)}" for key, value in data.items()
             if not isinstance(value, dict)]
    for section, values in data.items():
        if isinstance(values, dict):
            lines += ["", f"[{section}]"]
            lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _layout_entry(layout: DramLayout, role: str) -> dict[str, Any]:
    return {"tensor": layout.tensor, "role": role, "kind": layout.kind, "base": layout.base,
            "bytes": layout.nbytes, "elem_bytes": layout.elem_bytes,
            "stored_shape": list(layout.stored_shape), "order": list(layout.order),
            "low": list(layout.low), "line_block": layout.line_block,
            "describe": layout.describe()}


def image_map(program: Program, seed: int) -> dict[str, Any]:
    """The DRAM image's layout: where each tensor lies, the program, the output."""
    layouts = [_layout_entry(layout, "operand") for layout in program.operands]
    layouts += [_layout_entry(layout, "host_epilogue_input") for layout in program.extras]
    return {
        "workload": program.workload.text,
        "sizes": program.workload.sizes_text,
        "config": program.config.describe(),
        "seed": seed,
        "image_bytes": program.dram_bytes,
        "instruction_base": program.instruction_base,
        "instruction_count": len(program.instructions),
        "inputs": layouts,
        "output": _layout_entry(program.output, "output"),
    }


def register_values(program: Program, max_cycles: int) -> dict[str, Any]:
    """What the host writes to start the program, in order, and how it sees the end."""
    writes = [("insn_addr", program.instruction_base),
              ("insn_count", len(program.instructions)), ("control", 1)]
    return {
        "writes": [{"name": name, "offset": register(name).offset, "value": value}
                   for name, value in writes],
        "status": {"offset": register("status").offset, "done": int(Status.DONE),
                   "error": int(Status.ERROR)},
        "cycles": {"offset": register("cycles").offset},
        "max_cycles": max_cycles,
    }


def expected_image(program: Program, inputs: dict[str, np.ndarray], seed: int
                   ) -> tuple[bytearray, bytearray, np.ndarray]:
    """The packed image, the image after the program ran (functional simulator from random
    buffers) and the numpy reference; raises if the two results differ (a compiler bug)."""
    from tensorforge.sim.functional import run_program

    image = program.pack_inputs(inputs)
    after = bytearray(image)
    run_program(program.config, list(program.instructions), after,
                 garbage=np.random.default_rng(seed))
    reference = program.expected_output(inputs)  # through the output stage, if any
    if not np.array_equal(program.unpack_output(after), reference):
        raise SimulationError(
            f"the functional simulator's result of {program.workload} differs from the numpy "
            "reference; the program is wrong, so no expected output is written (report it)")
    return image, after, reference


def _readme(program: Program, files: dict[str, Path], seed: int) -> str:
    output = program.output
    return f"""# {program.workload}

Compiled by `tensorforge compile --out` for `{program.config.describe()}`,
on inputs drawn with seed {seed}.

| file | what |
|---|---|
| `program.bin`, `program.asm` | the {len(program.instructions)} instructions, disassembled |
| `dram_image.bin` | the DRAM image from address 0: packed inputs, output region, program |
| `registers.json` | register writes that start it (insn_addr, insn_count, control), status bits |
| `image.json` | where each tensor lies in the image (device layouts) |
| `inputs.npz`, `expected_output.npy` | the inputs and their numpy reference output |
| `expected_dram_output.bin` | output region (0x{output.base:x}, {output.nbytes} B) after the run |
| `{HEADER}` | the accelerator's parameters, register offsets and this image's memory map |
| `config.toml` | the accelerator (`tensorforge generate --config`) |
| `test_accelerator.py`, `run_test.py` | a cocotb test of all of it on `accelerator.v` |

Run the test (Verilator, cocotb and cocotbext-axi, no tensorforge needed once the Verilog exists):

    tensorforge generate --config {files['config'].name} --out . && python run_test.py
"""


def write_project_files(program: Program, out: Path, *, seed: int,
                        memory: MemorySystem) -> dict[str, Path]:
    """Write every file of the module docstring into ``out``; returns their paths by kind."""
    from tensorforge.sim.rtl_run import default_cycle_limit

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"cannot create the output directory {out}: {error.strerror}") from None
    inputs = program.workload.random_inputs(np.random.default_rng(seed))
    image, after, reference = expected_image(program, inputs, seed)
    max_cycles = default_cycle_limit(program.config, program.instructions, memory)
    files = {kind: out / name for kind, name in (
        ("binary", "program.bin"), ("disassembly", "program.asm"), ("image", "dram_image.bin"),
        ("registers", "registers.json"), ("layout", "image.json"), ("inputs", "inputs.npz"),
        ("expected", "expected_output.npy"), ("expected_dram", "expected_dram_output.bin"),
        ("header", HEADER), ("config", "config.toml"))}
    files["binary"].write_bytes(program.encode())
    files["disassembly"].write_text(program.disassemble() + "\n")
    files["image"].write_bytes(bytes(image))
    files["registers"].write_text(json.dumps(register_values(program, max_cycles), indent=2))
    files["layout"].write_text(json.dumps(image_map(program, seed), indent=2))
    np.savez(files["inputs"], **inputs)
    np.save(files["expected"], reference)
    files["expected_dram"].write_bytes(bytes(after[program.output.base : program.output.end]))
    files["header"].write_text(accelerator_header(program))
    files["config"].write_text(config_toml(program.config))
    for name in TEST_FILES:
        files[name] = Path(shutil.copyfile(TEMPLATES / name, out / name))
    files["readme"] = out / "README.md"
    files["readme"].write_text(_readme(program, files, seed))
    return files
