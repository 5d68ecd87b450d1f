"""`Program`: the compiled instructions plus everything the host needs to use them.

A program is self-contained: its DRAM image (`pack_inputs`) holds the operands in their
device layouts, room for the output, the inputs only the host epilogue reads, and the
instruction stream at ``instruction_base``; `unpack_output` recovers the workload's output from
an image after the run (functional simulator or RTL) without any other state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping as MappingType
from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.layout import DramLayout
from tensorforge.compiler.lowering import Lowering
from tensorforge.compiler.mapping import Mapping
from tensorforge.compiler.output_stage import OutputStage, ParamRegion
from tensorforge.compiler.workload import Workload
from tensorforge.config import AcceleratorConfig
from tensorforge.errors import WorkloadError
from tensorforge.isa import (
    Buffer,
    Compute,
    ComputeMode,
    Instruction,
    Load,
    Store,
    disassemble,
    encode_program,
    expand,
)


@dataclass(frozen=True)
class Program:
    """Instructions for one workload on one accelerator, with its DRAM layout and metadata."""

    config: AcceleratorConfig
    workload: Workload
    lowering: Lowering
    mapping: Mapping
    instructions: tuple[Instruction, ...]
    operands: tuple[DramLayout, DramLayout]  # the intrinsic's A and B
    output: DramLayout  # the device stage's result, acc_bits integers
    extras: tuple[DramLayout, ...]  # inputs only the host epilogue reads (int64)
    instruction_base: int
    # the layer's bias/requantization/activation, done at STORE (None: STOREs write acc_bits)
    output_stage: OutputStage | None = None
    params: ParamRegion | None = None  # the output stage's parameter lines in DRAM

    # ------------------------------------------------------------------ the binary

    def encode(self) -> bytes:
        return encode_program(list(self.instructions))

    def disassemble(self) -> str:
        return disassemble(list(self.instructions))

    @property
    def dram_bytes(self) -> int:
        """Size of the DRAM image: data regions, then the instruction stream."""
        return self.instruction_base + len(self.instructions) * 16

    # ------------------------------------------------------------------ host side

    def pack_inputs(self, inputs: MappingType[str, np.ndarray]) -> bytearray:
        """The DRAM image for ``inputs`` (the user's tensors, by name)."""
        shapes = self.workload.shapes
        for name in self.workload.input_names:
            if name not in inputs:
                raise WorkloadError(f"input {name} is missing; {self.workload.name} needs "
                                    f"{', '.join(self.workload.input_names)}")
            if np.shape(inputs[name]) != shapes[name]:
                raise WorkloadError(f"input {name} has shape {np.shape(inputs[name])}, but "
                                    f"{self.workload.name} needs {shapes[name]}")
        prepared = self.lowering.prepare(inputs)
        device = self.lowering.device
        image = bytearray(self.dram_bytes)
        for layout in self.operands:
            access = next(a for a in device.inputs if a.tensor == layout.tensor)
            image[layout.base : layout.end] = layout.pack(prepared[layout.tensor], access,
                                                          device.sizes)
        fused = self.lowering.fused
        for layout in self.extras:
            access = next(a for a in fused.inputs if a.tensor == layout.tensor)
            image[layout.base : layout.end] = layout.pack(prepared[layout.tensor], access,
                                                          fused.sizes)
        if self.params is not None:
            image[self.params.base : self.params.end] = self.params.data
        image[self.instruction_base :] = self.encode()
        return image

    def unpack_output(self, dram: bytes | bytearray) -> np.ndarray:
        """The workload's output (int64) from a DRAM image after the program ran."""
        result = self.output.unpack(dram)
        extras = {layout.tensor: layout.unpack(dram) for layout in self.extras}
        return self.lowering.finish(result, extras)

    def expected_output(self, inputs: MappingType[str, np.ndarray]) -> np.ndarray:
        """What the program must produce: the workload's reference, through the output stage
        if it has one."""
        result = self.workload.reference(inputs)
        if self.output_stage is None:
            return result
        return self.output_stage.apply(result, self.workload, self.config.precision.acc_bits)

    def run_functional(self, inputs: MappingType[str, np.ndarray], *,
                       check_hazards: bool = True,
                       garbage: np.random.Generator | None = None) -> np.ndarray:
        """Pack, run on the functional simulator, unpack: the output the accelerator computes.

        ``garbage`` starts the buffers from random values instead of zeros (as real SRAM
        would), which a correct program never notices."""
        from tensorforge.sim.functional import run_program

        image = self.pack_inputs(inputs)
        run_program(self.config, list(self.instructions), image, check_hazards=check_hazards,
                    garbage=garbage)
        return self.unpack_output(image)

    # ------------------------------------------------------------------ figures

    def statistics(self) -> dict[str, object]:
        """Instruction counts, DRAM traffic and MACs, counted from the instructions."""
        config = self.config
        counts = Counter(type(ins).__name__.upper() for ins in self.instructions)
        read = written = steps = 0
        for ins in expand(self.instructions, config.precision.in_bytes,
                          config.precision.acc_bytes):
            if isinstance(ins, Load):
                size = (config.precision.acc_bytes if ins.buffer is Buffer.ACC
                        else config.precision.in_bytes)
                read += ins.rows * ins.row_len * size
            elif isinstance(ins, Store):
                written += ins.rows * ins.row_len * (config.precision.in_bytes if ins.requant
                                                     else config.precision.acc_bytes)
            elif isinstance(ins, Compute) and ins.mode is ComputeMode.MAC:
                steps += ins.outer * ins.inner
        return {
            "instructions": dict(sorted(counts.items())),
            "dram_bytes_read": read,
            "dram_bytes_written": written,
            "mac_steps": steps,
            "macs_issued": steps * config.macs_per_step,
            "workload_macs": self.workload.macs,
            "program_bytes": len(self.instructions) * 16,
        }

    def describe(self) -> dict[str, object]:
        """JSON-able summary: choice, mapping, layouts and statistics."""
        return {
            "workload": self.workload.text,
            "sizes": self.workload.sizes_text,
            "config": self.config.describe(),
            "choice": self.mapping.choice.describe(),
            "mapping": self.mapping.to_dict(),
            "layouts": [layout.describe() for layout in (*self.operands, self.output,
                                                         *self.extras)],
            "statistics": self.statistics(),
        }
