"""What a newcomer looks for at the root of a clone is there and stays true (issue 45, item 7).

A LICENSE (Apache-2.0), a CHANGELOG.md in Keep a Changelog's form, a ``.env.example`` whose
every ``COMMERCE_*`` name is a real setting (and which, copied to ``.env`` as it is, starts a
sandbox), the README's "Scaled out on one machine" recipe with real commands, and
``make help`` listing every target the Makefile declares phony.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from commerce_api.settings import Settings
from tests.project.test_deploy_files import _invocations_in, check_invocation

ROOT = Path(__file__).resolve().parents[3]
SETTING_NAMES = {f"COMMERCE_{name.upper()}" for name in Settings.model_fields}


def _text(name: str) -> str:
    path = ROOT / name
    assert path.is_file(), f"{name} is missing at the repository's root"
    return path.read_text(encoding="utf-8")


def test_the_licence_is_apache_2_in_full() -> None:
    licence = _text("LICENSE")
    assert licence.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    for part in ("TERMS AND CONDITIONS FOR USE", "9. Accepting Warranty", "END OF TERMS"):
        assert part in licence, part


def test_the_changelog_keeps_a_changelog_and_starts_unreleased() -> None:
    changelog = _text("CHANGELOG.md")
    assert "Keep a Changelog" in changelog
    headings = re.findall(r"^## (.+)$", changelog, flags=re.MULTILINE)
    assert headings[0] == "[Unreleased]", headings
    assert re.search(r"^### (Added|Changed|Fixed|Removed|Deprecated|Security)$", changelog, re.M)


def test_env_example_names_only_real_settings_and_starts_a_sandbox(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    example = _text(".env.example")
    named = set(re.findall(r"\bCOMMERCE_[A-Z0-9_]+", example))
    assert named - SETTING_NAMES == set(), "not settings: commerce_api/settings.py has them all"
    assert {"COMMERCE_DATABASE_URL", "COMMERCE_SECRET_KEY", "COMMERCE_REDIS_URL"} <= named
    assigned = dict(
        line.split("=", 1) for line in example.splitlines() if line.startswith("COMMERCE_")
    )
    assert "COMMERCE_SECRET_KEY" not in assigned, "a secret is never given a value to copy"
    for variable in SETTING_NAMES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(example, encoding="utf-8")
    settings = Settings()  # copied as it is: a sandbox on SQLite, as `make serve`
    assert settings.environment == "sandbox"
    assert settings.database_url.startswith("sqlite:///")
    assert settings.secret_key is None


def test_the_readme_has_the_scaled_out_recipe_with_real_commands() -> None:
    readme = _text("README.md")
    _, found, section = readme.partition("\n## Scaled out on one machine\n")
    assert found, "README.md has no section 'Scaled out on one machine'"
    section = section.split("\n## ", 1)[0]
    assert "deploy/compose/" in section
    assert "sudo" not in section
    invocations = _invocations_in(section)
    commands = [args[:1] + [arg for arg in args if arg.startswith("--")] for args in invocations]
    assert commands.count(["serve", "--no-dispatcher", "--port"]) == 2, commands
    assert ["worker"] in commands, commands
    assert ["migrate"] in commands, commands
    # The whole README's too (its CLI section), a line continued by a backslash joined first.
    for args in _invocations_in(re.sub(r"\\\n\s*", " ", readme)):
        check_invocation(args)


def _phony_targets(makefile: str) -> set[str]:
    declared = re.findall(r"^\.PHONY:(.*(?:\\\n.*)*)$", makefile, flags=re.MULTILINE)
    return {target for line in declared for target in line.replace("\\\n", " ").split()}


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_lists_every_phony_target_with_a_line_each() -> None:
    help_text = subprocess.run(
        ["make", "--no-print-directory", "-s", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    listed = {}
    for line in help_text.splitlines():
        target, _, description = line.strip().partition(" ")
        listed[target] = description.strip()
    targets = _phony_targets(_text("Makefile"))
    assert {"help", "install", "serve", "test", "lint"} <= targets
    assert targets - listed.keys() == set(), "give each target a `## what it does` comment"
    assert all(listed[target] for target in targets), listed
