"""Synthesis results through the result store: run a flow once per (Verilog, flow, options).

A synthesis run is a pure function of the Verilog text, the flow and its options, so its report
is stored under `stable_hash` of exactly those; asking again returns the stored report (with
``cached=True``) without starting any tool. The flow's entry in ``FLOW_REVISIONS`` is part of
the key so that a change to how a flow runs or reads its tools invalidates that flow's old
reports instead of mixing them in, and leaves the other flow's (often slow) results usable.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

from tensorforge.errors import TensorforgeError
from tensorforge.hashing import stable_hash
from tensorforge.paths import cache_subdir
from tensorforge.store import ResultStore

logger = logging.getLogger(__name__)

#: Bump a flow's number when its scripts or report parsing change. ecp5 2: purge before ABC9
#: (Yosys #4349), Yosys' own log; 3: flattened first, multipliers over the DSP budget on LUTs.
#: asic 3: SRAM macros, OpenSTA-clean netlists (2), buffering and
#: delay-driven mapping in ABC (3); 4: technologies (IHP SG13G2 default, OSU 0.18 um),
#: unsigned netlists; 5: IHP macro write masks tied high or buffered; 6: no sg13g2_buf_1;
#: 7: IHP macro address and enable nets shared by several macros buffered. ecp5 4: ABC9's
#: wire delay 1000 ps instead of synth_ecp5's 300.
FLOW_REVISIONS = {"ecp5": 4, "asic": 7}


@dataclass(frozen=True, kw_only=True)
class SynthesisReport:
    """What every flow's report carries besides its results: provenance and logs.

    Keyword-only so that each flow's own (positional) result fields come first.
    """

    tool_seconds: dict[str, float] = field(default_factory=dict)
    tool_versions: dict[str, str] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    key: str = ""
    cached: bool = False

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Self:
        """Rebuild a report from its stored `dataclasses.asdict` form (unknown keys dropped)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**cls._decode({k: v for k, v in payload.items() if k in names}))

    @classmethod
    def _decode(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Turn nested payload dicts back into their dataclasses; flows with some override."""
        return values


ReportT = TypeVar("ReportT", bound=SynthesisReport)


class StoredFailure(TensorforgeError):
    """A flow's outcome that is as much a result as a report: the same inputs fail the same
    way every time (a design that does not fit its part), so `cached_synthesis` stores it
    and raises it again from the store instead of rerunning the tools.

    A subclass turns itself into a JSON payload and back; it is found again by its class name.
    """

    _kinds: dict[str, type[StoredFailure]] = {}
    stored: bool = False  # raised from the store rather than by a run

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        StoredFailure._kinds[cls.__name__] = cls

    def to_payload(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_payload(cls, payload: dict[str, Any], *, stored: bool = True) -> Self:
        """The failure again; ``stored``: it comes from the store (its message says so)."""
        raise NotImplementedError

    @staticmethod
    def load(stored: dict[str, Any]) -> StoredFailure | None:
        """The failure a stored row describes, or None for a kind this build does not know."""
        kind = StoredFailure._kinds.get(stored.get("type", ""))
        return None if kind is None else kind.from_payload(stored["failure"])

    def __reduce__(self):
        # pickled by payload (a flow run in a worker process): the constructors take more
        # than the one message Exception's own pickling would pass them
        return _unpickle_failure, (type(self).__name__, self.to_payload(), self.stored)


def _unpickle_failure(kind: str, payload: dict[str, Any], stored: bool) -> StoredFailure:
    return StoredFailure._kinds[kind].from_payload(payload, stored=stored)


def synthesis_key(verilog: str, flow: str, options: Any) -> str:
    """The store key of one synthesis: the hash of everything its result depends on."""
    return stable_hash(verilog, flow, options, FLOW_REVISIONS[flow])


def cached_synthesis(
    flow: str,
    verilog: str,
    options: Any,
    run: Callable[[str], ReportT],
    report_type: type[ReportT],
    *,
    store: ResultStore | None,
    use_cache: bool,
) -> ReportT:
    """The stored report of this synthesis, or ``run(key)``'s, which is then stored.

    A `StoredFailure` that ``run`` raises is stored too (under ``synth_<flow>_failure``) and
    raised again for the same key without running anything. With ``use_cache=False`` the flow
    always runs (the fresh outcome replaces the stored one).
    """
    store = store if store is not None else ResultStore()
    kind, failure_kind = f"synth_{flow}", f"synth_{flow}_failure"
    key = synthesis_key(verilog, flow, options)
    if use_cache:
        stored = store.get(kind, key)
        if stored is not None:
            logger.info("%s synthesis %s found in %s", flow, key, store.path)
            return dataclasses.replace(report_type.from_payload(stored.payload), cached=True)
        failed = store.get(failure_kind, key)
        failure = StoredFailure.load(failed.payload) if failed is not None else None
        if failure is not None:
            logger.info("%s synthesis %s failed before (%s)", flow, key, store.path)
            raise failure
    inputs = {
        "flow": flow,
        "options": dataclasses.asdict(options) if dataclasses.is_dataclass(options) else options,
        "verilog_hash": stable_hash(verilog),
        "verilog_chars": len(verilog),
        "flow_revision": FLOW_REVISIONS[flow],
    }
    try:
        report = run(key)
    except StoredFailure as failure:
        store.put(failure_kind, key, {"type": type(failure).__name__,
                                      "failure": failure.to_payload()}, inputs=inputs)
        raise
    store.delete(failure_kind, key)  # a run that now succeeds outranks an old failure
    store.put(kind, key, dataclasses.asdict(report), inputs=inputs)
    return report


@contextmanager
def run_directory(flow: str, key: str, keep: Path | None = None) -> Iterator[Path]:
    """A fresh directory for one run: removed after success, kept after a failure.

    Kept on failure because the error message points at the full logs inside it. ``keep``
    (``synth --keep-run``) runs in that new or empty directory instead and leaves it: the
    logs name more than the report does, such as the critical path nextpnr found.
    """
    if keep is not None:
        yield _empty_directory(keep)
        return
    path = Path(tempfile.mkdtemp(prefix=f"{flow}-{key}-", dir=cache_subdir("synth-runs")))
    try:
        yield path
    except BaseException:
        logger.warning("%s run failed; its files are kept in %s", flow, path)
        raise
    shutil.rmtree(path, ignore_errors=True)


def _empty_directory(path: Path) -> Path:
    from tensorforge.errors import ConfigError

    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(f"--keep-run {path}: not an empty directory; give a new or empty "
                          "one, so no earlier run's files are mistaken for this run's")
    path.mkdir(parents=True, exist_ok=True)
    return path
