"""Processes that must not outlive the process that started them."""

from __future__ import annotations

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_parent(parent: int | None = None) -> None:
    """Have Linux kill this process (SIGKILL) when its parent ends, however it ends: a
    SIGKILLed ``serve`` leaves no worker holding the port, a killed worker no build running
    on. ``parent``: the pid the parent had when it started this one; if it has ended already
    (before this call could ask), this process exits now. Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        sys.exit(1)  # multiprocessing ends the child with this status
