"""tensorforge.sim."""
