"""Wrapper modules that build a memory from an array of IHP SRAM macros.

`wrapper_verilog` writes, for one ``$mem_v2`` cell and the macro array `macro_picker` chose
for it, a module with the cell's ports that instantiates the macros and the glue a memory
compiler's user would write around them: write-row decode and per-column write enables, the
write masks (tied high where one enable writes a whole column, else one buffer per enable
signal and macro, as buffering after placement would give), a strong buffer on every address
and enable net that reaches more than one macro, and for stacked macros a registered row
select and the read multiplexer. Two-port macros write through port A and read
through port B, one copy of the array per read port; a one-port macro does both through
port A at the shared address. `stub_verilog` is a macro as the empty module Yosys keeps.
"""

from __future__ import annotations

from tensorforge.fpga.macro_picker import MacroArray, MemoryRequest
from tensorforge.fpga.memories import MemoryCell

# Drives one write-enable group's bits of a macro's write mask (ABC never sees the macro pins
# an enable fans out to, so it cannot buffer them itself).
MASK_BUFFER = "sg13g2_buf_4"
# Drives an address or enable net shared by several macros. The logic mapper sees the macros
# as black boxes, so it never buffers these nets: left alone, a 16x16's 32 accumulator macros
# hang ~0.3 pF on one flip-flop, and the slow edge costs 3.5 ns of wire plus 5 ns of the
# macros' setup. Placement-time buffering would put a driver here; a buf_16 (17 fF input,
# what the mapper assumes each output drives) is that driver.
NET_BUFFER = "sg13g2_buf_16"


def stub_verilog(cell: str, pins: tuple[tuple[str, str, int], ...]) -> str:
    """The macro as an empty module, for Yosys to keep its instances as cells."""
    names = ", ".join(pin for pin, _, _ in pins)
    lines = [f"(* blackbox *)\nmodule {cell}({names});"]
    for pin, direction, width in pins:
        bus = f" [{width - 1}:0]" if width > 1 else ""
        lines.append(f"  {direction}{bus} {pin};")
    lines.append("endmodule\n")
    return "\n".join(lines)


def _zero_pad(signal: str, width: int, to: int) -> str:
    return signal if width >= to else f"{{{{{to - width}{{1'b0}}}}, {signal}}}"


def _slice(signal: str, low: int, width: int) -> str:
    return f"{signal}[{low + width - 1}:{low}]"


def wrapper_verilog(module: str, memory: MemoryCell, array: MacroArray,
                    macro_pins: tuple[tuple[str, str, int], ...]) -> str:
    """A module with the ports of ``memory``'s ``$mem_v2`` cell, built from ``array``.

    ``macro_pins`` are the macro's ``(name, direction, width)``; two-port macros write through
    port A and read through port B (one copy of the array per read port), a one-port macro
    does both through port A, at the shared address.
    """
    request = memory.request()
    reads, bits, abits = request.read_ports, request.bits, memory.integer("ABITS")
    macro = array.macro
    mbits, maddr = macro.bits, macro.address_bits
    padded = array.cols * mbits
    out = [
        f"module {module}(RD_CLK, RD_EN, RD_ARST, RD_SRST, RD_ADDR, RD_DATA, "
        f"WR_CLK, WR_EN, WR_ADDR, WR_DATA);",
        f"  input [{reads - 1}:0] RD_CLK, RD_EN, RD_ARST, RD_SRST;",
        f"  input [{reads * abits - 1}:0] RD_ADDR;",
        f"  output [{reads * bits - 1}:0] RD_DATA;",
        "  input [0:0] WR_CLK;",
        f"  input [{bits - 1}:0] WR_EN, WR_DATA;",
        f"  input [{abits - 1}:0] WR_ADDR;",
        f"  wire [{padded - 1}:0] din = {_zero_pad('WR_DATA', bits, padded)};",
        f"  wire [{padded - 1}:0] mask = {_zero_pad('WR_EN', bits, padded)};",
    ]

    def low_address(signal: str) -> str:
        return _slice(signal, 0, maddr) if abits >= maddr else _zero_pad(signal, abits, maddr)

    def shared(name: str, source: str, width: int, fanout: int) -> str:
        """``source`` as seen by the ``fanout`` macros it reaches: through a buffer per bit
        where that is more than one."""
        if fanout <= 1:
            return source
        out.append(f"  wire [{width - 1}:0] {name};")
        bits = [f"{source}[{bit}]" for bit in range(width)] if width > 1 else [source]
        out.extend(f"  {NET_BUFFER} {name}_buf{bit} (.A({value}), .X({name}[{bit}]));"
                   for bit, value in enumerate(bits))
        return name

    def row_hit(signal: str, row: int) -> str:
        return f"({signal}[{abits - 1}:{maddr}] == {row})" if array.rows > 1 else "1'b1"

    write_address = shared("wa", "WR_ADDR", abits, array.count)
    for col in range(array.cols):
        out.append(f"  wire wcol{col} = |{_slice('mask', col * mbits, mbits)};")
    for row in range(array.rows):
        for col in range(array.cols):
            out.append(f"  wire we_{row}_{col}_d = {row_hit('WR_ADDR', row)} & wcol{col};")
            enable = shared(f"we_{row}_{col}_b", f"we_{row}_{col}_d", 1, array.copies)
            out.append(f"  wire we_{row}_{col} = {enable};")
    for port in range(reads):
        address = f"ra{port}"
        out.append(f"  wire [{abits - 1}:0] {address} = "
                   f"{_slice('RD_ADDR', port * abits, abits)};")
        read_address = (shared(f"ra{port}_b", address, abits, array.rows * array.cols)
                        if request.macro_ports == 2 else address)
        for row in range(array.rows):
            out.append(f"  wire re_{port}_{row}_d = RD_EN[{port}] & {row_hit(address, row)};")
            enable = shared(f"re_{port}_{row}_b", f"re_{port}_{row}_d", 1, array.cols)
            out.append(f"  wire re_{port}_{row} = {enable};")
            out.append(f"  wire [{padded - 1}:0] dout_{port}_{row};")
            for col in range(array.cols):
                name = f"m_{port}_{row}_{col}"
                pins = _instance_pins(request.macro_ports, port, row, col, mbits, low_address,
                                      write_address, read_address)
                if macro.bit_mask:
                    pins["A_BM"] = _write_mask(out, name, request, col * mbits, mbits)
                out.append(_instance(macro.cell, macro_pins, name, pins))
        data = _slice("RD_DATA", port * bits, bits)
        if array.rows == 1:
            out.append(f"  assign {data} = {_slice(f'dout_{port}_0', 0, bits)};")
            continue
        select_bits = abits - maddr
        out += [f"  reg [{select_bits - 1}:0] row_{port};",
                f"  always @(posedge RD_CLK[{port}]) if (RD_EN[{port}]) "
                f"row_{port} <= {address}[{abits - 1}:{maddr}];"]
        choice = _slice(f"dout_{port}_{array.rows - 1}", 0, bits)
        for row in reversed(range(array.rows - 1)):
            choice = f"(row_{port} == {row}) ? {_slice(f'dout_{port}_{row}', 0, bits)} : {choice}"
        out.append(f"  assign {data} = {choice};")
    out.append("endmodule\n")
    return "\n".join(out)


def _instance_pins(ports: int, port: int, row: int, col: int, mbits: int,
                   low_address, write_address: str, read_address: str) -> dict[str, str]:
    write, read = f"we_{row}_{col}", f"re_{port}_{row}"
    din = _slice("din", col * mbits, mbits)
    dout = _slice(f"dout_{port}_{row}", col * mbits, mbits)
    if ports == 1:
        return {"A_CLK": "WR_CLK[0]", "A_MEN": f"{write} | {read}", "A_WEN": write,
                "A_REN": read, "A_ADDR": low_address(write_address), "A_DIN": din,
                "A_DOUT": dout}
    return {"A_CLK": "WR_CLK[0]", "A_MEN": write, "A_WEN": write, "A_REN": "1'b0",
            "A_ADDR": low_address(write_address), "A_DIN": din,
            "B_CLK": f"RD_CLK[{port}]", "B_MEN": read, "B_WEN": "1'b0", "B_REN": read,
            "B_ADDR": low_address(read_address), "B_DOUT": dout}


def _write_mask(out: list[str], name: str, request: MemoryRequest, low: int,
                width: int) -> str:
    """The write-mask connection of macro ``name`` (bits ``low`` up of the line).

    A column written by one enable signal needs no mask: its ``*_WEN`` is that enable, so the
    mask is tied high. Otherwise each enable signal drives its bits of this macro's mask
    through a buffer of its own; where the signals are unknown, every bit is its own.
    """
    groups = request.enable_groups[low:low + width]
    if len(set(groups)) == 1:
        return f"{{{width}{{1'b1}}}}"
    if not groups:
        return _slice("mask", low, width)
    wires: dict[int, str] = {}
    for offset, group in enumerate(groups):
        if group not in wires:
            wires[group] = f"{name}_bm{len(wires)}"
            out += [f"  wire {wires[group]};",
                    f"  {MASK_BUFFER} {wires[group]}_buf (.A(mask[{low + offset}]), "
                    f".X({wires[group]}));"]
    bits = [wires[groups[offset]] if offset < len(groups) else "1'b0"
            for offset in range(width)]
    return "{" + ", ".join(reversed(bits)) + "}"


def _instance(cell: str, macro_pins: tuple[tuple[str, str, int], ...], name: str,
              wanted: dict[str, str]) -> str:
    """One macro instance: ``wanted`` connections, other inputs tied off (``*_DLY`` high)."""
    connections = []
    for pin, direction, width in macro_pins:
        if pin in wanted:
            connections.append(f".{pin}({wanted[pin]})")
        elif direction == "input":
            connections.append(f".{pin}({width}'b{'1' if pin.endswith('_DLY') else '0'})")
    return f"  {cell} {name} (" + ", ".join(connections) + ");"
