"""The board SoC simulated in Verilator, reachable as a serial port (a pty).

`simulated_board` is what the host runtime's end-to-end test plugs into instead of a board:
the same `BoardSoc` the bitstream holds, its UART served on a pseudo-terminal by the cocotb
bench ``bench_board_uart.py`` (which explains how bytes and simulated time move). The model
runs in a thread of the caller's process (cocotb's runner starts the simulator as a
subprocess), and the caller opens the yielded pty path like ``/dev/ttyUSB0``.

The simulated SoC differs from a board build only in its clock (the model's own, one cycle
per `CLOCK_PERIOD_NS`) and its UART rate (`SIM_DIVISOR` cycles per bit, so that a frame costs
few cycles); the runtime cannot tell, as a pty has no baud rate.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tensorforge.config import AcceleratorConfig
from tensorforge.errors import SimulationError
from tensorforge.hw.board.soc import BoardSoc, SocOptions
from tensorforge.sim.sim_top import BUILD_OPTIONS, CLOCK_PERIOD_NS

SOC_TOP = "board_soc"
SIM_TOP = "board_sim"
SIM_CLOCK_HZ = 1e9 / CLOCK_PERIOD_NS
SIM_DIVISOR = 8
#: Simulated time the SoC runs per short wall-clock wait for the host (two bytes' worth).
IDLE_NS = 2 * 10 * SIM_DIVISOR * CLOCK_PERIOD_NS
#: Long enough that no wait for the host inside a frame reaches it (see the bench).
FRAME_TIMEOUT_S = 0.05
PUBLIC_SIGNALS = f"""`verilator_config
public_flat_rw -module "{SIM_TOP}" -var "*"
"""
START_TIMEOUT_S = 600.0


def simulation_options(memory_bytes: int = 16 * 1024) -> SocOptions:
    """`SocOptions` of the simulated board: its clock, a fast UART, ``memory_bytes``."""
    return SocOptions(memory_bytes=memory_bytes, clock_hz=SIM_CLOCK_HZ,
                      baud=round(SIM_CLOCK_HZ / SIM_DIVISOR), frame_timeout_s=FRAME_TIMEOUT_S)


def wrapper_verilog() -> str:
    """``board_sim``: the SoC with a clock of its own (Verilator ``--timing``)."""
    half = CLOCK_PERIOD_NS // 2
    return f"""// Simulated board: the SoC and its clock (tensorforge.sim.soc_sim).
module {SIM_TOP} (input wire rst, input wire uart_rx, output wire uart_tx, output wire irq);
    reg clk = 1'b0;
    always #{half} clk = ~clk;
    {SOC_TOP} soc (.clk(clk), .rst(rst), .uart_rx(uart_rx), .uart_tx(uart_tx), .irq(irq));
endmodule
"""


@functools.cache
def board_model(config: AcceleratorConfig, options: SocOptions):
    """The Verilator model of the simulated board (built once, then from the disk cache)."""
    from tensorforge.sim.rtl_harness import build_model, design_verilog

    verilog = wrapper_verilog() + design_verilog(BoardSoc(config, options), SOC_TOP)
    return build_model(verilog, top=SIM_TOP, build_options=BUILD_OPTIONS,
                       public=PUBLIC_SIGNALS)


def bench_path() -> Path:
    return Path(__file__).with_name("bench_board_uart.py")


@contextlib.contextmanager
def simulated_board(config: AcceleratorConfig, directory: Path,
                    options: SocOptions | None = None,
                    wall_limit_s: float = 600.0) -> Iterator[str]:
    """Run the simulated board while the body runs; yields the path of its serial port.

    The simulation ends when the body's host closes the port or the body ends; a failure of
    the bench is raised as `SimulationError` after the body.
    """
    options = options or simulation_options()
    model = board_model(config, options)
    directory.mkdir(parents=True, exist_ok=True)
    port_file, stop_file = directory / "port", directory / "stop"
    for stale in (port_file, stop_file):
        stale.unlink(missing_ok=True)
    bench_config = {
        "port_file": str(port_file), "stop_file": str(stop_file),
        "bit_ns": options.divisor * CLOCK_PERIOD_NS, "idle_ns": IDLE_NS,
        "wall_limit_s": wall_limit_s,
    }
    failures: list[BaseException] = []

    def simulate() -> None:
        try:
            model.run(bench_path(), test_dir=directory / "sim", config=bench_config, seed=1)
        except BaseException as error:  # raised in the caller's thread
            failures.append(error)

    thread = threading.Thread(target=simulate, name="simulated-board", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not port_file.is_file():
        if not thread.is_alive() or time.monotonic() > deadline:
            stop_file.touch()
            thread.join(10)
            raise SimulationError(f"the simulated board did not start: "
                                  f"{failures[0] if failures else 'no port after start-up'}")
        time.sleep(0.05)
    try:
        yield port_file.read_text().strip()
    finally:
        stop_file.touch()
        thread.join(wall_limit_s)
    if failures:
        raise failures[0]
