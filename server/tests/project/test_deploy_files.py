"""The example deployment files in ``deploy/`` and ``docs/deployment.md`` stay true.

systemd units are parsed (and checked by ``systemd-analyze verify`` where it exists), the
compose file is parsed and its ``COMMERCE_*`` variables are compared with the real settings,
the nginx sites are checked for their structure (and by ``nginx -t`` where nginx is installed,
or ``COMMERCE_TEST_NGINX`` names a binary), and every ``commerce-api`` command line they or the
guide contain must parse: its commands and options exist in ``commerce-api --help``.
"""

from __future__ import annotations

import configparser
import functools
import ipaddress
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from commerce_api.settings import Settings
from tests.helpers import self_signed_certificate

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
SYSTEMD = DEPLOY / "systemd"
COMPOSE = DEPLOY / "compose"
GUIDE = ROOT / "docs" / "deployment.md"
NGINX_SITES = [DEPLOY / "nginx" / "commerce-api.conf", COMPOSE / "nginx.conf"]
COMMERCE_API = Path(sys.executable).with_name("commerce-api")
INSTALLED_BINARY = "/opt/commerce-api/.venv/bin/commerce-api"
ENV_FILE = "/etc/commerce-api/commerce-api.env"
SETTING_NAMES = {f"COMMERCE_{name.upper()}" for name in Settings.model_fields}


def _setting(variable: str) -> str:
    assert variable in SETTING_NAMES, f"{variable} is not a setting of commerce_api.settings"
    return variable.removeprefix("COMMERCE_").lower()


# --- commerce-api command lines ----------------------------------------------------------


@functools.cache
def _help(*path: str) -> str:
    result = subprocess.run(
        [str(COMMERCE_API), *path, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")},
    )
    assert result.returncode == 0, (path, result.stderr)
    return result.stdout


def _subcommands(help_text: str) -> set[str]:
    _, _, listing = help_text.partition("Commands:")
    return {line.split()[0] for line in listing.splitlines() if line.startswith("  ")}


def check_invocation(args: list[str]) -> None:
    """``args`` (after ``commerce-api``) names existing commands and options."""
    path: list[str] = []
    for token in args:
        if token in {"|", "&&", "||", ";", "\\", ">", "2>&1"} or token.startswith("#"):
            break
        help_text = _help(*path)
        if token.startswith("-"):
            option = token.split("=", 1)[0]
            assert re.search(rf"(^|[\s,]){re.escape(option)}\b", help_text), (
                f"`commerce-api {' '.join(args)}`: no option {option} in "
                f"`commerce-api {' '.join(path)} --help`"
            )
        elif token in _subcommands(help_text):
            path.append(token)
        elif not path:
            raise AssertionError(f"`commerce-api {' '.join(args)}`: no command {token!r}")
    assert path or all(token.startswith("-") for token in args), f"`commerce-api {args}`"


def _invocations_in(text: str) -> list[list[str]]:
    """Every ``commerce-api …`` command line in code (shell blocks and inline spans)."""
    code = re.findall(r"```(?:sh|bash|shell|console)\n(.*?)```", text, flags=re.DOTALL)
    code += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.DOTALL))
    found = []
    for chunk in code:
        for line in chunk.splitlines():
            for match in re.finditer(r"(?:^|\s|/bin/)commerce-api((?: +[^\s|;&]+)+)", line):
                found.append(shlex.split(match.group(1), comments=True))
    return found


def test_the_guide_only_invokes_real_commands() -> None:
    invocations = _invocations_in(GUIDE.read_text(encoding="utf-8"))
    commands = {args[0] for args in invocations if args}
    assert {"serve", "worker", "migrate"} <= commands, commands
    assert any("--no-dispatcher" in args for args in invocations if args[0] == "serve")
    for args in invocations:
        check_invocation(args)


# --- systemd -----------------------------------------------------------------------------


def _unit(name: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((SYSTEMD / name).read_text(encoding="utf-8"), source=name)
    return parser


SERVICES = {
    "commerce-api@.service": ["serve", "--no-dispatcher"],
    "commerce-worker@.service": ["worker"],
    "commerce-api-migrate.service": ["migrate"],
}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_systemd_service_units(name: str) -> None:
    unit = _unit(name)
    assert unit.has_section("Unit")
    assert unit.has_section("Service")
    service = unit["Service"]
    assert service["EnvironmentFile"] == ENV_FILE
    assert service["User"] == "commerce"
    exec_start = shlex.split(service["ExecStart"])
    assert exec_start[0] == INSTALLED_BINARY
    args = exec_start[1:]
    assert args[: len(SERVICES[name])] == SERVICES[name]
    check_invocation(args)
    if name.endswith("@.service") and name != "commerce-worker@.service":
        assert args[args.index("--port") + 1] == "%i", "the instance name is the port"
        assert args[args.index("--host") + 1] == "127.0.0.1", "nginx is the way in"
    if service["Type"] != "oneshot":
        assert service["Restart"] in {"always", "on-failure"}
        assert unit["Unit"]["PartOf"] == "commerce-api.target"
        assert unit["Install"]["WantedBy"] == "commerce-api.target"


def test_systemd_target_and_units_verify(tmp_path: Path) -> None:
    target = _unit("commerce-api.target")
    assert target["Install"]["WantedBy"] == "multi-user.target"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed; the units were only parsed")
    # Instances of the templates, with the binary where this checkout has it.
    copies = {
        "commerce-api@8001.service": "commerce-api@.service",
        "commerce-worker@1.service": "commerce-worker@.service",
        "commerce-api-migrate.service": "commerce-api-migrate.service",
        "commerce-api.target": "commerce-api.target",
    }
    for copy, source in copies.items():
        text = (SYSTEMD / source).read_text(encoding="utf-8")
        (tmp_path / copy).write_text(text.replace(INSTALLED_BINARY, str(COMMERCE_API)))
    result = subprocess.run(
        [analyze, "verify", *(str(tmp_path / copy) for copy in copies)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert not re.search(r"Unknown (key|section)|bad unit file|Failed", output), output


def _env_file(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(settings assigned, settings shown commented out with their default)."""
    assigned: dict[str, str] = {}
    commented: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if match := re.fullmatch(r"(#\s*)?(COMMERCE_[A-Z_]+)=(.*)", line.strip()):
            (commented if match.group(1) else assigned)[match.group(2)] = match.group(3)
    return assigned, commented


def test_environment_file_example() -> None:
    assigned, commented = _env_file(SYSTEMD / "commerce-api.env.example")
    values = {_setting(name): value for name, value in assigned.items()}
    settings = Settings.model_validate(values)  # the file alone, not this environment
    assert settings.environment == "production"
    assert settings.database_url.startswith("postgresql://")
    assert settings.redis_url
    assert settings.secret_key is not None
    for name, value in commented.items():
        field = _setting(name)
        parsed = getattr(Settings.model_validate({field: value}), field)
        default = Settings.model_fields[field].default
        if default is not None:
            assert parsed == default, f"{name}={value}: the default is {default!r}"
    shown = set(assigned) | set(commented)
    missing = {name for name in SETTING_NAMES if name not in shown} - {"COMMERCE_RUN_DISPATCHER"}
    # Settings another change may add (logging, metrics) are documented in README; the ones
    # this file knows must all be there.
    known = {
        "COMMERCE_DATABASE_URL",
        "COMMERCE_ENVIRONMENT",
        "COMMERCE_REDIS_URL",
        "COMMERCE_SECRET_KEY",
        "COMMERCE_CURRENCY",
        "COMMERCE_RATE_LIMIT_ENABLED",
        "COMMERCE_RATE_LIMIT_DEVELOPMENT",
        "COMMERCE_RATE_LIMIT_PRODUCTION",
        "COMMERCE_RATE_LIMIT_WINDOW_SECONDS",
        "COMMERCE_REDIS_KEY_PREFIX",
        "COMMERCE_WEBHOOK_RETRY_SCHEDULE",
        "COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS",
        "COMMERCE_WEBHOOK_TIMEOUT_SECONDS",
        "COMMERCE_WEBHOOK_POLL_SECONDS",
    }
    assert not (missing & known), sorted(missing & known)
    # nginx on the same host is the one proxy whose X-Forwarded-For is believed.
    assert settings.trusted_proxies == ("127.0.0.1", "::1")


# --- docker compose ----------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(
        (COMPOSE / "compose.yaml").read_text(encoding="utf-8")
    )
    return document


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {str(key): str(value) for key, value in env.items()}


def test_compose_services() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", "migrate", "api", "worker", "nginx"}

    api = services["api"]
    assert api["command"][:2] == ["serve", "--no-dispatcher"]
    assert api["deploy"]["replicas"] >= 2
    assert "ports" not in api, "only nginx is published"
    assert "/readyz" in " ".join(api["healthcheck"]["test"])
    assert services["worker"]["command"] == ["worker"]
    assert services["migrate"]["command"] == ["migrate"]
    for name in ("api", "worker"):
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
    for name in ("migrate", "api", "worker"):
        check_invocation(services[name]["command"])
        assert services[name]["build"]["dockerfile"] == "deploy/compose/Dockerfile"
        assert (COMPOSE / services[name]["build"]["context"]).resolve() == ROOT
    assert services["nginx"]["depends_on"]["api"] == {"condition": "service_healthy"}
    mounts = [volume.split(":")[0] for volume in services["nginx"]["volumes"]]
    assert "./nginx.conf" in mounts


def test_compose_settings_are_real_and_identical_in_every_process() -> None:
    services = _compose()["services"]
    per_service: dict[str, dict[str, str]] = {}
    for name, service in services.items():
        commerce = {k: v for k, v in _environment(service).items() if k.startswith("COMMERCE_")}
        for variable in commerce:
            _setting(variable)
        if commerce:
            per_service[name] = commerce
    assert set(per_service) == {"migrate", "api", "worker"}
    first = per_service["api"]
    assert all(env == first for env in per_service.values()), per_service
    assert first["COMMERCE_ENVIRONMENT"] == "production"
    assert first["COMMERCE_DATABASE_URL"].startswith("postgresql://")
    assert first["COMMERCE_REDIS_URL"].startswith("redis://redis:")
    assert first["COMMERCE_SECRET_KEY"].startswith("${COMMERCE_SECRET_KEY:?")
    # nginx's X-Forwarded-For is believed; the replicas publish no port for anyone else.
    assert first["COMMERCE_TRUSTED_PROXIES"] == "*"
    assert "FORWARDED_ALLOW_IPS" not in _environment(services["api"]), "uvicorn's, not ours"


def test_dockerfile() -> None:
    instructions = [
        line.split(maxsplit=1)
        for line in (COMPOSE / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith(("#", " "))
    ]
    assert instructions[0][0] == "FROM"
    for keyword, rest in instructions:
        if keyword == "COPY" and not rest.startswith("--from"):
            for source in rest.split()[:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    entry = dict(instructions)
    assert entry["ENTRYPOINT"] == '["commerce-api"]'
    assert entry["USER"] == "commerce"
    check_invocation(yaml.safe_load(entry["CMD"]))


# --- nginx -------------------------------------------------------------------------------


def _without_comments(text: str) -> str:
    return "\n".join(re.sub(r"(^|\s)#.*", "", line) for line in text.splitlines())


def _blocks(text: str, head: str) -> list[str]:
    """The bodies of the blocks ``head {…}`` (``head`` a regular expression)."""
    bodies = []
    for match in re.finditer(rf"{head}\s*\{{", text):
        depth, start = 1, match.end()
        index = start
        while depth:
            depth += {"{": 1, "}": -1}.get(text[index], 0)
            index += 1
        bodies.append(text[start : index - 1])
    return bodies


@pytest.mark.parametrize("site", NGINX_SITES, ids=lambda path: path.parent.name)
def test_nginx_site_structure(site: Path) -> None:
    text = _without_comments(site.read_text(encoding="utf-8"))
    depth = 0
    for char in re.sub(r'"[^"]*"', "", text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0, "a } closes nothing"
    assert depth == 0, "unbalanced braces"
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.endswith(("{", "}", ";")):
            raise AssertionError(f"a directive without ';': {stripped!r}")

    (upstream,) = _blocks(text, r"upstream\s+commerce_api")
    servers = re.findall(r"^\s*server\s+(\S+)", upstream, flags=re.MULTILINE)
    assert servers, "the upstream lists no server"
    if site.parent.name == "nginx":  # on a host: one line per commerce-api@PORT instance
        assert len(servers) >= 2
        assert all(server.startswith("127.0.0.1:") for server in servers)

    assert re.search(r"listen\s+443\s+ssl", text), "TLS at the proxy"
    assert "ssl_certificate " in text
    assert "return 301 https://" in text
    headers = dict(re.findall(r"proxy_set_header\s+(\S+)\s+([^;]+);", text))
    assert headers.get("X-Forwarded-For") == "$remote_addr", headers
    assert headers.get("X-Forwarded-Proto") == "$scheme", headers
    assert headers.get("Host") == "$host", headers
    assert "proxy_pass http://commerce_api;" in text
    # An idle upstream connection is dropped by nginx before the instance closes it (5 s).
    (timeout,) = re.findall(r"keepalive_timeout\s+(\d+)s;", upstream)
    assert int(timeout) < Settings.model_fields["http_keep_alive_seconds"].default
    # Connections per client: granian cannot count them, nginx does.
    (zone,) = re.findall(r"limit_conn_zone\s+\$binary_remote_addr\s+zone=(\w+):", text)
    assert re.search(rf"limit_conn\s+{zone}\s+\d+;", text)
    (metrics,) = _blocks(text, r"location\s+=\s+/metrics")
    assert "deny all;" in metrics
    assert re.search(r"allow\s+127\.0\.0\.1;", metrics)
    assert "allow all" not in metrics


def _loopback_upstreams(text: str) -> str:
    """Upstream host names (``api:8000``) resolve only inside compose: use 127.0.0.1."""

    def replace(match: re.Match[str]) -> str:
        host, port = match.group(2), match.group(3)
        try:
            ipaddress.ip_address(host)
        except ValueError:
            host = "127.0.0.1"
        return f"{match.group(1)}{host}:{port}"

    return re.sub(r"(^\s*server\s+)([\w.-]+):(\d+)", replace, text, flags=re.MULTILINE)


@pytest.mark.parametrize("site", NGINX_SITES, ids=lambda path: path.parent.name)
def test_nginx_accepts_the_site(site: Path, tmp_path: Path) -> None:
    nginx = os.environ.get("COMMERCE_TEST_NGINX") or shutil.which("nginx")
    if not nginx:
        pytest.skip(
            "nginx is not installed (set COMMERCE_TEST_NGINX); only the structure was checked"
        )
    cert, key = self_signed_certificate(tmp_path, "localhost")
    text = site.read_text(encoding="utf-8")
    text = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};", text)
    text = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};", text)
    (tmp_path / "site.conf").write_text(_loopback_upstreams(text))
    temp_paths = "".join(
        f"    {kind}_temp_path {tmp_path / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    main = (
        f"pid {tmp_path / 'nginx.pid'};\n"
        f"error_log {tmp_path / 'error.log'};\n"
        "events {}\n"
        "http {\n"
        f"    access_log off;\n{temp_paths}"
        f"    include {tmp_path / 'site.conf'};\n"
        "}\n"
    )
    (tmp_path / "nginx.conf").write_text(main)
    result = subprocess.run(
        [
            nginx,
            "-t",
            "-q",
            "-p",
            str(tmp_path),
            "-e",
            str(tmp_path / "error.log"),
            "-c",
            str(tmp_path / "nginx.conf"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
