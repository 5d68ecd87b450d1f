"""The task ISA (after VTA): LOAD, COMPUTE, STORE and FINISH, 128 bits each.

This module is the single source of truth for instruction formats: the compiler encodes with
`encode`, the hardware decoder builds its `amaranth.lib.data` layouts from `FORMATS`
(``tensorforge.hw``), and ``docs/isa.md`` is printed by `markdown()`.

Three units run concurrently (load, compute, store). Each instruction carries four dependency
flags; the units exchange *tokens* through four queues exactly as in VTA:

* ``push_next``: after finishing, send a token to the next unit (load→compute, compute→store);
* ``push_prev``: after finishing, send a token to the previous unit (compute→load, store→compute);
* ``pop_prev``: before starting, wait for a token from the previous unit;
* ``pop_next``: before starting, wait for a token from the next unit.

LOAD has no previous unit and STORE no next unit; setting those flags is an encoding error.

Semantics (``line`` addresses count scratchpad/accumulator lines, see `tensorforge.intrinsics`):

* ``LOAD``: for each row ``r < rows``: line ``line + pad_before + r`` receives ``row_len``
  elements read from DRAM at byte ``dram_addr + r * stride * elem_bytes``, zero-filled past
  ``row_len``; also ``pad_before`` zero lines before and ``pad_after`` zero lines after.
  ``buffer`` selects the operand scratchpad (``in_bits`` elements) or the accumulator
  (``acc_bits`` elements, e.g. a bias or a partial sum).
* ``STORE``: for each row ``r < rows``: the first ``row_len`` elements of accumulator line
  ``line + r`` are written to DRAM at byte ``dram_addr + r * stride * acc_bytes``.
  With ``requant`` set (only on an accelerator built with ``output_pipeline``; zero
  otherwise, so programs for other accelerators encode as before) each element instead goes
  through the *output pipeline* and is written as an ``in_bits`` element, at byte
  ``dram_addr + r * stride * in_bytes``: lane ``e`` is biased, requantized (integer
  multiplier, rounding right shift), offset by the output zero point and clamped (the
  activation) with the parameters in lane ``e`` of the three accumulator lines from
  ``params`` (bias, multiplier, packed shift/zero point/low/high: `tensorforge.requant` is
  the bit-exact reference). The STORE reads those lines before its rows. With ``per_row``
  (the channel runs across lines) row ``r`` instead takes lane ``r mod line_elems`` of the
  block at ``params + 3 * (r div line_elems)`` for all its elements, the next block read
  every ``line_elems`` rows.
  Why on the STORE path (as Gemmini scales and clamps on the way out) and not a VTA-like ALU
  instruction: the accumulator is read once for the store anyway, so requantizing there
  costs no pass over the accumulator, no compute-unit cycles and no new opcode (the 2-bit
  opcode has no room left), and int8 leaves the chip at once; the parameters are ordinary
  LOADs into the accumulator. An ALU would also serve pooling and residual adds, which this
  does not (yet) do.
* ``repeat`` (LOAD and STORE, only on an accelerator built with ``controller.repeat``; zero
  otherwise): the instruction runs ``repeat + 1`` times, as that many instructions would one
  after the other. Run ``n`` starts at line ``line + n * lines`` (``lines``: the lines one run
  writes or reads, ``pad_before + rows + pad_after`` for a LOAD, ``rows`` for a STORE) and at
  DRAM byte ``dram_addr + n * repeat_stride * stride * elem_bytes`` (``elem_bytes`` as for
  ``stride``: the runs are ``repeat_stride`` rows apart, e.g. an image row of pixels),
  with everything else the same. Only the first run waits for tokens and only the last sends
  them. So a tile of several image rows (a convolution's input window, a C tile of several
  output rows) is one instruction instead of one per row: the controller expands it
  (`tensorforge.isa.expand`), and fewer instructions cost fewer fetched bytes.
* ``COMPUTE``: the affine micro-loop ``for o < outer: for i < inner:`` runs one intrinsic
  step with blocks at ``acc_base + o*acc_outer + i*acc_inner`` (accumulator) and
  ``a_base + o*a_outer + i*a_inner``, ``b_base + o*b_outer + i*b_inner`` (scratchpad).
  ``mode`` MAC accumulates the intrinsic into C; ZERO clears the C block instead.
  ``overwrite`` (MAC only) replaces a ZERO: step ``(o, i)`` *writes* the intrinsic's result
  into its C block instead of adding it (the old lines are not read) when
  ``(i == 0 or acc_inner != 0) and (o == 0 or acc_outer != 0)``, so a loop whose C step is 0
  (a reduction) overwrites on its first iteration and accumulates on the others. An
  overwriting step must not touch a C line an earlier step of the same instruction wrote (the
  simulator rejects it), so the overwriting steps are exactly the instruction's first visit
  of each C block they name, and the result does not depend on how the array groups steps
  that stay on one C block. The compiler sets it on the instructions that first visit a C
  tile's blocks, instead of a ZERO of the tile.
  ``reduce`` (MAC only, a ZERO ignores it; and only on an accelerator built with
  ``output_pipeline``: zero otherwise, so programs for other accelerators encode as before)
  says how a step combines the intrinsic's result ``P`` (its products summed, as for ADD)
  with its C block: ADD writes ``C + P``, MAX writes ``max(C, P)`` lane by lane (an
  overwriting step writes ``P`` either way, so the first tap initializes C). Max pooling is
  MAX with an all-ones B and the intrinsic's reduction index at size 1 (the compiler pads
  it), so ``P`` is one A element. Why the max sits where C is written back (beside the
  compute unit's adder) and not in the PEs: the writer already sees each output once per
  step on every dataflow whose PEs hand their outputs out every step (``ws``, ``is``);
  ``os``, whose PEs keep summing over steps, cannot run it. Why a field and not a third
  ``mode``: the 1-bit ``mode`` field has no room, and widening it would move every later
  field, and with them every decoder.
* ``FINISH``: waits until all units are idle, then raises ``done``.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import ClassVar

from tensorforge.errors import ConfigError

INSTRUCTION_BITS = 128
INSTRUCTION_BYTES = INSTRUCTION_BITS // 8


class Opcode(enum.IntEnum):
    LOAD = 0
    STORE = 1
    COMPUTE = 2
    FINISH = 3


class Buffer(enum.IntEnum):
    SPAD = 0  # operand scratchpad, in_bits elements
    ACC = 1  # accumulator buffer, acc_bits elements


class ComputeMode(enum.IntEnum):
    MAC = 0  # C += intrinsic(A, B) (or max(C, intrinsic(A, B)), see Reduction)
    ZERO = 1  # C = 0


class Reduction(enum.IntEnum):
    ADD = 0  # C + intrinsic(A, B)
    MAX = 1  # max(C, intrinsic(A, B)), lane by lane (output_pipeline accelerators only)


@dataclass(frozen=True)
class Field:
    name: str
    bits: int
    doc: str


HEADER: tuple[Field, ...] = (
    Field("opcode", 2, "LOAD=0, STORE=1, COMPUTE=2, FINISH=3"),
    Field("pop_prev", 1, "wait for a token from the previous unit before starting"),
    Field("pop_next", 1, "wait for a token from the next unit before starting"),
    Field("push_prev", 1, "send a token to the previous unit when done"),
    Field("push_next", 1, "send a token to the next unit when done"),
)

_DRAM_TILE: tuple[Field, ...] = (
    Field("line", 14, "first scratchpad/accumulator line"),
    Field("dram_addr", 32, "DRAM byte address of the first element"),
    Field("rows", 12, "tile rows (one line each)"),
    Field("row_len", 12, "elements per row"),
    Field("stride", 20, "DRAM distance between rows, in elements"),
)

FORMATS: dict[Opcode, tuple[Field, ...]] = {
    Opcode.LOAD: HEADER
    + (Field("buffer", 1, "SPAD=0 (operands) or ACC=1 (accumulators)"),)
    + _DRAM_TILE
    + (
        Field("pad_before", 6, "zero lines written before the tile"),
        Field("pad_after", 6, "zero lines written after the tile"),
        Field("repeat", 6, "run the LOAD this many more times (controller.repeat only)"),
        Field("repeat_stride", 13, "DRAM distance between runs, in rows (of stride)"),
    ),
    Opcode.STORE: HEADER
    + _DRAM_TILE
    + (
        Field("requant", 1, "output pipeline: requantize and store in_bits elements "
              "(output_pipeline accelerators only)"),
        Field("params", 14, "requant: first of the 3 accumulator lines of output parameters"),
        Field("per_row", 1, "requant: row r takes lane r mod line_elems of block "
              "params + 3 * (r div line_elems) for all its elements"),
        Field("repeat", 6, "run the STORE this many more times (controller.repeat only)"),
        Field("repeat_stride", 10, "DRAM distance between runs, in rows (of stride)"),
    ),
    Opcode.COMPUTE: HEADER
    + (
        Field("mode", 1, "MAC=0 (accumulate) or ZERO=1 (clear the C blocks)"),
        Field("outer", 11, "outer micro-loop extent"),
        Field("inner", 11, "inner micro-loop extent"),
        Field("acc_base", 14, "first accumulator line of the C block"),
        Field("a_base", 14, "first scratchpad line of the A block"),
        Field("b_base", 14, "first scratchpad line of the B block"),
        Field("acc_outer", 9, "C line step per outer iteration"),
        Field("acc_inner", 9, "C line step per inner iteration"),
        Field("a_outer", 9, "A line step per outer iteration"),
        Field("a_inner", 9, "A line step per inner iteration"),
        Field("b_outer", 9, "B line step per outer iteration"),
        Field("b_inner", 9, "B line step per inner iteration"),
        Field("overwrite", 1, "MAC: the first step on each C block writes it instead of "
              "accumulating (see above)"),
        Field("reduce", 1, "MAC: ADD=0 (C + P) or MAX=1 (max(C, P)) "
              "(output_pipeline accelerators only)"),
    ),
    Opcode.FINISH: HEADER,
}

#: Fields only an accelerator built with ``output_pipeline`` decodes; they must be zero for
#: the others, whose decoders (and generated Verilog) leave them out.
OUTPUT_PIPELINE_FIELDS: dict[Opcode, tuple[str, ...]] = {
    Opcode.STORE: ("requant", "params", "per_row"), Opcode.COMPUTE: ("reduce",)}

#: Fields the controller consumes itself (it expands the instruction into ``repeat + 1``
#: runs, `expand`): no unit decodes them, and they must be zero for an accelerator built
#: without ``controller.repeat``.
REPEAT_FIELDS: dict[Opcode, tuple[str, ...]] = {
    Opcode.LOAD: ("repeat", "repeat_stride"), Opcode.STORE: ("repeat", "repeat_stride")}

for _opcode, _format in FORMATS.items():
    if sum(f.bits for f in _format) > INSTRUCTION_BITS:  # a bug in the definition above
        raise RuntimeError(f"{_opcode.name} format is wider than {INSTRUCTION_BITS} bits")


@functools.cache
def field_offsets(opcode: Opcode) -> dict[str, tuple[int, int]]:
    """``{field: (lsb, bits)}`` for one format, packed from bit 0 upwards (cached: hot path;
    callers must not mutate the returned dict)."""
    offsets, lsb = {}, 0
    for f in FORMATS[opcode]:
        offsets[f.name] = (lsb, f.bits)
        lsb += f.bits
    return offsets


def _show(value: object) -> str:
    return value.name if isinstance(value, enum.Enum) else hex(value) if isinstance(
        value, int
    ) and value >= 4096 else str(value)


@dataclass(frozen=True)
class Instruction:
    """Base of the four instruction kinds; fields mirror `FORMATS`."""

    opcode: ClassVar[Opcode]
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    def __post_init__(self) -> None:
        for name, (_, bits) in field_offsets(self.opcode).items():
            if name == "opcode":
                continue
            value = int(getattr(self, name))
            if not 0 <= value < (1 << bits):
                raise ConfigError(
                    f"{self.opcode.name}.{name} = {value} does not fit its {bits}-bit field "
                    f"(0..{(1 << bits) - 1}); split the instruction"
                )
        if self.opcode is Opcode.LOAD and (self.pop_prev or self.push_prev):
            raise ConfigError("LOAD has no previous unit: pop_prev/push_prev must be 0")
        if self.opcode is Opcode.STORE and (self.pop_next or self.push_next):
            raise ConfigError("STORE has no next unit: pop_next/push_next must be 0")

    def encode(self) -> int:
        word = 0
        for name, (lsb, _) in field_offsets(self.opcode).items():
            value = int(self.opcode) if name == "opcode" else int(getattr(self, name))
            word |= value << lsb
        return word

    def to_bytes(self) -> bytes:
        return self.encode().to_bytes(INSTRUCTION_BYTES, "little")

    def describe(self) -> str:
        """Assembly-like text, e.g. ``LOAD  spad line=0 dram=0x100 rows=8 ...``."""
        flags = "".join(
            tag
            for tag, on in (
                ("<p", self.pop_prev),
                ("<n", self.pop_next),
                (">p", self.push_prev),
                (">n", self.push_next),
            )
            if on
        )
        body = " ".join(
            f"{f.name}={_show(getattr(self, f.name))}"
            for f in fields(self)
            if f.name not in {"pop_prev", "pop_next", "push_prev", "push_next"}
            # pipeline fields only where set: other programs read as they always did
            and ((f.name not in OUTPUT_PIPELINE_FIELDS.get(self.opcode, ())
                  and f.name not in REPEAT_FIELDS.get(self.opcode, ()))
                 or getattr(self, f.name))
        )
        return f"{self.opcode.name:<7} {body} {flags}".rstrip()


@dataclass(frozen=True)
class Load(Instruction):
    opcode: ClassVar[Opcode] = Opcode.LOAD
    buffer: Buffer = Buffer.SPAD
    line: int = 0
    dram_addr: int = 0
    rows: int = 0
    row_len: int = 0
    stride: int = 0
    pad_before: int = 0
    pad_after: int = 0
    repeat: int = 0
    repeat_stride: int = 0

    def run_lines(self) -> int:
        """Lines one run of the instruction writes (`expand`)."""
        return self.pad_before + self.rows + self.pad_after


@dataclass(frozen=True)
class Store(Instruction):
    opcode: ClassVar[Opcode] = Opcode.STORE
    line: int = 0
    dram_addr: int = 0
    rows: int = 0
    row_len: int = 0
    stride: int = 0
    requant: bool = False
    params: int = 0
    per_row: bool = False
    repeat: int = 0
    repeat_stride: int = 0

    def run_lines(self) -> int:
        """Lines one run of the instruction reads (`expand`)."""
        return self.rows


@dataclass(frozen=True)
class Compute(Instruction):
    opcode: ClassVar[Opcode] = Opcode.COMPUTE
    mode: ComputeMode = ComputeMode.MAC
    outer: int = 1
    inner: int = 1
    acc_base: int = 0
    a_base: int = 0
    b_base: int = 0
    acc_outer: int = 0
    acc_inner: int = 0
    a_outer: int = 0
    a_inner: int = 0
    b_outer: int = 0
    b_inner: int = 0
    overwrite: bool = False
    reduce: Reduction = Reduction.ADD

    def overwrites(self, outer_index: int, inner_index: int) -> bool:
        """Whether MAC step ``(o, i)`` writes its C block instead of accumulating into it
        (the ``overwrite`` rule of the module docstring; the simulator and compiler share it)."""
        return (self.overwrite and self.mode is ComputeMode.MAC
                and (inner_index == 0 or self.acc_inner != 0)
                and (outer_index == 0 or self.acc_outer != 0))


@dataclass(frozen=True)
class Finish(Instruction):
    opcode: ClassVar[Opcode] = Opcode.FINISH


INSTRUCTION_TYPES: dict[Opcode, type[Instruction]] = {
    Opcode.LOAD: Load,
    Opcode.STORE: Store,
    Opcode.COMPUTE: Compute,
    Opcode.FINISH: Finish,
}

_ENUM_FIELDS = {"buffer": Buffer, "mode": ComputeMode, "reduce": Reduction}
_FLAG_FIELDS = {"pop_prev", "pop_next", "push_prev", "push_next"}
_BOOL_FIELDS = _FLAG_FIELDS | {"overwrite", "requant", "per_row"}


def decode(word: int) -> Instruction:
    """The instruction encoded in the 128-bit integer ``word``."""
    opcode = Opcode(word & 0b11)
    values = {}
    for name, (lsb, bits) in field_offsets(opcode).items():
        if name == "opcode":
            continue
        value = (word >> lsb) & ((1 << bits) - 1)
        if name in _ENUM_FIELDS:
            value = _ENUM_FIELDS[name](value)
        elif name in _BOOL_FIELDS:
            value = bool(value)
        values[name] = value
    return INSTRUCTION_TYPES[opcode](**values)


def expand(instructions: Iterable[Instruction], in_bytes: int, acc_bytes: int
           ) -> list[Instruction]:
    """The program as the units see it: each LOAD or STORE with ``repeat`` replaced by its
    ``repeat + 1`` runs (the module docstring), the first run keeping the pops and the last
    the pushes, on an accelerator of ``in_bytes`` operand and ``acc_bytes`` accumulator
    elements. The simulators and cost models execute this, as the controller does."""
    runs: list[Instruction] = []
    for ins in instructions:
        repeat = getattr(ins, "repeat", 0)
        if not repeat:
            runs.append(ins)
            continue
        assert isinstance(ins, Load | Store)
        wide = ins.buffer is Buffer.ACC if isinstance(ins, Load) else not ins.requant
        step = ins.repeat_stride * ins.stride * (acc_bytes if wide else in_bytes)
        for n in range(repeat + 1):
            runs.append(replace(
                ins, line=ins.line + n * ins.run_lines(), dram_addr=ins.dram_addr + n * step,
                repeat=0, repeat_stride=0,
                pop_prev=ins.pop_prev and n == 0, pop_next=ins.pop_next and n == 0,
                push_prev=ins.push_prev and n == repeat,
                push_next=ins.push_next and n == repeat))
    return runs


def encode_program(instructions: list[Instruction]) -> bytes:
    """Little-endian 16-byte words, in program order, as the controller fetches them."""
    return b"".join(instruction.to_bytes() for instruction in instructions)


def decode_program(blob: bytes) -> list[Instruction]:
    if len(blob) % INSTRUCTION_BYTES:
        raise ConfigError(
            f"a program is a whole number of {INSTRUCTION_BYTES}-byte instructions; "
            f"this one has {len(blob)} bytes"
        )
    return [
        decode(int.from_bytes(blob[i : i + INSTRUCTION_BYTES], "little"))
        for i in range(0, len(blob), INSTRUCTION_BYTES)
    ]


def disassemble(blob_or_program: bytes | list[Instruction]) -> str:
    program = (
        decode_program(blob_or_program)
        if isinstance(blob_or_program, bytes | bytearray)
        else blob_or_program
    )
    return "\n".join(f"{pc:5d}  {ins.describe()}" for pc, ins in enumerate(program))


def markdown() -> str:
    """The ISA reference, ``docs/isa.md``, printed from `FORMATS` and this module's docstring."""
    lines = [
        "# tensorforge ISA",
        "",
        "Generated by `python -m tensorforge.isa > docs/isa.md` from `tensorforge/isa.py`; "
        "do not edit by hand.",
        "",
        f"Every instruction is {INSTRUCTION_BITS} bits, stored little-endian in DRAM "
        f"({INSTRUCTION_BYTES} bytes). Fields are packed from bit 0 upwards in the order listed.",
        "",
        "```text",
        (__doc__ or "").strip(),
        "```",
    ]
    for opcode, fmt in FORMATS.items():
        lines += ["", f"## {opcode.name} (opcode {int(opcode)})", ""]
        lines += ["| bits | field | width | meaning |", "|---|---|---|---|"]
        for name, (lsb, bits) in field_offsets(opcode).items():
            doc = next(f.doc for f in fmt if f.name == name)
            lines.append(f"| {lsb + bits - 1}:{lsb} | `{name}` | {bits} | {doc} |")
        used = sum(f.bits for f in fmt)
        lines.append(f"| {INSTRUCTION_BITS - 1}:{used} | reserved | "
                     f"{INSTRUCTION_BITS - used} | zero |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
