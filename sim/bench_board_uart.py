"""cocotb bench: the simulated board's UART served on a pseudo-terminal.

The host runtime talks to a real board through a serial device; here it opens the slave side
of a pty that this bench creates, and the bench moves bytes between the pty's master side and
the SoC's ``uart_rx``/``uart_tx`` pins, bit by bit at the SoC's bit period. Only timers and an
edge trigger wake Python: the clock runs inside the model (`tensorforge.sim.soc_sim`), so a
program runs at Verilator's speed while the host waits.

Simulated time does not follow the wall clock. While the host sends nothing the bench lets
the SoC run ``idle_ns`` per short wait for the host (the accelerator computing, answers going
out); so that the board cannot outrun a slow host in a frame, the SoC's frame timeout is set
far above that in the simulated board.

Config (`bench_support.bench_config`): ``port_file`` (the pty's path is written there once
the SoC is out of reset), ``bit_ns``, ``idle_ns``, ``stop_file`` (the host side creates it to
end the run) and ``wall_limit_s``. The run also ends when the host closes the port after
having opened it.
"""

from __future__ import annotations

import errno
import os
import select
import time
import tty
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge, Timer

from tensorforge.sim.bench_support import bench_config

RESET_NS = 100
HOST_WAIT_S = 0.002  # wall time to wait for host bytes before letting the SoC run idle


async def send_byte(dut, byte: int, bit_ns: int) -> None:
    """Drive one 8N1 frame onto ``uart_rx``."""
    for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
        dut.uart_rx.value = bit
        await Timer(bit_ns, unit="ns")


async def forward_transmissions(dut, master: int, bit_ns: int) -> None:
    """Every frame on ``uart_tx``, sampled mid-bit, goes to the pty."""
    while True:
        await FallingEdge(dut.uart_tx)
        await Timer(bit_ns + bit_ns // 2, unit="ns")
        byte = 0
        for index in range(8):
            byte |= int(dut.uart_tx.value) << index
            await Timer(bit_ns, unit="ns")
        os.write(master, bytes([byte]))


def _read_host(master: int) -> bytes | None:
    """Bytes the host wrote (``b""``: none yet), or None once no process holds the slave."""
    ready, _, _ = select.select([master], [], [], HOST_WAIT_S)
    if not ready:
        return b""
    try:
        return os.read(master, 4096)
    except BlockingIOError:
        return b""
    except OSError as error:
        if error.errno == errno.EIO:  # the slave side is closed
            return None
        raise


@cocotb.test()
async def serve_uart_on_pty(dut) -> None:
    config = bench_config()
    bit_ns, idle_ns = int(config["bit_ns"]), int(config["idle_ns"])
    stop_file = Path(config["stop_file"])
    deadline = time.monotonic() + float(config["wall_limit_s"])

    master, slave = os.openpty()
    tty.setraw(slave)
    slave_path = os.ttyname(slave)
    os.close(slave)  # the host opens it by name; its closing then shows as EIO here
    os.set_blocking(master, False)

    dut.uart_rx.value = 1
    dut.rst.value = 1
    await Timer(RESET_NS, unit="ns")
    dut.rst.value = 0
    cocotb.start_soon(forward_transmissions(dut, master, bit_ns))
    port_file = Path(config["port_file"])
    staging = port_file.with_suffix(".tmp")
    staging.write_text(slave_path)
    staging.replace(port_file)

    connected = False
    received = 0
    while not stop_file.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the host was still connected after {config['wall_limit_s']} s")
        data = _read_host(master)
        if data is None and connected:
            break
        if data is None:  # the host has not opened the port yet
            time.sleep(HOST_WAIT_S)
        if data:
            connected = True
            received += len(data)
            for byte in data:
                await send_byte(dut, byte, bit_ns)
        else:
            await Timer(idle_ns, unit="ns")
    os.close(master)
    dut._log.info("host link closed after %d bytes from the host", received)
