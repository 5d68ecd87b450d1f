"""The integer reference of a multi-stage workload with requantized intermediates (numpy only).

What the device computes for a workload of three or more inputs run wholly on it
(`compiler.stage_chain`): the products taken left to right as written, each summing the
indices that neither a later operand nor the output uses, every intermediate requantized
to int8 by its per-tensor output parameters (`tensorforge.requant`, the integer semantics
the hardware shares), the last product kept as the ``acc_bits`` accumulator (wrapped as the
hardware's is). Written from the workload's accesses with `np.einsum`, without the
compiler's stages or programs, so the device's result can be checked against it bit for bit.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

import numpy as np

from tensorforge.compiler.workload import Workload
from tensorforge.errors import WorkloadError
from tensorforge.intrinsics import wrap
from tensorforge.requant import OutputParams


def staged_reference(workload: Workload, inputs: Mapping[str, np.ndarray],
                     params: Sequence[OutputParams], acc_bits: int = 32) -> np.ndarray:
    """``workload``'s output (int64) on ``inputs``, intermediate ``n`` requantized by
    ``params[n]`` (one channel: per-tensor)."""
    for access in (workload.output, *workload.inputs):
        if any(len(d.terms) != 1 or d.terms[0][1] != 1 or d.constant for d in access.dims):
            raise WorkloadError(f"the staged reference takes plain indices, not {access}")
    if len(params) != len(workload.inputs) - 2:
        raise WorkloadError(f"{workload.name} has {len(workload.inputs) - 2} intermediates, "
                            f"not {len(params)} parameter sets")
    letters = dict(zip(workload.indices, string.ascii_letters, strict=False))
    first = workload.inputs[0]
    value = np.asarray(inputs[first.tensor], dtype=np.int64)
    indices = list(first.indices)
    for position in range(1, len(workload.inputs)):
        right = workload.inputs[position]
        later = {i for a in workload.inputs[position + 1:] for i in a.indices}
        last = position == len(workload.inputs) - 1
        if last:
            kept = list(workload.output.indices)
        else:
            kept = [i for i in dict.fromkeys(indices + list(right.indices))
                    if i in later or i in workload.output.indices]
        subscripts = ("".join(letters[i] for i in indices) + ","
                      + "".join(letters[i] for i in right.indices) + "->"
                      + "".join(letters[i] for i in kept))
        value = np.einsum(subscripts, value,
                          np.asarray(inputs[right.tensor], dtype=np.int64))
        if last:
            return wrap(value, acc_bits)
        value = params[position - 1].apply(value[None], 0, acc_bits)[0]
        indices = kept
    raise WorkloadError(f"{workload.name} has one input; nothing to chain")
