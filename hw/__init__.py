"""tensorforge.hw."""
