"""Constraints a hardware point can be checked against before it is evaluated.

Shi et al. (section 3, "input constraints") split a co-design's constraints in two: *known*
ones, computable from the design alone (it is a buildable accelerator; its area fits the
budget), are enforced while the acquisition is optimized, by rejection sampling, so no
evaluation is spent on a design they rule out; *unknown* ones (a legal mapping of every
layer exists, the run's power fits) are only learned from evaluations. `KnownConstraints`
is the first kind for a co-design sweep: the same `HardwareSpace.to_config` and area model
that the evaluation itself would apply. Run power depends on the mappings, so a power budget
is not known in advance and stays an evaluated constraint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorforge.dse.evaluate import AreaPowerModel
from tensorforge.dse.hwspace import HardwareSpace
from tensorforge.errors import ConfigError


@dataclass(frozen=True)
class KnownConstraints:
    """``points -> n`` bools: the point is a valid accelerator within ``area_mm2`` (None:
    unbounded). Picklable, so a problem holding it can go to a worker."""

    space: HardwareSpace
    hardware_model: AreaPowerModel
    area_mm2: float | None = None

    def __call__(self, points: Sequence[Mapping[str, Any]]) -> np.ndarray:
        return np.array([self._admits(point) for point in points], dtype=bool)

    def _admits(self, point: Mapping[str, Any]) -> bool:
        try:
            config = self.space.to_config(point)
        except ConfigError:
            return False
        return self.area_mm2 is None or self.hardware_model(config).area_mm2 <= self.area_mm2
