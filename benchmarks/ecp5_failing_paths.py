"""Which blocks of an ECP5 build fail timing: every endpoint's slack, grouped by hierarchy.

Reads a run directory kept by ``tensorforge synth ... --flow ecp5 --keep-run DIR`` (nextpnr's
report.json with per-endpoint arrival times, timing.sdf with setup times; see
`tensorforge.fpga.ecp5_timing`) and prints, per Amaranth module prefix, the endpoints, how many
fail the clock the run was built for, the worst slack, the total negative slack and a histogram
of the failing ones; then the registers with the most failing bits.

    python benchmarks/ecp5_failing_paths.py RUN_DIR [--depth 2] [--under compute] [--markdown]

It first checks itself: the slacks, binned as nextpnr bins them, must reproduce the slack
histogram nextpnr printed after routing ("matches nextpnr's histogram: yes").

With ``--paths`` it says where the failing paths start instead (`tensorforge.fpga.ecp5_paths`:
a static timing analysis of timing.sdf): failing endpoints grouped by (launch block -> capture
block) with the routed nets on their worst paths, and the worst paths arc by arc.

    python benchmarks/ecp5_failing_paths.py RUN_DIR --paths [--depth 2] [--worst 10]
    python benchmarks/ecp5_failing_paths.py RUN_DIR --paths --path CELL

That check is that the arrivals computed from the SDF equal report.json's (exit status 2 if
fewer than 99% do).
"""

from __future__ import annotations

import sys

from tensorforge.fpga import ecp5_paths, ecp5_timing

if __name__ == "__main__":
    sys.exit((ecp5_paths if "--paths" in sys.argv[1:] else ecp5_timing).main())
