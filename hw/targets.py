"""Generation targets: which primitives the generated RTL is built from.

``generic`` is plain RTL for simulation and ASIC flows (the default, and what the cost model is
calibrated on). ``ecp5`` builds the PE multipliers from Lattice ECP5 MULT18X18D slices with
their own input and output registers (`tensorforge.hw.dsp`), registers the stationary
loads into the PE array and adds pipeline registers to the memory-side control and the
requantizer, for timing closure on ECP5 (docs/ecp5_target.md): the same results, a few more
cycles, so the cost model describes ``generic`` only.
"""

from __future__ import annotations

import enum

from tensorforge.errors import ConfigError


class Target(enum.Enum):
    GENERIC = "generic"
    ECP5 = "ecp5"


def parse_target(target: Target | str) -> Target:
    """``target`` as a `Target`, or a `ConfigError` naming the choices."""
    if isinstance(target, Target):
        return target
    try:
        return Target(target)
    except ValueError:
        choices = ", ".join(t.value for t in Target)
        raise ConfigError(f"target must be one of {choices}, not {target!r}") from None
