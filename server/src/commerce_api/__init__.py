"""Commerce API: a self-hostable commerce backend."""

__version__ = "0.1.0"
