"""How ``serve`` runs the app (``app.serving``): what its process imports before the workers.

granian forks the workers from ``serve``'s process, and prometheus-client reads
``PROMETHEUS_MULTIPROC_DIR`` when it is first imported: ``serve`` sets that only just before
granian starts, so neither the CLI nor its serving wiring may import the app (and with it
prometheus-client) on their own.
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_cli_imports_neither_the_app_nor_prometheus_client() -> None:
    code = (
        "import json, sys, commerce_api.cli; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'prometheus_client' "
        "or m.startswith(('commerce_api.app.factory', 'commerce_api.http.middleware')))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []
