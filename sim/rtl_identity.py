"""Which RTL a measurement describes, so a fit or a validation is called stale only when the
Verilog it was measured on has changed.

A measurement (the area/power fit, the energy fit, the fidelity summary) records two things:
the hash of the sources the Verilog is generated from (`rtl_run.hardware_digest`: quick to
compute, and when it still matches nothing else is asked) and the hash of the Verilog itself
of a few of the accelerators it measured (`reference_rtl`). Sources change more often than
the Verilog they generate: new hardware behind a configuration field whose default is today's
hardware, a docstring, a target-specific variant. When the source hash differs, the reference
accelerators are elaborated again (cached on disk, a few seconds each the first time) and
only a different Verilog makes the measurement stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tensorforge.config import AcceleratorConfig
from tensorforge.hashing import stable_hash

#: Accelerators a measurement keeps the Verilog hash of: its smallest, a middle and its
#: largest (by PEs), which between them reach every block its fits describe.
REFERENCES = 3


def rtl_digest(config: AcceleratorConfig) -> str:
    """The hash of ``Accelerator(config)``'s Verilog."""
    from tensorforge.sim.rtl_run import accelerator_verilog

    return stable_hash(accelerator_verilog(config))


def reference_rtl(configs: Iterable[AcceleratorConfig]) -> list[list[Any]]:
    """``[[config as a dict, rtl_digest], ...]`` of up to `REFERENCES` of ``configs``: the
    entry a measurement stores."""
    distinct = sorted({config.to_json(): config for config in configs}.values(),
                      key=lambda c: (c.array.rows * c.array.cols, c.to_json()))
    if len(distinct) > REFERENCES:
        last = len(distinct) - 1
        distinct = [distinct[round(i * last / (REFERENCES - 1))] for i in range(REFERENCES)]
    return [[config.to_dict(), rtl_digest(config)] for config in distinct]


def rtl_changed(source_digest: str, references: Sequence[Sequence[Any]]) -> bool:
    """Whether the RTL differs from the one measured under ``source_digest`` with
    ``references`` (`reference_rtl`). Without references, any source change counts."""
    from tensorforge.sim.rtl_run import hardware_digest

    if source_digest == hardware_digest():
        return False
    if not references:
        return True
    return any(rtl_digest(AcceleratorConfig.from_dict(config)) != digest
               for config, digest in references)
