"""The hot read path: what clients poll (the catalogue, their key) served from memory, kept
exact across processes by version stamps that every write bumps in its own transaction.

See docs/performance.md for the measurements behind it.
"""
