"""tensorforge: hardware/software co-design for tensor accelerators."""
__version__ = "0.1.0"
