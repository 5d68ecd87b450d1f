"""What out-of-order dispatch could gain: the instruction timeline (`dse/cost_trace.py`) run
twice on the same programs, once as the controller dispatches (program order: an
instruction enters its unit's queue after the one before it did) and once with dispatch
freed from program order (an instruction enters its queue as soon as it is fetched and
its queue has room, whatever the instructions before it wait for). The second is an upper
bound of any out-of-order dispatcher fed by the same fetch: it keeps every unit's own
order, as the token protocol needs, and nothing else.

    python benchmarks/dispatch_order_bound.py [--depths 4,16] [--fidelity]

Prints cycles per program and the gain; ``--fidelity`` adds the 100 fidelity programs
(small layers on small arrays, where instruction overheads weigh most).
"""

from __future__ import annotations

import argparse
import sys
import types

from tensorforge.compiler.codegen import generate
from tensorforge.compiler.mappers import default_mapping
from tensorforge.compiler.zoo import load_workload
from tensorforge.config import AcceleratorConfig, ArrayConfig, ControllerConfig, ScratchpadConfig
from tensorforge.dse import cost_trace
from tensorforge.dse.cost_model import rtl_parameters
from tensorforge.dse.cost_space import build_space
from tensorforge.memory import DEFAULT_MEMORY

IN_ORDER = "at = max(dispatch[-1] + 1 if dispatch else 1.0, fetch.available(k))"
FREED = "at = max(1.0, fetch.available(k))"
LAYERS = (("resnet50:conv2_1b", 8, 8), ("resnet50:conv2_1c", 16, 4),
          ("resnet50:conv3_1a", 8, 8), ("mobilenet_v1:dw3", 8, 8),
          ("mobilenet_v1:pw3", 8, 8))


def unordered_timeline() -> types.ModuleType:
    """`cost_trace` with its one program-order term removed (a copy; the model is intact)."""
    source = open(cost_trace.__file__).read()
    if IN_ORDER not in source:
        sys.exit("dse/cost_trace.py no longer dispatches with the line this bound edits; "
                 "update IN_ORDER")
    module = types.ModuleType("cost_trace_unordered")
    sys.modules[module.__name__] = module
    exec(compile(source.replace(IN_ORDER, FREED), module.__name__, "exec"), module.__dict__)
    return module


def compare(name, program, config, memory, unordered) -> float:
    space = build_space(program.workload, program.mapping.choice, config,
                        program.mapping.groups)
    p = rtl_parameters(memory, config)
    ordered = cost_trace.trace_cycles(program.instructions, config, space.step, p)
    free = unordered.trace_cycles(program.instructions, config, space.step, p)
    gain = 1 - free / ordered
    print(f"{name:58s} {len(program.instructions):7,d} {ordered:11,.0f} {free:11,.0f} "
          f"{gain:+8.3%}", flush=True)
    return gain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", default="4,16", help="controller.queue_depth values")
    parser.add_argument("--fidelity", action="store_true", help="add the fidelity programs")
    args = parser.parse_args()
    unordered = unordered_timeline()
    print(f"{'program':58s} {'instr.':>7s} {'in order':>11s} {'freed':>11s} {'gain':>8s}")
    gains = []
    for depth in map(int, args.depths.split(",")):
        for layer, pe, banks in LAYERS:
            config = AcceleratorConfig(array=ArrayConfig(rows=pe, cols=pe),
                                       scratchpad=ScratchpadConfig(banks=banks),
                                       controller=ControllerConfig(queue_depth=depth))
            workload = load_workload(layer)
            program = generate(workload, default_mapping(workload, config), config)
            gains.append(compare(f"{layer} {pe}x{pe} queue depth {depth}", program, config,
                                 DEFAULT_MEMORY, unordered))
    if args.fidelity:
        from tensorforge.dse.fidelity_cases import calibration_cases, held_out_cases

        for case in [*calibration_cases(), *held_out_cases()]:
            program = generate(case.workload(), case.resolve_mapping(), case.config)
            gains.append(compare(case.name[:58], program, case.config, case.memory(),
                                 unordered))
    print(f"largest gain {max(gains):+.3%} over {len(gains)} programs")


if __name__ == "__main__":
    main()
