"""Orders: placing them with atomic stock reservation, reading, cancelling, fulfilling."""
