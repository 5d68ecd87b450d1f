"""What a cocotb bench imports on the simulator side of the harness.

Kept apart from :mod:`tensorforge.sim.rtl_harness` so that the Python embedded in the
simulator does not import Amaranth and cocotb's runner just to read its configuration.
"""

from __future__ import annotations

import json
import os
from typing import Any

#: The environment variable that carries ``RtlModel.run(config=...)`` to the bench, as JSON.
CONFIG_ENV = "TENSORFORGE_BENCH_CONFIG"


def bench_config() -> dict[str, Any]:
    """The ``config`` mapping given to ``RtlModel.run`` (empty when none was given)."""
    text = os.environ.get(CONFIG_ENV, "")
    return json.loads(text) if text else {}
