"""tensorforge.compiler."""
