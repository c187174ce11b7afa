"""``make dist`` builds what another project installs, and the clients install from it.

It runs the real target into a temporary directory (``DIST=…``), then installs the Python
client's wheel into a fresh virtual environment (its dependencies from uv's cache, or the
package index) and the TypeScript client's tarball into a fresh npm project (it has no
dependencies), and imports each from there. When ``client-ts/node_modules`` holds the TypeScript
compiler the target's ``npm ci`` is skipped (``NPM_CI=true``): the tree's own TypeScript compiles
the tarball. A ``node_modules`` without it (left half-installed, or copied without its files) is
installed again by the target's ``npm ci``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CLIENT_TS = ROOT / "client-ts"
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
NODE = shutil.which("node")
NPM = shutil.which("npm")
BUILD_TIMEOUT_SECONDS = 300

pytestmark = [
    pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH"),
    # One worker: `make dist` builds in the work tree (client-ts/), once.
    pytest.mark.xdist_group("dist"),
]


def run(*args: str | Path, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    compiler = CLIENT_TS / "node_modules" / "typescript" / "bin" / "tsc"
    npm_ci = ["NPM_CI=true"] if compiler.is_file() else []
    run("make", "--no-print-directory", "dist", f"DIST={out}", *npm_ci)
    return out


def test_dist_holds_the_wheel_and_sdist_of_each_python_package(dist: Path) -> None:
    names = {path.name for path in dist.iterdir()}
    for package in ("commerce_api", "commerce_client"):
        assert f"{package}-0.1.0-py3-none-any.whl" in names
        assert f"{package}-0.1.0.tar.gz" in names


def test_dist_is_ignored_by_git() -> None:
    assert run("git", "check-ignore", "dist/commerce_client-0.1.0.tar.gz").strip()


def test_the_client_wheel_installs_into_a_fresh_venv_and_imports(
    dist: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    run(UV, "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    [wheel] = dist.glob("commerce_client-*.whl")
    run(UV, "pip", "install", "--quiet", "--python", python, wheel)
    where = run(
        python,
        "-c",
        "import commerce_client as c; "
        "c.Client(api_key='sk_sandbox_x', base_url='http://127.0.0.1:1/v1').categories; "
        "print(c.__file__, c.__version__)",
        cwd=tmp_path,
    )
    assert where.startswith(str(venv)), where
    assert where.split()[-1] == "0.1.0"


@pytest.mark.skipif(NODE is None or NPM is None, reason="no Node.js on PATH: no tarball")
def test_the_typescript_tarball_installs_into_a_fresh_project_and_imports(
    dist: Path, tmp_path: Path
) -> None:
    [tarball] = dist.glob("commerce-client-*.tgz")
    (tmp_path / "package.json").write_text('{"name": "shop", "private": true, "type": "module"}')
    run("npm", "install", "--no-audit", "--no-fund", "--offline", tarball, cwd=tmp_path)
    program = (
        "import { CommerceClient, VERSION } from 'commerce-client';"
        "const c = new CommerceClient({ apiKey: 'sk_sandbox_x', baseUrl: 'http://a.test/v1' });"
        "console.log(typeof c.categories.list, typeof c.products.archive, VERSION);"
    )
    out = run("node", "--input-type=module", "-e", program, cwd=tmp_path)
    assert out.split() == ["function", "function", "0.1.0"]
    installed = tmp_path / "node_modules" / "commerce-client" / "dist"
    assert (installed / "index.d.ts").is_file()
    # The CommonJS build is in the tarball too, with its declarations.
    required = "console.log(typeof require('commerce-client').CommerceClient)"
    assert run("node", "--input-type=commonjs", "-e", required, cwd=tmp_path).split() == [
        "function"
    ]
    assert (installed / "cjs" / "index.d.ts").is_file()
