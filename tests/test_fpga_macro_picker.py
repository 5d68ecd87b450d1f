"""The SRAM macro picker, the Liberty reader and the vendored IHP data, without running tools.

The picker is checked on a made-up catalogue whose areas make every answer easy to work out
by hand; the IHP catalogue against figures copied from the foundry's Liberty files.
"""

from __future__ import annotations

import hashlib
import lzma
import re

import pytest

from tensorforge.errors import ConfigError
from tensorforge.fpga import ihp_sg13g2, liberty
from tensorforge.fpga.macro_picker import FlopCost, MacroType, MemoryRequest, pick
from tensorforge.fpga.memories import enable_groups, parse_memories

TWO_PORT_256X16 = MacroType("tp256x16", 256, 16, ports=2, bit_mask=True, area_um2=100.0)
TWO_PORT_1024X32 = MacroType("tp1024x32", 1024, 32, ports=2, bit_mask=True, area_um2=600.0)
TWO_PORT_64X32_NO_MASK = MacroType("tp64x32", 64, 32, ports=2, bit_mask=False, area_um2=50.0)
ONE_PORT_1024X32 = MacroType("sp1024x32", 1024, 32, ports=1, bit_mask=True, area_um2=300.0)
CATALOGUE = [TWO_PORT_256X16, TWO_PORT_1024X32, TWO_PORT_64X32_NO_MASK, ONE_PORT_1024X32]
FLOPS = FlopCost(storage_bit_um2=1.0, mux_um2=0.5)


def halves(bits: int) -> tuple[int, ...]:
    """Write enables of a line written in two halves (two signals)."""
    return (0,) * (bits // 2) + (1,) * (bits // 2)


def test_exact_fit_is_one_macro():
    choice = pick(MemoryRequest(256, 16), CATALOGUE, FLOPS)
    assert choice.kind == "macros"
    assert choice.array.macro is TWO_PORT_256X16
    assert (choice.array.rows, choice.array.cols, choice.array.copies) == (1, 1, 1)
    # 256 x 16 flip-flops at 1 + a 256:1 tree of 255 muxes per bit at 0.5
    assert choice.flop_area_um2 == 256 * 16 + 16 * 255 * 0.5 == 6136


def test_wide_line_puts_macros_side_by_side():
    # 4 x tp256x16 (400) ties with 8 x tp64x32 (rows 4, cols 2: 400); fewer macros win
    choice = pick(MemoryRequest(256, 64, enable_groups=halves(64)), CATALOGUE, FLOPS)
    assert choice.array.macro is TWO_PORT_256X16
    assert (choice.array.rows, choice.array.cols, choice.array.count) == (1, 4, 4)
    assert choice.array.area_um2 == 400


def test_deep_memory_stacks_macros():
    # tp1024x32: 4 rows x 1 column = 2400; tp256x16: 16 rows x 2 columns = 3200
    choice = pick(MemoryRequest(4096, 32), CATALOGUE, FLOPS)
    assert choice.array.macro is TWO_PORT_1024X32
    assert (choice.array.rows, choice.array.cols) == (4, 1)
    assert choice.array.area_um2 == 2400


def test_two_read_ports_get_one_copy_each():
    # the unmasked tp64x32 serves a line written in 32-bit halves: 2 columns x 2 copies = 200
    choice = pick(MemoryRequest(64, 64, read_ports=2, enable_groups=halves(64)), CATALOGUE,
                  FLOPS)
    assert choice.array.macro is TWO_PORT_64X32_NO_MASK
    assert (choice.array.rows, choice.array.cols, choice.array.copies) == (1, 2, 2)
    assert choice.array.area_um2 == 200
    assert choice.flop_area_um2 == 64 * 64 + 2 * 64 * 63 * 0.5


def test_unmasked_macro_is_refused_for_byte_writes():
    request = MemoryRequest(64, 64, enable_groups=tuple(i // 8 for i in range(64)))
    choice = pick(request, CATALOGUE, FLOPS)
    assert choice.array.macro is TWO_PORT_256X16  # 4 columns (400), not tp64x32
    only_unmasked = pick(request, [TWO_PORT_64X32_NO_MASK], FLOPS)
    assert only_unmasked.kind == "flops"
    assert "per-bit write masks" in only_unmasked.reason


def test_single_port_memory_takes_a_one_port_macro():
    choice = pick(MemoryRequest(1024, 32, shared_address=True), CATALOGUE, FLOPS)
    assert choice.array.macro is ONE_PORT_1024X32
    assert choice.array.count == 1


def test_tiny_memory_stays_in_flip_flops():
    # 8 x 8: 64 + 8 x 7 x 0.5 = 92 um^2 of flip-flops against 100 for the smallest macro
    choice = pick(MemoryRequest(8, 8), CATALOGUE, FLOPS)
    assert choice.kind == "flops" and choice.array is None
    assert choice.flop_area_um2 == 92
    assert "smaller" in choice.reason


@pytest.mark.parametrize("request_, reason", [
    (MemoryRequest(256, 16, synchronous_read=False), "asynchronous read"),
    (MemoryRequest(256, 16, write_ports=2), "2 write ports"),
])
def test_memories_no_macro_can_serve(request_, reason):
    choice = pick(request_, CATALOGUE, FLOPS)
    assert choice.kind == "flops"
    assert reason in choice.reason


def test_bad_request_is_a_config_error():
    with pytest.raises(ConfigError, match="words must be a positive integer"):
        MemoryRequest(0, 8)


def test_enable_groups_read_yosys_signal_specs():
    # most significant chunk first: bits 3..2 from a[8], bits 1..0 from b[0]
    assert enable_groups("{ a [8] a [8] b [0] b [0] }", 4) == (0, 0, 1, 1)
    assert enable_groups("{ a [3:2] b [0] b [0] }", 4) == (0, 0, 1, 2)
    assert enable_groups("4'1111", 4) == (0, 0, 0, 0)
    assert enable_groups("\\whole_wire", 4) == ()  # width unknown
    assert enable_groups("{ a [8] a [8] }", 4) == ()  # too few bits: unknown


DUMP = """
  cell $mem_v2 \\bank0
    parameter \\WIDTH 16
    parameter \\SIZE 256
    parameter \\ABITS 8
    parameter \\RD_PORTS 1
    parameter \\RD_CLK_ENABLE 1'1
    parameter \\WR_PORTS 1
    connect \\RD_ADDR \\addr
    connect \\WR_ADDR \\addr
    connect \\WR_EN { \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] \\we [0] }
"""  # noqa: E501


def test_dump_of_a_single_port_memory_becomes_its_request():
    [memory] = parse_memories(DUMP)
    request = memory.request()
    assert (request.words, request.bits, request.read_ports) == (256, 16, 1)
    assert request.shared_address and request.macro_ports == 1
    assert request.enable_groups == (0,) * 16


LIBERTY = r"""
library (demo) {
  leakage_power_unit : "1nW" ;
  lu_table_template (t2) { variable_1 : input_net_transition; }
  cell (m) {
    area : 12.5 ;
    pin (CLK) {
      internal_power () {
        when : "EN & !WE"
        rise_power ("scalar") { values (3.0) ; }
      }
    }
    bus (DOUT) {
      timing () {
        related_pin : "CLK"
        cell_rise (t2) {
          index_1 ("0.0, 1.0");
          index_2 ("0.0, 2.0");
          values ("1.0, 3.0", \
                  "2.0, 4.0");
        }
      }
    }
    cell_leakage_power : 7 ;
  }
}
"""


def test_liberty_reader_takes_missing_semicolons_and_continued_tables():
    library = liberty.parse(LIBERTY)
    cell = library.child("cell", "m")
    assert cell.number("area") == 12.5 and cell.number("cell_leakage_power") == 7
    power = cell.child("pin", "CLK").child("internal_power")
    assert power.attributes["when"] == "EN & !WE"
    table = liberty.table(cell.child("bus", "DOUT").child("timing").child("cell_rise"))
    assert table.at(0.5, 1.0) == pytest.approx(2.5)  # the middle of the four corners
    assert table.at(9.0, -1.0) == pytest.approx(2.0)  # clamped to the table's range


def test_internal_power_groups_are_removed_for_opensta():
    stripped = ihp_sg13g2.without_internal_power(LIBERTY)
    assert "internal_power" not in stripped and "rise_power" not in stripped
    assert liberty.parse(stripped).child("cell", "m").number("area") == 12.5


def test_ihp_catalogue_has_the_foundry_figures():
    macros = {model.macro.cell: model.macro for model in ihp_sg13g2.catalogue()}
    assert len(macros) == 28
    assert sum(m.ports == 1 for m in macros.values()) == 18
    one_port = macros["RM_IHPSG13_1P_1024x32_c2_bm_bist"]
    # copied by hand from RM_IHPSG13_1P_1024x32_c2_bm_bist_typ_1p20V_25C.lib
    assert (one_port.words, one_port.bits, one_port.ports) == (1024, 32, 1)
    assert one_port.area_um2 == pytest.approx(140182.6944)
    assert one_port.leakage_nw == pytest.approx(396.031)
    assert one_port.read_pj == pytest.approx(48.2666)
    assert one_port.write_pj == pytest.approx(58.9183)
    assert 4.26 < one_port.access_ns < 4.42  # the clock-to-DOUT table spans 4.27 to 4.41 ns
    assert one_port.bit_mask
    assert not macros["RM_IHPSG13_2P_64x32_c2"].bit_mask
    assert macros["RM_IHPSG13_2P_512x32_c2_bm_bist"].area_um2 == pytest.approx(150650.1373)


def test_vendored_files_match_their_provenance():
    provenance = (ihp_sg13g2.DATA_DIR / "PROVENANCE").read_text()
    assert "https://github.com/IHP-GmbH/IHP-Open-PDK" in provenance
    assert re.search(r"commit:\s+[0-9a-f]{40}", provenance)
    assert "Apache License" in (ihp_sg13g2.DATA_DIR / "LICENSE").read_text()
    packed = sorted(ihp_sg13g2.DATA_DIR.glob("*.xz"))
    assert len(packed) == 29  # the standard cells and 28 macros
    for path in packed:
        entry = re.search(rf"^{re.escape(path.name)}\n  path: +(\S+)\n  sha256: ([0-9a-f]{{64}})",
                          provenance, re.MULTILINE)
        assert entry, f"{path.name} is not in PROVENANCE"
        assert entry[1].endswith(path.name[:-len(".xz")])
        assert hashlib.sha256(lzma.decompress(path.read_bytes())).hexdigest() == entry[2]
