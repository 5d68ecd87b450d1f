"""Port signatures shared by the hardware blocks, all derived from `AcceleratorConfig`.

The compute unit and the DMA talk to the scratchpad and the accumulator buffer through
*request/response streams* (``amaranth.lib.stream``), so a memory may take as long as it needs:
a bank conflict simply holds ``ready`` low. Responses come back in request order, one per
request. Signatures are written from the requester's side (``req`` out, ``resp`` in); the
memory uses ``.flip()``.

Instruction payloads are `amaranth.lib.data.StructLayout`s built from `tensorforge.isa.FORMATS`,
so the decoder cannot disagree with the compiler's encoder.
"""

from __future__ import annotations

from amaranth import signed, unsigned
from amaranth.hdl import ShapeCastable
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tensorforge import isa
from tensorforge.config import MAX_ACC_LINES, MAX_SPAD_LINES, AcceleratorConfig

SPAD_ADDR_BITS = (MAX_SPAD_LINES - 1).bit_length()
ACC_ADDR_BITS = (MAX_ACC_LINES - 1).bit_length()


def spad_line_layout(config: AcceleratorConfig) -> data.ArrayLayout:
    """One scratchpad line: ``spad_line_elems`` signed operands."""
    return data.ArrayLayout(signed(config.precision.in_bits), config.spad_line_elems)


def acc_line_layout(config: AcceleratorConfig) -> data.ArrayLayout:
    """One accumulator line: ``acc_line_elems`` signed accumulators."""
    return data.ArrayLayout(signed(config.precision.acc_bits), config.acc_line_elems)


def instruction_layout(opcode: isa.Opcode, output_pipeline: bool = False) -> data.StructLayout:
    """The fields of one instruction format as a struct, packed exactly as `isa` encodes them.

    ``Signal(instruction_layout(op))`` can be assigned the low bits of a fetched 128-bit word.
    The fields of `isa.OUTPUT_PIPELINE_FIELDS` are left out unless ``output_pipeline``, and
    those of `isa.REPEAT_FIELDS` (the controller's, after them: the last of their format)
    always: a unit decodes exactly what it did before either existed.
    """
    skipped = ((() if output_pipeline else isa.OUTPUT_PIPELINE_FIELDS.get(opcode, ()))
               + isa.REPEAT_FIELDS.get(opcode, ()))
    return data.StructLayout({f.name: unsigned(f.bits) for f in isa.FORMATS[opcode]
                              if f.name not in skipped})


class ReadPort(wiring.Signature):
    """Read lines: send an address on ``req``, receive the line on ``resp`` (in order)."""

    def __init__(self, addr_bits: int, line: ShapeCastable) -> None:
        super().__init__(
            {
                "req": Out(stream.Signature(unsigned(addr_bits))),
                "resp": In(stream.Signature(line)),
            }
        )


class WritePort(wiring.Signature):
    """Write lines: ``req`` carries the address, the line and a per-element write mask."""

    def __init__(self, addr_bits: int, line: data.ArrayLayout) -> None:
        payload = data.StructLayout(
            {"addr": unsigned(addr_bits), "data": line, "mask": unsigned(line.length)}
        )
        super().__init__({"req": Out(stream.Signature(payload))})


def spad_read_port(config: AcceleratorConfig) -> ReadPort:
    return ReadPort(SPAD_ADDR_BITS, spad_line_layout(config))


def spad_write_port(config: AcceleratorConfig) -> WritePort:
    return WritePort(SPAD_ADDR_BITS, spad_line_layout(config))


def acc_read_port(config: AcceleratorConfig) -> ReadPort:
    return ReadPort(ACC_ADDR_BITS, acc_line_layout(config))


def acc_write_port(config: AcceleratorConfig) -> WritePort:
    return WritePort(ACC_ADDR_BITS, acc_line_layout(config))
