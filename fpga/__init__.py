"""tensorforge.fpga."""
