"""`compile` and `simulate` of a multi-stage workload (MTTKRP) with ``--output-pipeline``.

Every stage then runs on the device, chained into one program (`compiler.stage_chain`:
each intermediate requantized to int8 at STORE, straight into the next stage's input
layout); the summary lists the segments, the intermediates' requantization and the host ops
(none when the chain holds). ``compile --check`` runs it on the functional simulator,
``simulate`` on the RTL, both against `tensorforge.stage_reference`. Without the output
pipeline the device runs the first stage and the host the rest (`compiler.lowering`), which
`host_stages` names for the plain commands' reports.
"""

from __future__ import annotations

import argparse
import json
import sys

from tensorforge.errors import MappingError


def host_stages(lowering) -> list[str]:
    """The stages a single-stage program (its `compiler.lowering.Lowering`) leaves to the
    host (in int64), as text."""
    return [f"{stage.text} (int64 on the host)"
            for stage in lowering.stages[lowering.stage + 1:]]


def _compile(args: argparse.Namespace, workload, config, memory):
    from tensorforge.compiler.stage_chain import compile_stages

    if args.mapping != "default" or getattr(args, "save_mapping", None):
        raise MappingError("a multi-stage workload on the output pipeline picks each stage's "
                           "mapping itself; --mapping and --save-mapping apply to one stage "
                           "(drop --output-pipeline to map the first stage yourself)")
    return compile_stages(workload, config, memory)


def _summary(program, workload, config, memory) -> dict:
    from tensorforge.commands.compile_network import segments_summary

    return {"workload": str(workload), "config": config.describe(),
            "memory": memory.describe(), **segments_summary(program.network),
            "intermediates": [{"multiplier": int(p.multiplier[0]), "shift": int(p.shift[0]),
                               "scale": float(p.multiplier[0]) / 2 ** 31 / 2 ** int(p.shift[0])}
                              for p in program.params]}


def _print(summary: dict) -> None:
    from tensorforge.commands.compile_network import print_segments

    print(f"{summary['workload']}  on  {summary['config']}")
    print(f"memory:  {summary['memory']}")
    for number, stage in enumerate(summary["intermediates"]):
        print(f"stage {number} stores int8 at scale {stage['scale']:.3g} (multiplier "
              f"{stage['multiplier']}, shift {stage['shift']})")
    print_segments(summary)


def compile_run(args: argparse.Namespace, workload, config, memory) -> int:
    """`tensorforge compile` of a multi-stage workload on the output pipeline."""
    from tensorforge.commands.compile_network import write_segments
    from tensorforge.sim.stage_run import check_stages

    program = _compile(args, workload, config, memory)
    summary = _summary(program, workload, config, memory)
    if args.out:
        write_segments(program.network, args.out, summary)
    status = 0
    if args.check:
        summary["check"] = check_stages(program, args.seed, memory=memory)
        status = 0 if summary["check"]["equal"] else 1
    if args.json:
        print(json.dumps(summary, indent=2))
        return status
    _print(summary)
    if args.check:
        verdict = "equal to" if status == 0 else "DIFFERENT from"
        print(f"check:   functional simulator result is {verdict} the staged numpy reference "
              f"(seed {args.seed})", file=sys.stdout if status == 0 else sys.stderr)
    return status


def simulate_run(args: argparse.Namespace, workload, config, memory) -> int:
    """`tensorforge simulate` of a multi-stage workload on the output pipeline: the chained
    program on the RTL (no ``--power`` or ``--waves``: they take one program's run)."""
    from tensorforge.errors import ConfigError
    from tensorforge.sim.stage_run import check_stages

    if args.power or args.waves:
        raise ConfigError("--power and --waves record one program's run; a multi-stage "
                          "workload on the output pipeline runs as a chain: drop them")
    program = _compile(args, workload, config, memory)
    summary = _summary(program, workload, config, memory)
    check = check_stages(program, args.seed, "rtl", memory=memory)
    summary.update(match=check["equal"], cycles=check["cycles"], check=check)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(summary)
        verdict = "equal to" if check["equal"] else "DIFFERENT from"
        print(f"RTL:     {check['cycles']:,} cycles; result {verdict} the staged numpy "
              f"reference (seed {args.seed})")
    if not check["equal"]:
        print(f"error: the RTL result differs from numpy in {check['mismatches']} elements "
              f"(seed {args.seed})", file=sys.stderr)
        return 1
    return 0
