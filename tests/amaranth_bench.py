"""Running one Amaranth testbench against a component, for the tests that drive a block's
ports cycle by cycle in Amaranth's simulator."""

from __future__ import annotations

from amaranth.sim import Simulator


def run_testbench(dut, testbench) -> None:
    """``testbench`` (an async function of the simulator context) against ``dut``, clocked."""
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def drive_stream_pair(ctx, inlet, outlet, *, offer: bool, payload, take: bool, where: str) -> bool:
    """Offers ``payload`` on the stream ``inlet`` and takes from ``outlet`` when ``take``;
    returns ``inlet.ready``, checked to be the same whether or not ``outlet`` is ready in
    this cycle (a register's, as a registered slice promises)."""
    ctx.set(inlet.valid, offer)
    ctx.set(inlet.payload, payload)
    ctx.set(outlet.ready, 0)
    ready = ctx.get(inlet.ready)
    ctx.set(outlet.ready, take)
    assert ctx.get(inlet.ready) == ready, f"{where}: ready follows the other side's ready"
    return bool(ready)
