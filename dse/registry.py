"""The names of a sweep's pluggable parts, resolved to code only when one is used.

The CLI lists these names when it builds its parser; importing the parts themselves would pull
in torch and BoTorch (seconds) before every `tensorforge` command. Each table maps a name to
``"module:attribute"``; the first entry of `EVALUATORS` and of `HARDWARE_MODELS` is the default.
"""

from __future__ import annotations

import importlib
from typing import Any

from tensorforge.errors import ConfigError

#: Hardware search methods (``--method``): ask/tell optimizers over a `Problem`.
OPTIMIZERS: dict[str, str] = {
    "random": "tensorforge.dse.opt_random:RandomSearch",
    "nsga2": "tensorforge.dse.opt_nsga2:NSGA2Search",
    "mobo": "tensorforge.dse.opt_mobo:MOBOSearch",
    "poros": "tensorforge.dse.opt_poros:PorosSearch",
    "shibo": "tensorforge.dse.opt_shibo:ShiBOSearch",
    "unico": "tensorforge.dse.opt_unico:UNICOSearch",
}

#: Per-layer evaluators (``--evaluator``): factories of `LayerEvaluator`s.
EVALUATORS: dict[str, str] = {
    "hasco": "tensorforge.dse.codesign:hasco_evaluator",
    "first-order": "tensorforge.dse.evaluate_first_order:FirstOrderEvaluator",
    "hasco-batch": "tensorforge.dse.sw_evaluator_batch:hasco_batch_evaluator",
}

#: Area/power/clock models (``--hardware-model``): factories of `AreaPowerModel`s. The default
#: is calibrated on IHP SG13G2 synthesis of the generated RTL (docs/cost_model.md); the 45 nm
#: first-order model stays for comparison, the OSU 0.18 um fit for the second ASIC target.
HARDWARE_MODELS: dict[str, str] = {
    "synthesis": "tensorforge.dse.area_power:SynthesisAreaPower",
    "first-order": "tensorforge.dse.evaluate:FirstOrderAreaPower",
    "synthesis-osu018": "tensorforge.dse.area_power:osu018_model",
}

#: Where layer evaluations run (``--backend``): `LayerPool`-contract classes, called as
#: ``cls(workers, **options)``; the first is the default.
BACKENDS: dict[str, str] = {
    "local": "tensorforge.dse.layer_pool:LayerPool",
    "ray": "tensorforge.dse.ray_pool:RayPool",
}


def resolve(table: dict[str, str], kind: str, name: str) -> Any:
    """The object registered as ``name`` in ``table``; an unknown name is a `ConfigError`."""
    try:
        module, attribute = table[name].split(":")
    except KeyError:
        raise ConfigError(f"unknown {kind} {name!r}; choose one of {', '.join(table)}") from None
    return getattr(importlib.import_module(module), attribute)
