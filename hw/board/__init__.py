"""The board SoC around the accelerator: block RAM in place of DRAM and a UART host bridge.

Kept apart from `tensorforge.hw` proper, whose sources are the accelerator's (their digest,
`sim.rtl_run.hardware_digest`, says when the cost model's and the fits' measurements are
stale): the SoC never changes what the accelerator does.
"""
