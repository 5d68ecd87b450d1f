"""The one exception type users see.

Every error a user can cause (bad workload text, an impossible configuration, a missing tool,
a synthesis that fails or hangs) is a `TensorforgeError` whose message says what went wrong and
what to do about it. The CLI prints the message without a traceback and exits non-zero.
Subclasses exist so callers can catch a narrower kind; the CLI catches the base.
"""

from __future__ import annotations


class TensorforgeError(Exception):
    """An error the user can fix; the message names the cause and the fix."""


class ConfigError(TensorforgeError, ValueError):
    """An accelerator configuration that cannot be built."""


class WorkloadError(TensorforgeError, ValueError):
    """Workload text that does not parse, or sizes that contradict each other."""


class MappingError(TensorforgeError, ValueError):
    """A mapping (schedule) that is illegal for the workload or does not fit the hardware."""


class ToolError(TensorforgeError, RuntimeError):
    """An external tool (Verilator, Yosys, nextpnr, OpenSTA) is missing, failed or hung.

    The message names the tool, the cause and the last lines of its log.
    """

    def __init__(self, tool: str, cause: str, log: str = "", *, log_lines: int = 20) -> None:
        self.tool = tool
        self.cause = cause
        self.log = log
        tail = "\n".join(log.strip().splitlines()[-log_lines:]) if log.strip() else ""
        message = f"{tool}: {cause}"
        if tail:
            message += f"\n--- last lines of the {tool} log ---\n{tail}"
        super().__init__(message)


class SimulationError(TensorforgeError, RuntimeError):
    """An RTL or functional simulation that failed, mismatched or did not finish."""
