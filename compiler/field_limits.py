"""The largest value each ISA field holds, as the code generator must respect it.

It exists so that every part of the compiler that sizes an instruction (the LOAD/STORE rows
of `tile_runs`, the MAC micro-loops of `mac_plan`, the ZEROs of `tile_walk`, the estimates
of `mapping_estimate`) reads the same limits, derived from the ISA's one definition of the
fields (`tensorforge.isa.FORMATS`).
"""

from __future__ import annotations

from tensorforge.isa import FORMATS, Opcode

LIMITS = {(op, f.name): (1 << f.bits) - 1 for op, fmt in FORMATS.items() for f in fmt}
MAX_ROWS = LIMITS[(Opcode.LOAD, "rows")]
MAX_STRIDE = LIMITS[(Opcode.LOAD, "stride")]
MAX_PAD = LIMITS[(Opcode.LOAD, "pad_after")]
MAX_STEP = LIMITS[(Opcode.COMPUTE, "a_inner")]
MAX_EXTENT = LIMITS[(Opcode.COMPUTE, "inner")]
