"""Python client for the Commerce API (work in progress: see the client issue)."""

__version__ = "0.1.0"

__all__ = ["__version__"]
