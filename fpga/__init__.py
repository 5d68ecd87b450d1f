"""tensorforge.fpga: synthesis flows that turn Verilog into area, Fmax and power.

`synthesize_ecp5` (Yosys + nextpnr on a Lattice ECP5; `synthesize_ecp5_seeds` at several
placement seeds, `best_placement` the fastest of them) and `synthesize_asic` (Yosys onto the
cells and SRAM macros of IHP SG13G2, the default, or OSU 0.18um + OpenSTA) each return a frozen
report and keep it in the result store, keyed by the hash of the Verilog, the flow and its
options (the technology among them).
"""

from tensorforge.fpga.asic import AsicReport, synthesize_asic
from tensorforge.fpga.ecp5 import (
    Ecp5Report,
    best_placement,
    synthesize_ecp5,
    synthesize_ecp5_seeds,
)
from tensorforge.fpga.opensta import PowerReport

__all__ = ["AsicReport", "Ecp5Report", "PowerReport", "best_placement", "synthesize_asic",
           "synthesize_ecp5", "synthesize_ecp5_seeds"]
