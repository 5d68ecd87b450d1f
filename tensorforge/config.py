"""`AcceleratorConfig`: the one description of an accelerator.

Hardware generation, the compiler, the simulators and the search all read this object, so the
hardware and the software that targets it cannot drift apart. It is HASCO's hardware primitives
(section V-A) as nested frozen dataclasses:

=================  ===========================================
primitive          field
=================  ===========================================
reshapeArray       ``array.rows`` x ``array.cols``
linkPEs            ``array.interconnect``
distributeCache    ``array.local_bytes`` (per PE)
addCache           ``scratchpad.capacity`` (and ``scratchpad.activations``, an on-chip
                   window of the DMA's address space that holds a network's activations)
partitionBanks     ``scratchpad.banks``
burstTransfer      ``dma.bus_bits``, ``dma.max_burst``, ``dma.outstanding``
=================  ===========================================

plus the controller's instruction queues (``controller.queue_depth``), the intrinsic, the
dataflow and the operand/accumulator widths. Every field is checked in ``__post_init__``; a
contradiction raises `ConfigError` naming the field and the reason.
Derived values (intrinsic sizes, line widths, line counts) are properties.
"""

from __future__ import annotations

import enum
import json
import math
import tomllib
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from tensorforge.errors import ConfigError
from tensorforge.intrinsics import BlockShape, Intrinsic, block_shapes, intrinsic_sizes
from tensorforge.units import Bytes

# Field widths of the ISA (tensorforge.isa) bound what a configuration may address.
MAX_SPAD_LINES = 1 << 14
MAX_ACC_LINES = 1 << 14
# The scratchpad a configuration gets when it names none, capped per array at what the ISA
# addresses (`AcceleratorConfig.default_spad_capacity`), so every legal array has a valid default.
DEFAULT_SPAD_CAPACITY = Bytes.kib(64)
# DMA byte address of the on-chip activation memory (`AcceleratorConfig.activation_window`):
# the top half of the 32-bit space, which no DRAM image of this stack reaches.
ACTIVATION_BASE = 1 << 31
MAX_ACTIVATION_BYTES = Bytes.kib(64 * 1024)
# Instructions each of the controller's unit queues holds: 4 is the calibrated hardware.
DEFAULT_QUEUE_DEPTH = 4
MAX_QUEUE_DEPTH = 1024


class Interconnect(enum.StrEnum):
    """linkPEs: how operands and partial sums move between PEs."""

    NONE = "none"  # no PE-to-PE data: operands broadcast/multicast from the buffers
    SYSTOLIC = "systolic"  # neighbour forwarding, skewed wavefronts
    FULL = "full"  # any-to-any through a crossbar, reductions through an adder tree


class Dataflow(enum.StrEnum):
    """Which operand stays in the PEs while the others stream."""

    WEIGHT_STATIONARY = "ws"
    OUTPUT_STATIONARY = "os"
    INPUT_STATIONARY = "is"


# The dataflows each intrinsic can use: DOT and GEMV have no operand reuse across the
# array except the accumulator (os) or the broadcast vector (ws for GEMV).
DATAFLOWS: dict[Intrinsic, tuple[Dataflow, ...]] = {
    Intrinsic.DOT: (Dataflow.OUTPUT_STATIONARY,),
    Intrinsic.GEMV: (Dataflow.OUTPUT_STATIONARY, Dataflow.WEIGHT_STATIONARY),
    Intrinsic.GEMM: (
        Dataflow.WEIGHT_STATIONARY,
        Dataflow.OUTPUT_STATIONARY,
        Dataflow.INPUT_STATIONARY,
    ),
    Intrinsic.CONV2D: (Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY),
}

BUS_WIDTHS = (32, 64, 128, 256, 512)
OPERAND_WIDTHS = (8, 16)
MAX_AXI_BURST = 256  # AXI4 INCR bursts: 1..256 beats
MAX_OUTSTANDING = 256  # bursts a DMA unit may keep in flight (a counter and a queue per unit)


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The TOML file at ``path`` as a dict; a ConfigError naming ``what`` when it is missing or
    not valid TOML (shared by every TOML input: configurations, design spaces)."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:  # a directory, no permission, binary
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ConfigError(f"{what} {str(path)!r} cannot be read: {reason}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{what} {path} is not valid TOML: {error}") from None


def _check_positive_int(owner: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{owner}.{name} must be a positive integer, not {value!r}")


def _coerce_enum(owner: str, name: str, enum_type: type[enum.Enum], value: Any) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in enum_type)
        raise ConfigError(f"{owner}.{name} must be one of {choices}, not {value!r}") from None


@dataclass(frozen=True)
class ArrayConfig:
    """The PE array: reshapeArray, linkPEs, distributeCache and the dataflow."""

    rows: int = 8
    cols: int = 8
    interconnect: Interconnect = Interconnect.SYSTOLIC
    dataflow: Dataflow = Dataflow.WEIGHT_STATIONARY
    local_bytes: Bytes = Bytes(0)

    def __post_init__(self) -> None:
        _check_positive_int("array", "rows", self.rows)
        _check_positive_int("array", "cols", self.cols)
        object.__setattr__(
            self,
            "interconnect",
            _coerce_enum("array", "interconnect", Interconnect, self.interconnect),
        )
        object.__setattr__(
            self, "dataflow", _coerce_enum("array", "dataflow", Dataflow, self.dataflow)
        )
        if isinstance(self.local_bytes, bool) or not isinstance(self.local_bytes, int):
            raise ConfigError(f"array.local_bytes must be a byte count, not {self.local_bytes!r}")
        if self.local_bytes < 0:
            raise ConfigError(f"array.local_bytes must be 0 or more, not {self.local_bytes}")
        object.__setattr__(self, "local_bytes", Bytes(self.local_bytes))

    @property
    def pes(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True)
class ScratchpadConfig:
    """addCache and partitionBanks: the shared operand scratchpad, and the accumulator buffer.

    ``capacity`` None asks for the default, which depends on the array's line width and so is
    filled in by `AcceleratorConfig`: a fixed 64 KiB would be more lines than the ISA addresses
    on narrow arrays (a 3x3 CONV2D array has 3 B lines).
    """

    capacity: Bytes | None = None
    banks: int = 4
    accumulator: Bytes = Bytes.kib(16)
    # on-chip memory behind the DMA at ACTIVATION_BASE; 0 (the calibrated hardware) is none
    activations: Bytes = Bytes(0)

    def __post_init__(self) -> None:
        _check_positive_int("scratchpad", "banks", self.banks)
        value = self.activations
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (
                value and (value & (value - 1) or value > MAX_ACTIVATION_BYTES)):
            raise ConfigError(
                f"scratchpad.activations must be 0 (none) or a power of two of bytes up to "
                f"{MAX_ACTIVATION_BYTES}, not {value!r}")
        object.__setattr__(self, "activations", Bytes(value))
        for name in ("capacity", "accumulator"):
            value = getattr(self, name)
            if value is None and name == "capacity":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"scratchpad.{name} must be a positive byte count, not {value!r}")
            object.__setattr__(self, name, Bytes(value))


@dataclass(frozen=True)
class DmaConfig:
    """burstTransfer: the AXI4 bus between DRAM and the scratchpad.

    ``outstanding`` is how many bursts each DMA unit keeps in flight: read bursts whose AR has
    gone out and whose last R beat has not come back (load unit), write bursts whose AW has
    gone out and whose B response has not come back (store unit). A DRAM of latency ``L``
    cycles keeps the bus busy only if ``outstanding`` bursts carry at least ``L`` beats.
    """

    bus_bits: int = 64
    max_burst: int = 16
    outstanding: int = 16

    def __post_init__(self) -> None:
        if self.bus_bits not in BUS_WIDTHS:
            raise ConfigError(
                f"dma.bus_bits must be one of {', '.join(map(str, BUS_WIDTHS))}, "
                f"not {self.bus_bits!r}"
            )
        if isinstance(self.max_burst, bool) or not isinstance(self.max_burst, int) or not (
            1 <= self.max_burst <= MAX_AXI_BURST
        ):
            raise ConfigError(
                f"dma.max_burst must be an AXI4 INCR burst length from 1 to {MAX_AXI_BURST}, "
                f"not {self.max_burst!r}"
            )
        if isinstance(self.outstanding, bool) or not isinstance(self.outstanding, int) or not (
            1 <= self.outstanding <= MAX_OUTSTANDING
        ):
            raise ConfigError(
                f"dma.outstanding must be a number of bursts in flight from 1 to "
                f"{MAX_OUTSTANDING}, not {self.outstanding!r}"
            )

    @property
    def bus_bytes(self) -> int:
        return self.bus_bits // 8


@dataclass(frozen=True)
class ControllerConfig:
    """The controller's instruction queues (`hw.controller.Controller`).

    Dispatch is in program order, one instruction a cycle, into one queue per unit (load,
    compute, store) of ``queue_depth`` instructions. A full queue holds dispatch back, so a
    deeper queue lets a C tile's STOREs wait in the store queue while the next step's LOADs
    and COMPUTEs are dispatched past them. A power of two, so the queues are whole memories.
    """

    queue_depth: int = DEFAULT_QUEUE_DEPTH
    #: LOAD and STORE carry a ``repeat`` count (`tensorforge.isa`): the controller expands one
    #: instruction into that many runs, so a tile of several rows costs one fetched
    #: instruction, not one per row. On by default (the calibrated hardware, docs/repeat.md);
    #: ``False`` builds the plain gates of earlier releases.
    repeat: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.repeat, bool):
            raise ConfigError(f"controller.repeat must be true or false, not {self.repeat!r}")
        depth = self.queue_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or not (
            2 <= depth <= MAX_QUEUE_DEPTH and depth & (depth - 1) == 0
        ):
            raise ConfigError(
                f"controller.queue_depth must be a power of two from 2 to {MAX_QUEUE_DEPTH} "
                f"(instructions queued per unit), not {depth!r}"
            )


@dataclass(frozen=True)
class PrecisionConfig:
    """Operand and accumulator widths (VTA-style int8 x int8 -> int32 by default)."""

    in_bits: int = 8
    acc_bits: int = 32

    def __post_init__(self) -> None:
        if self.in_bits not in OPERAND_WIDTHS:
            raise ConfigError(
                f"precision.in_bits must be one of {', '.join(map(str, OPERAND_WIDTHS))}, "
                f"not {self.in_bits!r}"
            )
        if self.acc_bits not in (32, 64) or self.acc_bits < 2 * self.in_bits:
            raise ConfigError(
                f"precision.acc_bits must be 32 or 64 and at least twice in_bits "
                f"({2 * self.in_bits}), not {self.acc_bits!r}"
            )

    @property
    def in_bytes(self) -> int:
        return self.in_bits // 8

    @property
    def acc_bytes(self) -> int:
        return self.acc_bits // 8


@dataclass(frozen=True)
class AcceleratorConfig:
    """One accelerator: intrinsic plus the HASCO primitives. See the module docstring."""

    intrinsic: Intrinsic = Intrinsic.GEMM
    array: ArrayConfig = field(default_factory=ArrayConfig)
    scratchpad: ScratchpadConfig = field(default_factory=ScratchpadConfig)
    dma: DmaConfig = field(default_factory=DmaConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    conv_taps: int = 3  # kernel width the CONV2D intrinsic slides along a row
    # STORE can requantize, clamp and store in_bits elements (`tensorforge.requant`); off is
    # the hardware the area/energy fits were calibrated on, and its Verilog is unchanged
    output_pipeline: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "intrinsic", _coerce_enum("config", "intrinsic", Intrinsic, self.intrinsic)
        )
        _check_positive_int("config", "conv_taps", self.conv_taps)
        if not isinstance(self.output_pipeline, bool):
            raise ConfigError(f"output_pipeline must be true or false, not "
                              f"{self.output_pipeline!r}")
        if self.output_pipeline and self.precision.acc_bits < 8 + 3 * self.precision.in_bits:
            raise ConfigError(
                f"output_pipeline packs a shift, zero point and clamp bounds into one "
                f"accumulator element: precision.acc_bits must be at least "
                f"{8 + 3 * self.precision.in_bits} for in_bits {self.precision.in_bits}, not "
                f"{self.precision.acc_bits}")
        allowed = DATAFLOWS[self.intrinsic]
        if self.array.dataflow not in allowed:
            raise ConfigError(
                f"array.dataflow {self.array.dataflow.value!r} does not apply to the "
                f"{self.intrinsic.value} intrinsic; use one of "
                f"{', '.join(d.value for d in allowed)}"
            )
        if (
            self.array.dataflow is Dataflow.INPUT_STATIONARY
            and self.array.rows != self.array.cols
        ):
            raise ConfigError(
                "array.dataflow 'is' (input-stationary) keeps an R x R input block in the "
                f"array and needs a square array, not {self.array.rows}x{self.array.cols}"
            )
        if self.intrinsic is Intrinsic.CONV2D and self.array.local_bytes < (
            self.conv_taps * self.precision.in_bytes
        ) and self.array.dataflow is Dataflow.WEIGHT_STATIONARY:
            raise ConfigError(
                f"the weight-stationary CONV2D intrinsic keeps {self.conv_taps} kernel taps in "
                f"each PE: array.local_bytes must be at least "
                f"{self.conv_taps * self.precision.in_bytes}, not {int(self.array.local_bytes)}"
            )
        if self.scratchpad.capacity is None:
            object.__setattr__(
                self,
                "scratchpad",
                replace(self.scratchpad, capacity=self.default_spad_capacity),
            )
        self._check_buffers_hold_a_step()

    def _check_buffers_hold_a_step(self) -> None:
        spad_lines_needed = self.blocks["A"].lines + self.blocks["B"].lines
        if self.spad_lines < spad_lines_needed or self.spad_lines < self.scratchpad.banks:
            need = max(spad_lines_needed, self.scratchpad.banks) * self.spad_line_bytes
            raise ConfigError(
                f"scratchpad.capacity {self.scratchpad.capacity} cannot hold one "
                f"{self.intrinsic.value} step ({spad_lines_needed} lines of "
                f"{self.spad_line_bytes} B across {self.scratchpad.banks} banks); "
                f"it needs at least {need} B"
            )
        if self.spad_lines > MAX_SPAD_LINES:
            raise ConfigError(
                f"scratchpad.capacity {self.scratchpad.capacity} is {self.spad_lines} lines of "
                f"{self.spad_line_bytes} B; the ISA addresses at most {MAX_SPAD_LINES} lines "
                f"(at most {MAX_SPAD_LINES * self.spad_line_bytes} B for this array)"
            )
        if self.acc_lines < self.blocks["C"].lines:
            raise ConfigError(
                f"scratchpad.accumulator {self.scratchpad.accumulator} cannot hold one "
                f"{self.intrinsic.value} output block ({self.blocks['C'].lines} lines of "
                f"{self.acc_line_bytes} B)"
            )
        if self.acc_lines > MAX_ACC_LINES:
            raise ConfigError(
                f"scratchpad.accumulator {self.scratchpad.accumulator} is {self.acc_lines} "
                f"lines; the ISA addresses at most {MAX_ACC_LINES}"
            )

    # --- derived values --------------------------------------------------------------------

    @cached_property
    def intrinsic_sizes(self) -> dict[str, int]:
        """Index sizes of the intrinsic on this array, e.g. ``{"i": 8, "k": 8, "j": 8}``."""
        return intrinsic_sizes(self.intrinsic, self.array.rows, self.array.cols, self.conv_taps)

    @cached_property
    def blocks(self) -> dict[str, BlockShape]:
        """Lines and elements of the A, B and C blocks of one intrinsic step."""
        return block_shapes(self.intrinsic, self.intrinsic_sizes)

    @property
    def macs_per_step(self) -> int:
        return math.prod(self.intrinsic_sizes.values())

    @property
    def spad_line_elems(self) -> int:
        """Operand elements per scratchpad line: the widest A or B line."""
        return max(self.blocks["A"].elems, self.blocks["B"].elems)

    @property
    def spad_line_bytes(self) -> int:
        return self.spad_line_elems * self.precision.in_bytes

    @property
    def default_spad_capacity(self) -> Bytes:
        """64 KiB, or as many whole lines as the ISA addresses when 64 KiB holds more."""
        return Bytes(min(DEFAULT_SPAD_CAPACITY, MAX_SPAD_LINES * self.spad_line_bytes))

    @property
    def activation_window(self) -> range:
        """DMA byte addresses served by the on-chip activation memory (empty when there is
        none): LOADs and STOREs there never reach DRAM."""
        return range(ACTIVATION_BASE, ACTIVATION_BASE + self.scratchpad.activations)

    @property
    def spad_lines(self) -> int:
        return self.scratchpad.capacity // self.spad_line_bytes

    @property
    def acc_line_elems(self) -> int:
        return self.blocks["C"].elems

    @property
    def acc_line_bytes(self) -> int:
        return self.acc_line_elems * self.precision.acc_bytes

    @property
    def acc_lines(self) -> int:
        return self.scratchpad.accumulator // self.acc_line_bytes

    @property
    def acc_address_bits(self) -> int:
        """The bits of a line address the accumulator's memory decodes."""
        return max(1, (self.acc_lines - 1).bit_length())

    @property
    def bank_depth(self) -> int:
        """Lines per bank; line ``n`` lives in bank ``n % banks`` at row ``n // banks``."""
        return -(-self.spad_lines // self.scratchpad.banks)

    def bank_of(self, line: int) -> int:
        return line % self.scratchpad.banks

    # --- serialization ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able nested dict (enums as their values, sizes as byte counts)."""
        values = json.loads(json.dumps(asdict(self), default=lambda v: v.value))
        if not self.output_pipeline:  # absent by default: hashes of existing configs stay
            del values["output_pipeline"]
        if not self.scratchpad.activations:  # likewise
            del values["scratchpad"]["activations"]
        if self.controller == ControllerConfig():  # likewise: fields at their defaults
            del values["controller"]
        elif self.controller.repeat == ControllerConfig().repeat:
            del values["controller"]["repeat"]
        return values

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AcceleratorConfig:
        """Build from a nested dict (the `to_dict` form, or a TOML file's tables)."""
        sections = {
            "array": ArrayConfig,
            "scratchpad": ScratchpadConfig,
            "dma": DmaConfig,
            "precision": PrecisionConfig,
            "controller": ControllerConfig,
        }
        known = set(sections) | {"intrinsic", "conv_taps", "output_pipeline"}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(
                f"unknown configuration keys {sorted(unknown)}; known: {sorted(known)}"
            )
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k not in sections}
        for name, section_type in sections.items():
            values = dict(data.get(name, {}))
            for size_key in ("capacity", "accumulator", "local_bytes", "activations"):
                if isinstance(values.get(size_key), str):
                    try:
                        values[size_key] = Bytes.parse(values[size_key])
                    except ValueError as error:
                        raise ConfigError(f"{name}.{size_key}: {error}") from None
            try:
                kwargs[name] = section_type(**values)
            except TypeError as error:
                raise ConfigError(f"bad [{name}] section: {error}") from None
        return cls(**kwargs)

    @classmethod
    def from_toml(cls, path: str | Path) -> AcceleratorConfig:
        return cls.from_dict(read_toml(path, "configuration file"))

    def replace(self, **changes: Any) -> AcceleratorConfig:
        """A copy with top-level fields changed (validated again)."""
        return replace(self, **changes)

    def describe(self) -> str:
        """One line, e.g. ``gemm 8x8 systolic ws, 64 KiB/4 banks, 64-bit bus x16, int8/32``."""
        a = self.array
        return (
            f"{self.intrinsic.value} {a.rows}x{a.cols} {a.interconnect.value} "
            f"{a.dataflow.value}, {self.scratchpad.capacity}/{self.scratchpad.banks} banks, "
            f"local {a.local_bytes}, {self.dma.bus_bits}-bit bus x{self.dma.max_burst}, "
            f"int{self.precision.in_bits}/{self.precision.acc_bits}"
            + (", output pipeline" if self.output_pipeline else "")
            + (f", {self.scratchpad.activations} activation memory"
               if self.scratchpad.activations else "")
            + (f", queues of {self.controller.queue_depth}"
               if self.controller.queue_depth != DEFAULT_QUEUE_DEPTH else "")
            + ("" if self.controller.repeat == ControllerConfig().repeat
               else ", repeating LOAD/STORE" if self.controller.repeat
               else ", LOAD/STORE without repeat")
        )
