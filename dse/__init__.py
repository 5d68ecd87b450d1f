"""tensorforge.dse."""
