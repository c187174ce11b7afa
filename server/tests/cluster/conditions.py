"""What the cluster tests share: whether ``bench/cluster.py`` can run here, and what of a run
is left behind."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "cluster.py"
PG_BINARIES = (Path("/usr/lib/postgresql/15/bin"), Path("/usr/local/bin"))


def why_not() -> str | None:
    """Why the cluster cannot be made on this machine (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, TUN devices)"
    for tool in ("ip", "wrk", "redis-server", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if shutil.which("initdb") is None and not any((d / "initdb").exists() for d in PG_BINARIES):
        return "PostgreSQL's initdb is not installed"
    if not Path("/dev/net/tun").exists():
        return "no /dev/net/tun (TUN devices)"
    probe = f"clp{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ours(prefix: str) -> list[str]:
    """Namespaces and links named with ``prefix``."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in namespaces.splitlines() if line.strip()]
    names += [line.split(": ")[1].split("@")[0] for line in links.splitlines() if ": " in line]
    return [name for name in names if name.startswith(prefix)]


def skip_unless_possible(what: str) -> None:
    """Skip the calling test, saying why, where the cluster cannot be made."""
    reason = why_not()
    if reason is not None:
        pytest.skip(f"{what} skipped: {reason}")


def run_cluster(tag: str, arguments: list[str], output: Path, timeout: float) -> str:
    """Run ``bench/cluster.py`` with ``arguments`` (its names prefixed ``tag`` + random), assert
    it exited 0 and left nothing behind, and return what it wrote to ``output``."""
    prefix = f"{tag}{secrets.token_hex(3)}"
    command = [sys.executable, str(SCRIPT), *arguments, "--prefix", prefix, "--output", str(output)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert ours(prefix) == []
    assert list(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"{prefix}-*")) == []
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert prefix not in processes
    return output.read_text()
