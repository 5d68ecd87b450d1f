"""Run a `NetworkProgram` on the functional simulator or the RTL and check it: `ModelResult`.

Each device segment is one program: one functional-simulator run (token hazards checked) or
one Verilator run of `Accelerator(config)` (`rtl_run.run_instructions_on_rtl`, its cycle
counter read back); the host ops run on the integers in between. The output is compared
with `tensorforge.network_reference`, which never sees the compiler.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorforge.compiler.network import NetworkProgram, Segment
from tensorforge.errors import SimulationError
from tensorforge.memory import DEFAULT_MEMORY, MemorySystem
from tensorforge.network_reference import reference_output

BACKENDS = ("rtl", "functional")


@dataclass(frozen=True, eq=False)  # arrays: compared by identity
class ModelResult:
    """A quantized network's run: ``match`` is bit-exact equality with the integer reference.

    ``cycles``: the RTL's cycle counter summed over the device segments (None on the
    functional simulator, which has no timing); ``segment_cycles`` per segment. ``output``
    and ``expected`` are int8 (int64 arrays); ``dequantized`` is ``output`` at the output
    scale, to compare with ``float_output``, the float module's. ``activation_bytes``: the
    layers' output regions kept in the activation window and stored to DRAM, over all
    segments (`Segment.activation_bytes`; none on chip without ``scratchpad.activations``).
    """

    match: bool
    cycles: int | None
    segment_cycles: tuple[int | None, ...]
    host_ops: tuple[str, ...]
    output: np.ndarray
    expected: np.ndarray
    dequantized: np.ndarray
    float_output: np.ndarray
    instructions: tuple[int, ...]  # per segment
    layers: tuple[str, ...]  # per layer: name, tensorize choice, how it reads its input
    backend: str
    activation_bytes: tuple[int, int] = (0, 0)  # (on chip, in DRAM)

    def summary(self) -> dict[str, object]:
        return {"match": self.match, "cycles": self.cycles, "backend": self.backend,
                "host_ops": list(self.host_ops), "instructions": list(self.instructions),
                "layers": list(self.layers),
                "activation_bytes_on_chip": self.activation_bytes[0],
                "activation_bytes_in_dram": self.activation_bytes[1],
                "max_abs_error_vs_float": float(np.abs(self.dequantized - self.float_output)
                                                .max())}


def run_network(program: NetworkProgram, q: np.ndarray, backend: str = "rtl", *,
                memory: MemorySystem = DEFAULT_MEMORY, seed: int = 0) -> tuple[np.ndarray,
                                                                                list]:
    """The int8 output of ``program`` on int8 input ``q`` and each segment's cycles."""
    return program.run(q, segment_runner(program.config, backend, memory=memory, seed=seed))


def segment_runner(config, backend: str = "rtl", *, memory: MemorySystem = DEFAULT_MEMORY,
                   seed: int = 0):
    """``device(segment, image) -> (DRAM after, cycles or None)`` on ``backend``."""
    if backend not in BACKENDS:
        raise SimulationError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "functional":
        from tensorforge.sim.functional import run_program

        def device(segment: Segment, image: bytearray):
            run_program(config, list(segment.instructions), image,
                        garbage=np.random.default_rng(seed))
            return image, None
    else:
        from tensorforge.sim.rtl_run import RawProgram, RunOptions, run_instructions_on_rtl

        def device(segment: Segment, image: bytearray):
            raw = RawProgram(segment.instructions, bytes(image), (segment.writable,))
            ((counters, after),) = run_instructions_on_rtl(
                config, [raw], RunOptions(memory=memory, seed=seed))
            return after, counters["cycles"]
    return device


def layer_lines(program: NetworkProgram) -> tuple[str, ...]:
    """Per layer: its name, tensorize choice and how it gets its input."""
    lines = []
    for segment in program.segments:
        for position, (layer, code) in enumerate(zip(segment.layers, segment.programs,
                                                     strict=True)):
            source = "host-packed input" if position == 0 else "previous layer's output"
            if layer.kind == "add":
                source = f"{layer.inputs[0] or 'input'} output stacked with the {source}"
            elif layer.inputs and position:
                source = f"{layer.inputs[0] or 'input'} output where its first reader does"
            lines.append(f"{layer.name} {layer.kind} [{code.mapping.choice.describe()}] "
                         f"reads the {source}; {len(code.instructions)} instructions")
    return tuple(lines)


def check_network(program: NetworkProgram, x, float_output: np.ndarray, backend: str = "rtl",
                  *, memory: MemorySystem = DEFAULT_MEMORY, seed: int = 0) -> ModelResult:
    """Run ``program`` on the float input ``x`` (quantized at the network's input scale)."""
    network = program.network
    q = network.quantize_input(x)
    output, cycles = run_network(program, q, backend, memory=memory, seed=seed)
    expected = reference_output(network, q)
    output = np.asarray(output).reshape(expected.shape)
    counted = None if any(c is None for c in cycles) else int(sum(cycles))
    return ModelResult(
        match=bool(np.array_equal(output, expected)), cycles=counted,
        segment_cycles=tuple(cycles), host_ops=tuple(str(op) for op in program.host_ops),
        output=output, expected=expected,
        dequantized=network.dequantize_output(output),
        float_output=np.asarray(float_output, dtype=np.float64).reshape(expected.shape),
        instructions=tuple(len(s.instructions) for s in program.segments),
        layers=layer_lines(program), backend=backend,
        activation_bytes=tuple(sum(pair) for pair in zip(
            *(s.activation_bytes for s in program.segments), strict=True)))
