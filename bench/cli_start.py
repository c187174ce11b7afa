"""How soon each ``commerce-api`` command answers: the time to its first output (a byte on
standard output or standard error) and the process's CPU time, on SQLite and (with
``--postgres-url``) on PostgreSQL; the target is 0.5 s to the first output (issue 45).

Each command runs as a user runs it, the checkout's console script in a process of its own,
``--runs`` times after one warm-up, and the median is printed with the min-max. With
``--against OTHER_CHECKOUT`` (a checkout with its own ``make install``, for example a
``git worktree`` of the code before a change) the same commands run there too, in turn with
these (this one, the other, this one, …), so that both meet the same load of a shared machine;
the ratio is this checkout's median over the other's. Each command that runs forever (``serve``,
``worker``) is stopped at its first output.

    .venv/bin/python bench/cli_start.py [--against ../before] \\
        [--postgres-url postgresql://postgres@127.0.0.1/postgres]

Each backend's database is made fresh and migrated first (SQLite: a temporary file;
PostgreSQL: ``commerce_bench_cli`` beside the URL's, dropped at the end), with one account and
one key, so that ``migrate`` finds it at head and the listings have a row.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 0.5
BENCH_DATABASE = "commerce_bench_cli"

# Each command, as a user types it; {account}, {key} and {file} are filled in per backend.
COMMANDS: list[tuple[str, ...]] = [
    ("--help",),
    ("migrate",),
    ("accounts", "list"),
    ("accounts", "list", "--json"),
    ("accounts", "create", "Bench Shop"),
    ("keys", "list"),
    ("keys", "list", "--json"),
    ("keys", "create", "--account", "{account}"),
    ("keys", "create", "--admin"),
    ("keys", "revoke", "{key}"),
    ("products", "import", "{file}"),
    ("orders", "fulfill", "ord_unknown"),
    ("worker",),
    ("serve", "--port", "0"),
]


# The commands that run until stopped: each is stopped (SIGINT) at its first output.
SERVERS = {"worker", "serve"}


@dataclass(frozen=True)
class Run:
    first_output: float  # seconds from the start to the first byte on stdout or stderr
    cpu: float  # the process's user and system time (until it ended, or was stopped)


def run_once(script: Path, args: tuple[str, ...], env: dict[str, str], cwd: Path) -> Run:
    """One run of ``script args``, read until both its streams close (a server: until its
    first output, then stopped), its CPU time from the kernel's account of it (``wait4``)."""
    started = time.perf_counter()
    process = subprocess.Popen(  # noqa: S603  # the checkout's own console script
        [str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    streams = [process.stdout.fileno(), process.stderr.fileno()]
    first: float | None = None
    while streams and not (first is not None and args[0] in SERVERS):
        ready, _, _ = select.select(streams, [], [], 60)
        if not ready:
            os.kill(process.pid, signal.SIGKILL)
            raise TimeoutError(f"{args} said nothing for 60 s")
        for fd in ready:
            if os.read(fd, 65536):
                first = first if first is not None else time.perf_counter() - started
            else:
                streams.remove(fd)
    if streams:  # a server: stopped as Ctrl-C stops it
        os.kill(process.pid, signal.SIGINT)
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = 0  # reaped above
    process.stdout.close()
    process.stderr.close()
    if first is None:
        raise RuntimeError(f"{args} printed nothing")
    return Run(first, usage.ru_utime + usage.ru_stime)


def fill(args: tuple[str, ...], values: dict[str, str]) -> tuple[str, ...]:
    return tuple(arg.format(**values) for arg in args)


def prepare(script: Path, env: dict[str, str], cwd: Path) -> dict[str, str]:
    """Migrate the database, and make an account and a key (and a products file) for the
    commands that name them."""
    subprocess.run([str(script), "migrate"], env=env, cwd=cwd, check=True, capture_output=True)  # noqa: S603

    def last_line(*args: str) -> str:
        done = subprocess.run(  # noqa: S603
            [str(script), *args], env=env, cwd=cwd, check=True, capture_output=True, text=True
        )
        return done.stdout.strip().splitlines()[-1]

    account = last_line("accounts", "create", "Bench")
    last_line("keys", "create", "--account", account)
    listed = subprocess.run(  # noqa: S603
        [str(script), "keys", "list", "--json"],
        env=env,
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    key = json.loads(listed.stdout)[0]["id"]
    products = cwd / "products.json"
    products.write_text(
        json.dumps(
            [
                {
                    "name": f"Bench product {n}",
                    "description": "",
                    "price": 1000,
                    "category": "bench",
                    "inventory_count": 5,
                }
                for n in range(10)
            ]
        )
    )
    return {"account": account, "key": key, "file": str(products)}


@contextmanager
def backend_url(name: str, postgres_url: str | None, workdir: Path) -> Iterator[str]:
    if name == "sqlite":
        yield f"sqlite:///{workdir / 'bench.db'}"
        return
    assert postgres_url is not None
    admin = make_url(postgres_url).set(drivername="postgresql")
    dsn = admin.render_as_string(hide_password=False)

    def psql(statement: str) -> None:
        subprocess.run(["psql", dsn, "-qc", statement], check=True, capture_output=True)  # noqa: S603, S607

    psql(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')
    psql(f'CREATE DATABASE "{BENCH_DATABASE}"')
    try:
        yield admin.set(database=BENCH_DATABASE).render_as_string(hide_password=False)
    finally:
        psql(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--against", type=Path, help="another checkout, timed in turn with this")
    parser.add_argument("--postgres-url", help="also on PostgreSQL (a database beside this one)")
    options = parser.parse_args()
    checkouts = {"this": ROOT}
    if options.against is not None:
        checkouts["other"] = options.against.resolve()
    scripts = {name: path / ".venv" / "bin" / "commerce-api" for name, path in checkouts.items()}
    backends = ["sqlite"] + (["postgresql"] if options.postgres_url else [])
    print(f"load average before: {os.getloadavg()}")
    for backend in backends:
        with (
            tempfile.TemporaryDirectory() as tmp,
            backend_url(backend, options.postgres_url, Path(tmp)) as url,
        ):
            workdir = Path(tmp)
            env = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
            env["COMMERCE_DATABASE_URL"] = url
            values = prepare(scripts["this"], env, workdir)
            header = f"{'command':<34} " + "  ".join(
                f"{name + ' first output s':<26}{name + ' cpu s':<24}" for name in checkouts
            )
            print(
                f"\n{backend}\n{header}"
                + ("  this/other first output" if len(checkouts) > 1 else "")
            )
            for command in COMMANDS:
                args = fill(command, values)
                runs: dict[str, list[Run]] = {name: [] for name in checkouts}
                for round_ in range(options.runs + 1):
                    for name, script in scripts.items():
                        run = run_once(script, args, env, workdir)
                        if round_:  # the first round warms the caches
                            runs[name].append(run)
                line = f"{' '.join(command):<34} "
                for name in checkouts:
                    line += f"{summary([r.first_output for r in runs[name]]):<26}"
                    line += f"{summary([r.cpu for r in runs[name]]):<24}  "
                if len(checkouts) > 1:
                    ratio = statistics.median(
                        r.first_output for r in runs["this"]
                    ) / statistics.median(r.first_output for r in runs["other"])
                    line += f"{ratio:.2f}"
                print(line, flush=True)
    print(
        f"\nload average after: {os.getloadavg()}; target: first output within {TARGET_SECONDS} s"
    )


if __name__ == "__main__":
    main()
