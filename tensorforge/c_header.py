"""The C header of one compiled program: the accelerator's parameters and memory map.

Like Gemmini's generated ``gemmini_params.h``, it lets host software written in C (a driver,
firmware on a soft core, a testbench) use the accelerator without reading Python: the array
and buffer geometry, the element types, the bus, the control registers
(`tensorforge.hw.registers.REGISTERS`) and, for the program it comes with, where each tensor
lies in the DRAM image and what to write to ``insn_addr`` and ``insn_count``. Every number is
read from the `AcceleratorConfig` and the `Program`, so the header cannot drift from them.
"""

from __future__ import annotations

import re

from tensorforge.compiler.layout import DramLayout
from tensorforge.compiler.program import Program
from tensorforge.hw.registers import REGISTERS, Status
from tensorforge.isa import INSTRUCTION_BYTES

PREFIX = "TF_"
_C_INT_TYPES = {1: "int8_t", 2: "int16_t", 4: "int32_t", 8: "int64_t"}


def c_identifier(name: str) -> str:
    """``name`` as the upper-case part of a macro name (anything not alphanumeric -> ``_``)."""
    return re.sub(r"\W", "_", name).upper()


def _define(name: str, value: object, comment: str = "") -> str:
    line = f"#define {PREFIX}{name} {value}"
    return f"{line:<48} /* {comment} */" if comment else line


def _accelerator_lines(program: Program) -> list[str]:
    config = program.config
    array, precision = config.array, config.precision
    return [
        f"/* accelerator: {config.describe()} */",
        _define("INTRINSIC", f'"{config.intrinsic.value}"'),
        _define("DATAFLOW", f'"{array.dataflow.value}"', "ws, os or is"),
        _define("INTERCONNECT", f'"{array.interconnect.value}"'),
        _define("ARRAY_ROWS", array.rows),
        _define("ARRAY_COLS", array.cols),
        _define("CONV_TAPS", config.conv_taps, "kernel width of the conv2d intrinsic"),
        _define("LOCAL_BYTES", int(array.local_bytes), "per-PE local memory"),
        _define("IN_BITS", precision.in_bits, "operand width"),
        _define("ACC_BITS", precision.acc_bits, "accumulator and output width"),
        f"typedef {_C_INT_TYPES[precision.in_bytes]} {PREFIX.lower()}elem_t;",
        f"typedef {_C_INT_TYPES[precision.acc_bytes]} {PREFIX.lower()}acc_t;",
        "",
        "/* scratchpad (operands) and accumulator buffers */",
        _define("SPAD_BYTES", int(config.scratchpad.capacity)),
        _define("SPAD_LINES", config.spad_lines),
        _define("SPAD_LINE_ELEMS", config.spad_line_elems),
        _define("SPAD_LINE_BYTES", config.spad_line_bytes),
        _define("SPAD_BANKS", config.scratchpad.banks, "line n is in bank n % banks"),
        _define("SPAD_BANK_DEPTH", config.bank_depth, "lines per bank"),
        _define("ACC_BYTES", int(config.scratchpad.accumulator)),
        _define("ACC_LINES", config.acc_lines),
        _define("ACC_LINE_ELEMS", config.acc_line_elems),
        _define("ACC_LINE_BYTES", config.acc_line_bytes),
        "",
        "/* DRAM port: AXI4 manager m_axi */",
        _define("BUS_BITS", config.dma.bus_bits),
        _define("BUS_BYTES", config.dma.bus_bytes),
        _define("MAX_BURST", config.dma.max_burst, "beats per AXI burst"),
        _define("OUTSTANDING", config.dma.outstanding, "bursts in flight per DMA unit"),
        _define("INSTRUCTION_BYTES", INSTRUCTION_BYTES),
        "",
        "/* controller and STORE path */",
        _define("QUEUE_DEPTH", config.controller.queue_depth, "instructions queued per unit"),
        _define("REPEAT", int(config.controller.repeat),
                "1: LOAD/STORE repeat counts are expanded (else they must be 0)"),
        _define("OUTPUT_PIPELINE", int(config.output_pipeline),
                "1: STORE can requantize (else requant must be 0)"),
    ]


def _register_lines() -> list[str]:
    lines = ["/* control registers: AXI4-Lite subordinate s_axil, 32-bit, byte offsets */"]
    lines += [_define(f"REG_{c_identifier(r.name)}", f"0x{r.offset:02x}",
                      f"{r.access.value}: {r.doc}".replace("*/", "* /"))
              for r in REGISTERS]
    lines += [_define(f"STATUS_{flag.name}", f"0x{int(flag):x}") for flag in Status]
    return lines


def _layout_lines(layout: DramLayout, role: str, name: str) -> list[str]:
    shape = ", ".join(map(str, layout.stored_shape))
    return [
        f"/* {role}: {layout.describe()} */",
        _define(f"{name}_BASE", f"0x{layout.base:x}u", "byte offset in the DRAM image"),
        _define(f"{name}_BYTES", layout.nbytes),
        _define(f"{name}_ELEM_BYTES", layout.elem_bytes),
        _define(f"{name}_RANK", len(layout.stored_shape)),
        _define(f"{name}_SHAPE", f"{{{shape}}}", "as stored, outermost first"),
    ]


def _program_lines(program: Program) -> list[str]:
    workload = program.workload
    lines = [
        f"/* program: {workload} */",
        _define("IMAGE_BYTES", program.dram_bytes, "the DRAM image, program included"),
        _define("INSN_ADDR", f"0x{program.instruction_base:x}u", "value for REG_INSN_ADDR"),
        _define("INSN_COUNT", len(program.instructions), "value for REG_INSN_COUNT"),
        _define("OUTPUT_BASE", f"0x{program.output.base:x}u", "the region the program writes"),
        _define("OUTPUT_BYTES", program.output.nbytes),
        "",
    ]
    if program.params is not None:  # the output stage: in_bits outputs, parameters loaded
        lines[-1:-1] = [
            _define("OUTPUT_ELEM_BYTES", program.output.elem_bytes, "requantized by STOREs"),
            _define("OUTPUT_PARAMS_BASE", f"0x{program.params.base:x}u",
                    "bias/multiplier/shift lines the program LOADs"),
            _define("OUTPUT_PARAMS_BYTES", len(program.params.data)),
        ]
    roles = [(layout, "operand") for layout in program.operands]
    roles += [(program.output, "output (device layout)")]
    roles += [(layout, "host-epilogue input") for layout in program.extras]
    names: set[str] = set()
    for layout, role in roles:
        name = f"TENSOR_{c_identifier(layout.tensor)}"
        while name in names:  # a tensor with two regions
            name += "_"
        names.add(name)
        lines += [*_layout_lines(layout, role, name), ""]
    return lines


def accelerator_header(program: Program, guard: str = "TENSORFORGE_PARAMS_H") -> str:
    """The header text for ``program`` and the accelerator it was compiled for."""
    body = [
        "/* Generated by `tensorforge compile --out`: do not edit. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stdint.h>",
        "",
        *_accelerator_lines(program),
        "",
        *_register_lines(),
        "",
        *_program_lines(program),
        f"#endif /* {guard} */",
    ]
    return "\n".join(body) + "\n"
