"""A layer's output stage on the device: bias, requantization and activation at STORE.

`OutputStage` names the per-channel parameters (`tensorforge.requant.OutputParams`) and the
workload's output index that is the channel, or no index: one set of parameters for the whole
tensor (per-tensor, a workload's requantized intermediate: `compiler.stage_chain`). The
code generator (`codegen.generate` with ``output=``) makes every STORE requantize
(`isa.Store.requant`) and write ``in_bits`` elements; `ParamBlocks` collects the parameter
blocks those STOREs need.

Which channel each stored element belongs to is read off the output's DRAM layout (the
channel number of every element, packed like the output), so any tensorize choice and tile
shape works: a STORE whose rows see the same channels lane by lane shares one block (the
channel runs along the accumulator line: one block per line's worth of channels); a STORE
whose rows each see one channel (the channel runs across lines) is ``per_row``, with a
block per ``acc_line_elems`` rows holding one row's channel per lane; anything else is cut
where its rows' channels change.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tensorforge.compiler.layout import DramLayout
from tensorforge.compiler.lowering import Lowering, fused_name
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import MappingError
from tensorforge.isa import FORMATS, Buffer, Opcode
from tensorforge.requant import PARAM_LINES, OutputParams, param_lines

_LIMITS = {f.name: (1 << f.bits) - 1 for f in FORMATS[Opcode.STORE]}
_MAX_ROWS, _MAX_STRIDE = _LIMITS["rows"], _LIMITS["stride"]


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class OutputStage:
    """Per-channel output parameters and the output index they run along (None: one
    channel, the whole tensor, so every STORE shares one parameter block)."""

    params: OutputParams
    channel: str | None

    def check(self, workload: Workload, config: AcceleratorConfig) -> None:
        if not config.output_pipeline:
            raise MappingError("an output stage needs an accelerator with the output pipeline "
                               "(AcceleratorConfig(output_pipeline=True), --output-pipeline)")
        if self.channel is not None and self.channel not in workload.output.indices:
            raise MappingError(f"output stage channel {self.channel!r} is not an index of "
                               f"{workload.output} ({', '.join(workload.output.indices)})")
        size = self.channels(workload)
        if self.params.channels != size:
            raise MappingError(f"the output stage has {self.params.channels} channels, "
                               f"{self.channel or 'a per-tensor stage'} has {size}")
        self.params.check(config.precision.in_bits, config.precision.acc_bits)

    def channels(self, workload: Workload) -> int:
        """How many parameter sets the stage has on ``workload``."""
        return 1 if self.channel is None else workload.sizes[self.channel]

    def apply(self, result: np.ndarray, workload: Workload, acc_bits: int) -> np.ndarray:
        """The reference: the workload's exact output through the output stage."""
        if self.channel is None:
            return self.params.apply(np.asarray(result)[None], 0, acc_bits)[0]
        axis = workload.output.indices.index(self.channel)
        return self.params.apply(result, axis, acc_bits)


def device_channels(lowering: Lowering, channel: str | None) -> np.ndarray:
    """The channel number of every element of the device stage's output (its shape; all 0
    for a per-tensor stage, ``channel`` None)."""
    workload = lowering.workload
    if len(lowering.stages) != 1:
        raise MappingError(f"{workload.name} finishes on the host ({len(lowering.stages) - 1} "
                           "later stage(s)); the output stage needs the device's result to be "
                           "the workload's output (a multi-stage workload runs every stage "
                           "on the device as a chain: compiler.stage_chain)")
    if channel is None:
        device = lowering.device
        return np.zeros(device.shapes[device.output.tensor], dtype=np.int64)
    shape = workload.shapes[workload.output.tensor]
    axis = workload.output.indices.index(channel)
    view = [1] * len(shape)
    view[axis] = shape[axis]
    user = np.broadcast_to(np.arange(shape[axis]).reshape(view), shape)
    if not lowering.groups:
        return np.ascontiguousarray(user)
    groups = [next(g for g in lowering.groups if fused_name(g) == d.indices[0])
              for d in lowering.fused.output.dims]
    members = [i for g in groups for i in g]
    wanted = [members.index(i) for i in workload.output.indices]
    device = user.transpose(np.argsort(wanted))
    return np.ascontiguousarray(device).reshape(lowering.device.shapes[lowering.device.output
                                                                         .tensor])


@dataclass
class ParamBlocks:
    """The parameter blocks a program's STOREs use, keyed by their lanes' channels.

    ``element_channels`` is the channel of each element of the output region (-1: padding,
    a lane nothing reads), by element offset from the region's base.
    """

    stage: OutputStage
    element_channels: np.ndarray
    first_line: int  # accumulator line of the first block
    config: AcceleratorConfig
    blocks: list[list[int]] = field(default_factory=list)  # each block's lane channels
    frozen: bool = False  # the image is built: blocks no longer change
    known: dict[tuple[int, ...], int] = field(default_factory=dict)  # channels -> a block
    sequences: dict[tuple[int, ...], int] = field(default_factory=dict)  # per-row STOREs

    @classmethod
    def for_output(cls, stage: OutputStage, lowering: Lowering, output: DramLayout,
                   first_line: int, config: AcceleratorConfig) -> ParamBlocks:
        device = lowering.device
        access = device.output
        channels = device_channels(lowering, stage.channel) + 1  # 0: padding
        packed = replace(output, base=0, elem_bytes=8).pack(channels, access, device.sizes)
        return cls(stage, np.frombuffer(packed, dtype="<i8") - 1, first_line, config)

    def row_channels(self, address: int, row_len: int) -> tuple[int, ...]:
        """The channels of the ``row_len`` elements from element offset ``address``."""
        return tuple(int(c) for c in self.element_channels[address:address + row_len])

    def line_of(self, channels: tuple[int, ...]) -> int:
        """The first accumulator line of a block whose lanes hold ``channels`` (-1: any).

        Before the image is built, a block that agrees on every lane both use takes the
        row's channels into its free lanes (padding lanes do not cost a block of their own);
        after, the first block that covers the row is used."""
        if channels in self.known:  # blocks only ever fill free lanes: it still covers them
            return self.first_line + self.known[channels] * PARAM_LINES
        line = self._find(channels)
        self.known[channels] = (line - self.first_line) // PARAM_LINES
        return line

    def _find(self, channels: tuple[int, ...]) -> int:
        for number, block in enumerate(self.blocks):
            covers = all(c < 0 or b == c for b, c in zip(block, channels, strict=False))
            agrees = all(c < 0 or b < 0 or b == c for b, c in zip(block, channels, strict=False))
            if covers or (agrees and not self.frozen):
                for lane, c in enumerate(channels):
                    if c >= 0:
                        block[lane] = c
                return self.first_line + number * PARAM_LINES
        if self.frozen:
            raise MappingError(f"no output parameter block holds channels {channels}")
        self.blocks.append(list(channels) + [-1] * (self.config.acc_line_elems - len(channels)))
        return self.first_line + (len(self.blocks) - 1) * PARAM_LINES

    def sequence_line(self, row_channels: tuple[int, ...]) -> int:
        """The first line of consecutive blocks whose lane ``j`` of block ``b`` holds the
        channel of row ``b * acc_line_elems + j`` (a ``per_row`` STORE's blocks)."""
        if row_channels not in self.sequences:
            if self.frozen:
                raise MappingError(f"no output parameter blocks for rows of {row_channels}")
            lanes = self.config.acc_line_elems
            self.sequences[row_channels] = len(self.blocks)
            for start in range(0, len(row_channels), lanes):
                block = list(row_channels[start:start + lanes])
                self.blocks.append(block + [-1] * (lanes - len(block)))
        return self.first_line + self.sequences[row_channels] * PARAM_LINES

    def store_groups(self, address: int, rows: int, row_len: int, stride: int
                     ) -> list[tuple[int, int, dict]]:
        """``(first row, rows, STORE fields)`` of a STORE run whose rows start at element
        ``address`` (then every ``stride``): ``per_row`` STOREs where each row sees one
        channel and they differ, else the run cut where its rows' channels change."""
        keys = [self.row_channels(address + r * stride, row_len) for r in range(rows)]
        singles = [_single_channel(key) for key in keys]
        if (rows > 1 and None not in singles and len(set(singles) - {-1}) > 1
                and 0 <= stride <= _MAX_STRIDE):
            lanes = self.config.acc_line_elems
            chunk = _MAX_ROWS // lanes * lanes  # each STORE starts at a block
            return [(start, min(chunk, rows - start),
                     {"requant": True, "per_row": True,
                      "params": self.sequence_line(tuple(singles[start:start + chunk]))})
                    for start in range(0, rows, chunk)]
        groups: list[tuple[int, int, dict]] = []
        for r, key in enumerate(keys):
            line = self.line_of(key)
            if groups and groups[-1][2]["params"] == line:
                groups[-1] = (groups[-1][0], groups[-1][1] + 1, groups[-1][2])
            else:
                groups.append((r, 1, {"requant": True, "params": line}))
        return groups

    def for_tile(self, tile: int) -> ParamBlocks:
        """The blocks output tile ``tile``'s STOREs use: all of them, here."""
        return self

    def slot(self, tile: int) -> None:
        """No parameter slot a COMPUTE waits for: the blocks are LOADed before anything."""

    def transfer_before(self, tile: int) -> int | None:
        """The `ParamRegion` transfer LOADed ahead of tile ``tile``: the one, at the start."""
        return 0 if tile == 0 else None

    def region(self, base: int) -> ParamRegion:
        return ParamRegion.of(self, base)

    @property
    def lines(self) -> int:
        return len(self.blocks) * PARAM_LINES

    @property
    def fits(self) -> bool:
        return self.first_line + self.lines <= self.config.acc_lines

    def check_room(self) -> None:
        end = self.first_line + self.lines
        if end > self.config.acc_lines:
            raise ParamRoomError(
                self.lines,
                f"the output stage's {len(self.blocks)} parameter block(s) need accumulator "
                f"lines {self.first_line}..{end - 1}, past its {self.config.acc_lines}; choose "
                "smaller output tiles or a larger accumulator")

    def image(self) -> np.ndarray:
        """The blocks' lines, in order (``lines x acc_line_elems``), as LOADed."""
        precision, width = self.config.precision, self.config.acc_line_elems
        self.frozen = True
        rows = [param_lines(self.stage.params, np.array(block, dtype=np.int64),
                            precision.in_bits, precision.acc_bits) for block in self.blocks]
        return np.concatenate(rows) if rows else np.zeros((0, width), dtype=np.int64)


class ParamRoomError(MappingError):
    """The parameter blocks do not fit beside the C tiles; ``lines`` is what they need."""

    def __init__(self, lines: int, message: str) -> None:
        super().__init__(message)
        self.lines = lines


def first_reserve(channels: int, config: AcceleratorConfig) -> int:
    """Accumulator lines to map a layer of ``channels`` output channels with, before its
    blocks are known: a block per line's worth of channels, all LOADed at the start; where
    those leave no room for a C block, a quarter of the accumulator, for blocks reloaded
    per output tile (`param_reload`; the caller maps again with what they need)."""
    whole = PARAM_LINES * -(-channels // config.acc_line_elems)
    if whole <= config.acc_lines - config.blocks["C"].lines:
        return whole
    return config.acc_lines // 4


def reserve_accumulator(config: AcceleratorConfig, lines: int) -> AcceleratorConfig:
    """``config`` with ``lines`` fewer accumulator lines: a mapper given it leaves them free
    for the parameter blocks (its tiles fit the real accumulator too)."""
    if lines <= 0:
        return config
    smaller = config.scratchpad.accumulator - lines * config.acc_line_bytes
    if smaller < config.blocks["C"].lines * config.acc_line_bytes:
        raise MappingError(f"the output stage's {lines} parameter lines leave no room for a C "
                           f"block in the {config.acc_lines}-line accumulator; use a larger "
                           "accumulator")
    return replace(config, scratchpad=replace(config.scratchpad,
                                              accumulator=type(config.scratchpad.accumulator)(
                                                  smaller)))


@dataclass(frozen=True)
class ParamRegion:
    """The parameter lines' DRAM region (``acc_bytes`` elements) and its transfers: each
    ``(accumulator line, first line of the region, lines)`` is LOADed as one set, the first
    at program start (the only one where all blocks fit: `ParamBlocks`), the others ahead of
    the output tile that needs them (`tensorforge.compiler.param_reload`)."""

    base: int
    data: bytes
    transfers: tuple[tuple[int, int, int], ...]
    line_elems: int
    elem_bytes: int

    @classmethod
    def of(cls, blocks: ParamBlocks, base: int) -> ParamRegion:
        """The region at ``base`` of ``blocks`` (whose image is then fixed), one transfer."""
        return cls.of_image(blocks.image(), base, ((blocks.first_line, 0, blocks.lines),),
                            blocks.config)

    @classmethod
    def of_image(cls, image: np.ndarray, base: int, transfers: tuple[tuple[int, int, int], ...],
                 config: AcceleratorConfig) -> ParamRegion:
        data = np.ascontiguousarray(image).astype(f"<i{config.precision.acc_bytes}").tobytes()
        return cls(base, data, transfers, config.acc_line_elems, config.precision.acc_bytes)

    @property
    def end(self) -> int:
        return self.base + len(self.data)

    def loads(self, transfer: int = 0) -> list[dict]:
        """The fields of the LOADs (into the accumulator) that bring transfer ``transfer``'s
        lines in."""
        width = self.line_elems
        accumulator_line, first, lines = self.transfers[transfer]
        fields = []
        for start in range(0, lines, _MAX_ROWS):
            rows = min(_MAX_ROWS, lines - start)
            fields.append({"buffer": Buffer.ACC, "line": accumulator_line + start,
                           "dram_addr": self.base + (first + start) * width * self.elem_bytes,
                           "rows": rows, "row_len": width, "stride": width if rows > 1 else 0})
        return fields


def _single_channel(channels: tuple[int, ...]) -> int | None:
    """The one channel a row's elements belong to (-1: all padding), None if several."""
    used = {c for c in channels if c >= 0}
    return -1 if not used else used.pop() if len(used) == 1 else None
