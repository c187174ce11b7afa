"""The TypeScript client's OpenAPI snapshot is the server's document.

``client-ts/openapi.json`` is what ``client-ts/src/generated/schema.ts`` (the client's types)
is generated from. Any server change that alters ``/v1/openapi.json`` fails here until the
snapshot and the types are regenerated::

    cd client-ts && npm run openapi:update && npm run build

(``npm test`` in ``client-ts`` checks the same, and that ``schema.ts`` matches the snapshot.)
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from commerce_api.app.factory import create_app

CLIENT_TS = Path(__file__).resolve().parents[3] / "client-ts"
SNAPSHOT = CLIENT_TS / "openapi.json"
GENERATED = CLIENT_TS / "src" / "generated" / "schema.ts"
REGENERATE = "cd client-ts && npm run openapi:update && npm run build"


def _differences(old: Any, new: Any, where: str = "$") -> list[str]:
    """Paths at which two JSON values differ (the first few are enough to say what changed)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(old.keys() | new.keys()):
            if key not in new:
                found.append(f"{where}.{key}: removed")
            elif key not in old:
                found.append(f"{where}.{key}: added")
            else:
                found.extend(_differences(old[key], new[key], f"{where}.{key}"))
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            d
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for d in _differences(a, b, f"{where}[{i}]")
        ]
    return [] if old == new else [f"{where}: changed"]


def test_snapshot_is_the_live_openapi_document() -> None:
    live = json.loads(json.dumps(create_app().openapi()))
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    differences = _differences(snapshot, live)
    assert not differences, (
        "The API changed but the TypeScript client's snapshot did not; regenerate with "
        f"`{REGENERATE}`. First differences: {differences[:10]}"
    )


def test_generated_types_come_from_the_snapshot() -> None:
    digest = hashlib.sha256(SNAPSHOT.read_bytes()).hexdigest()
    match = re.search(
        r"^// openapi\.json sha256: ([0-9a-f]{64})$", GENERATED.read_text("utf-8"), re.M
    )
    assert match is not None, f"{GENERATED} has no snapshot digest; regenerate with `{REGENERATE}`"
    assert match.group(1) == digest, (
        f"{GENERATED.name} was generated from another openapi.json; regenerate with `{REGENERATE}`"
    )
