"""What the host does around the device: index fusion (im2col) and stages the device skips.

The device runs one two-input contraction, the *device stage*. Two host-side steps relate it to
the user's workload:

* **fusion** (``groups``): several workload indices become one (``(x,y) -> x_y``), HASCO's
  ``fuse`` applied before tensorizing. Each input is gathered over its groups and reshaped,
  which for a convolution with groups ``(x,y), (c,r,s), (k,)`` is exactly im2col: ``A`` becomes
  the ``(c*r*s) x (x*y)`` patch matrix, ``B`` the reshaped filters, and the output comes back
  as ``k x (x*y)``, reshaped to ``k x x x y`` on the host.
* **stages** (``stage``): a workload with three or more inputs is a chain of products
  (`tensorforge.compiler.tst.stages`). The device computes the chosen stage; it must be the
  first one, whose inputs are all user tensors, because an intermediate result is
  ``acc_bits`` wide and cannot feed the ``in_bits`` operand scratchpad. The remaining products
  (MTTKRP's ``* C[k,j]`` and the sum over ``k``) run on the host in int64, from the stage's
  result and the extra inputs, which the program keeps in DRAM so that the DRAM image alone
  determines the output. That is the program of one stage; an accelerator with the output
  pipeline runs every stage on the device instead, each intermediate requantized to
  ``in_bits`` at STORE, the stages chained into one program (`compiler.stage_chain`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tensorforge.compiler.layout import gather
from tensorforge.compiler.matching import TensorizeChoice, tensorize_choices
from tensorforge.compiler.tst import stages
from tensorforge.compiler.workload import Access, AffineExpr, Workload
from tensorforge.errors import MappingError


def fused_name(group: tuple[str, ...]) -> str:
    return "_".join(group)


def device_choices(workload: Workload, intrinsic: str,
                   groups: tuple[tuple[str, ...], ...] = ()) -> list[TensorizeChoice]:
    """The tensorize choices the device can run under the fusion ``groups`` (stage 0).

    Padded choices (`tensorforge.compiler.matching`) are a last resort for the layer, not
    for each lowering: a fused form's padded choices are dropped when the workload as
    written runs in full (a convolution on CONV2D keeps the choices it had, rather than
    also trying its im2col matrix padded onto the window).
    """
    fused = Lowering(workload, groups).fused
    found = [c for c in tensorize_choices(fused, intrinsic) if c.stage == 0]
    if groups and any(c.padded for c in found):
        written = tensorize_choices(workload, intrinsic)
        if any(c.stage == 0 and not c.padded for c in written):
            return [c for c in found if not c.padded]
    return found


@dataclass(frozen=True)
class Lowering:
    """The user's workload, the index groups fused on the host, and the device stage."""

    workload: Workload
    groups: tuple[tuple[str, ...], ...] = ()  # () = no fusion
    stage: int = 0

    def __post_init__(self) -> None:
        if self.groups:
            members = [i for g in self.groups for i in g]
            if sorted(members) != sorted(self.workload.indices):
                raise MappingError(
                    f"fused groups {[list(g) for g in self.groups]} must cover each index of "
                    f"{self.workload.text} exactly once ({', '.join(self.workload.indices)})"
                )
        count = len(self.stages)
        if not 0 <= self.stage < count:
            raise MappingError(
                f"stage {self.stage} does not exist; {self.workload.name} has {count} stage(s)"
            )
        if self.stage != 0:
            raise MappingError(
                f"the device cannot run stage {self.stage} of {self.workload.name}: its input "
                f"{self.device.inputs[0].tensor} is an acc_bits-wide intermediate and the "
                "operand scratchpad holds in_bits elements; choose a stage-0 tensorize choice"
            )

    @cached_property
    def fused(self) -> Workload:
        """The workload over fused indices (the user's workload when nothing is fused)."""
        if not self.groups:
            return self.workload
        sizes = self.workload.sizes
        output = self._fuse_access(self.workload.output)
        inputs = tuple(self._fuse_access(a) for a in self.workload.inputs)
        extents = tuple(
            (fused_name(g), math.prod(sizes[i] for i in g))
            for g in self._groups_in_order([self.workload.output, *self.workload.inputs])
        )
        return Workload(self.workload.name, output, inputs, extents,
                        reduction=self.workload.reduction)

    @cached_property
    def stages(self) -> tuple[Workload, ...]:
        return stages(self.fused)

    @property
    def device(self) -> Workload:
        """The two-input contraction the accelerator runs."""
        return self.stages[self.stage]

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        """Inputs only the host epilogue reads."""
        used = set(self.device.input_names)
        return tuple(
            n
            for s in self.stages[self.stage + 1 :]
            for n in s.input_names
            if n not in used and n in self.fused.input_names
        )

    def _groups_in_order(self, accesses: list[Access]) -> list[tuple[str, ...]]:
        seen: dict[tuple[str, ...], None] = {}
        for access in accesses:
            for index in access.indices:
                seen.setdefault(next(g for g in self.groups if index in g), None)
        return list(seen)

    def _fuse_access(self, access: Access) -> Access:
        used = set(access.indices)
        dims = []
        for group in self._groups_in_order([access]):
            if not set(group) <= used:
                raise MappingError(
                    f"{access} uses only {sorted(used & set(group))} of the fused group "
                    f"{list(group)}; fuse only indices that every tensor using one of them uses"
                )
            dims.append(AffineExpr(((fused_name(group), 1),)))
        return Access(access.tensor, tuple(dims))

    # ------------------------------------------------------------------ host side

    def prepare(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The fused workload's input arrays (gathered by group) from the user's inputs."""
        if not self.groups:
            return {name: np.asarray(inputs[name]) for name in self.workload.input_names}
        sizes = self.workload.sizes
        prepared = {}
        for original, fused in zip(self.workload.inputs, self.fused.inputs, strict=True):
            groups = [
                next(g for g in self.groups if fused_name(g) == d.indices[0]) for d in fused.dims
            ]
            order = tuple(i for g in groups for i in g)
            values = gather(np.asarray(inputs[original.tensor]), original, sizes, order)
            prepared[original.tensor] = values.reshape(
                [math.prod(sizes[i] for i in g) for g in groups]
            )
        return prepared

    def finish(self, result: np.ndarray, extras: Mapping[str, np.ndarray]) -> np.ndarray:
        """The user's output from the device stage's ``result`` and the fused extra inputs."""
        current = np.asarray(result, dtype=np.int64)
        for later in self.stages[self.stage + 1 :]:
            values = {
                name: (current if name == later.inputs[0].tensor else extras[name])
                for name in later.input_names
            }
            current = later.reference(values)
        if not self.groups:
            return current
        sizes = self.workload.sizes
        groups = [
            next(g for g in self.groups if fused_name(g) == d.indices[0])
            for d in self.fused.output.dims
        ]
        members = [i for g in groups for i in g]
        current = current.reshape([sizes[i] for i in members])
        wanted = [members.index(i) for i in self.workload.output.indices]
        return current.transpose(wanted)
