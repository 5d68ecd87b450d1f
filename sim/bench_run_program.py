"""cocotb bench that runs compiled programs on the whole accelerator, one after another.

The programs come from `tensorforge.sim.rtl_run` as files: ``$TENSORFORGE_RTL_JOBS`` names a
``jobs.json`` of `ProgramJob` entries, each with its DRAM image. For each job the
`AcceleratorDriver` resets the accelerator, runs the program and leaves the DRAM afterwards
and a `JobOutcome` next to the image; checking the result is the host's business (it knows
the workload and its numpy reference). The bench fails only when it cannot run a job at all,
so a program that hangs or writes out of bounds still yields an outcome that names it.
"""

from __future__ import annotations

import os
from pathlib import Path

import cocotb

from tensorforge.sim.accelerator_driver import AcceleratorDriver
from tensorforge.sim.rtl_jobs import JOBS_ENV, read_jobs


@cocotb.test()
async def run_programs(dut) -> None:
    """Every job of ``jobs.json`` runs to an outcome (finished, or stopped and explained)."""
    jobs_file = Path(os.environ[JOBS_ENV])
    directory = jobs_file.parent
    jobs = read_jobs(jobs_file)
    driver = AcceleratorDriver(dut, max(job.ram_bytes for job in jobs))
    for job in jobs:
        outcome = await driver.run(job, directory)
        outcome.write(job.outcome_path(directory))
        dut._log.info(
            "%s: %s after %d cycles (%.2f s): %s",
            job.name,
            "done" if outcome.finished else "STOPPED",
            outcome.waited_cycles,
            outcome.wall_seconds,
            outcome.counters,
        )
