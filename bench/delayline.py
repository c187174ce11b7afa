"""A user-space delay line for ``bench/cluster.py`` (this machine's kernel has no netem).

``delayline.py PREFIX LINKS PORT`` creates, in the namespace it runs in, two TUN devices per
link: ``PREFIXa<i>`` (the app side) and ``PREFIXd<i>`` (the database side); it prints ``ready``
once they exist. The caller moves each into its host's namespace (``ip link set ... netns``;
the file descriptors stay here) and gives them point-to-point addresses. Every IP packet read
from one device of a link is written to the other after the one-way delay (half the round
trip), in the order it came (the delay is the same for every packet of a direction, so a FIFO
per direction keeps it).

It also counts, per link, the database round trips: on each TCP flow to or from ``PORT``, the
times the direction of the packets that carry payload switches to app -> database.

Commands on stdin, one a line: ``delay <seconds one-way>``; ``stats`` (prints a JSON line:
``turns`` and ``packets`` per link); ``reset`` (zeroes the counters); ``cut <link> <port>`` and
``heal <link> <port>``: drop, silently and both ways, every packet of the link (port ``0``) or
those of TCP flows to or from ``port`` (a partition: nothing is closed, nothing answers), and
stop dropping them. It exits at EOF.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import select
import struct
import sys
import time
from collections import deque

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PR_SET_TIMERSLACK = 29


def open_tun(name: str) -> int:
    """A TUN device named ``name`` (no packet information header); its file descriptor."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


class Line:
    def __init__(self, prefix: str, links: int, port: int) -> None:
        self.port = port
        self.delay = 0.0
        self.peer: dict[int, int] = {}
        self.link: dict[int, int] = {}
        self.from_app: dict[int, bool] = {}
        self.queue: dict[int, deque[tuple[float, bytes]]] = {}
        for i in range(links):
            app, db = open_tun(f"{prefix}a{i}"), open_tun(f"{prefix}d{i}")
            self.peer |= {app: db, db: app}
            self.link |= {app: i, db: i}
            self.from_app |= {app: True, db: False}
            self.queue |= {app: deque(), db: deque()}
        self.turns = [0] * links
        self.packets = [0] * links
        # How late queued packets left (their sum, seconds, and count): the delay is a floor.
        self.late = 0.0
        self.delayed = 0
        # Per (link, the app side's port): whether the last payload went app -> database.
        self.last_from_app: dict[tuple[int, int], bool] = {}
        self.cuts: set[tuple[int, int]] = set()  # (link, port): dropped; port 0: all

    def count(self, fd: int, packet: bytes) -> None:
        link = self.link[fd]
        self.packets[link] += 1
        if len(packet) < 40 or packet[0] >> 4 != 4 or packet[9] != 6:
            return
        ihl = (packet[0] & 15) * 4
        total = int.from_bytes(packet[2:4], "big")
        source, destination = struct.unpack_from("!HH", packet, ihl)
        payload = total - ihl - (packet[ihl + 12] >> 4) * 4
        if payload <= 0 or self.port not in (source, destination):
            return
        from_app = self.from_app[fd]
        key = (link, source if from_app else destination)
        if from_app and not self.last_from_app.get(key, False):
            self.turns[link] += 1
        self.last_from_app[key] = from_app

    def command(self, line: str) -> bool:
        words = line.split()
        if not words:
            return False
        if words[0] == "delay":
            self.delay = float(words[1])
        elif words[0] == "stats":
            late_ms = self.late / self.delayed * 1000 if self.delayed else 0.0
            stats = {"turns": self.turns, "packets": self.packets, "late_ms": late_ms}
            print(json.dumps(stats), flush=True)
        elif words[0] in ("cut", "heal"):
            cut = (int(words[1]), int(words[2]))
            if words[0] == "cut":
                self.cuts.add(cut)
            else:
                self.cuts.discard(cut)
        elif words[0] == "reset":
            self.turns = [0] * len(self.turns)
            self.packets = [0] * len(self.packets)
            self.last_from_app.clear()
            self.late, self.delayed = 0.0, 0
        return True

    def run(self) -> None:
        stdin = sys.stdin.fileno()
        readers = [stdin, *self.peer]
        pending = b""
        while True:
            now = time.monotonic()
            timeout: float | None = None
            for out, queue in self.queue.items():
                while queue and queue[0][0] <= now:
                    due, packet = queue.popleft()
                    self.late += now - due
                    self.delayed += 1
                    self.write(out, packet)
                if queue:
                    wait = queue[0][0] - now
                    timeout = wait if timeout is None else min(timeout, wait)
            ready, _, _ = select.select(readers, [], [], timeout)
            for fd in ready:
                if fd == stdin:
                    data = os.read(stdin, 4096)
                    if not data:
                        return
                    pending += data
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        self.command(line.decode())
                    continue
                if not self.forward(fd):  # its device is gone (its namespace deleted)
                    readers.remove(fd)

    def forward(self, fd: int) -> bool:
        """Read what ``fd`` has (up to 64 packets) and pass it on; False if ``fd`` is dead."""
        out = self.peer[fd]
        for _ in range(64):
            try:
                packet = os.read(fd, 65536)
            except BlockingIOError:
                return True
            except OSError:
                return False
            self.count(fd, packet)
            if self.cuts and self.dropped(fd, packet):
                continue
            if self.delay <= 0 and not self.queue[out]:
                self.write(out, packet)
            else:
                self.queue[out].append((time.monotonic() + self.delay, packet))
        return True

    def dropped(self, fd: int, packet: bytes) -> bool:
        """Whether a cut drops ``packet`` (read from ``fd``)."""
        link = self.link[fd]
        if (link, 0) in self.cuts:
            return True
        if len(packet) < 24 or packet[0] >> 4 != 4 or packet[9] != 6:
            return False
        ihl = (packet[0] & 15) * 4
        source, destination = struct.unpack_from("!HH", packet, ihl)
        return (link, source) in self.cuts or (link, destination) in self.cuts

    @staticmethod
    def write(fd: int, packet: bytes) -> None:
        # A device going down, a full queue: the packet is dropped, as on a wire.
        with contextlib.suppress(OSError):
            os.write(fd, packet)


def precise_wakeups() -> None:
    """Wake on time on a busy machine: a real-time priority (a wire does not wait for a CPU)
    and no timer slack, where permitted."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


def main() -> None:
    precise_wakeups()
    prefix, links, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    line = Line(prefix, links, port)
    print("ready", flush=True)
    line.run()


if __name__ == "__main__":
    main()
