from __future__ import annotations

from importlib.metadata import version

import commerce_client


def test_package_version_matches_distribution() -> None:
    assert commerce_client.__version__ == version("commerce-client")
