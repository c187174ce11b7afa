"""An order batch branches on its backend in one place: ``placement.backend_for``, which the
desk asks once. The rest of the batch's path is the backend's own class, or shared by both."""

from __future__ import annotations

import re
from pathlib import Path

import commerce_api.orders
from commerce_api.orders import placement

ORDERS = Path(commerce_api.orders.__file__).resolve().parent
# The modules an order batch runs, from the desk to its statements.
BATCH_PATH = (
    "desk.py",
    "placement.py",
    "batch_plan.py",
    "new_orders.py",
    "placement_repository.py",
    "batch_repository.py",
)
# A test of the backend: a dialect or backend compared, ``is_sqlite``, a backend named.
_BACKEND_TEST = re.compile(
    r"(dialect(\.name)?|backend)\s*(==|!=|\bin\b|\bnot in\b)"
    r"|is_sqlite|[\"'](sqlite|postgresql)[\"']"
)


def test_the_batch_path_chooses_its_backend_in_one_place() -> None:
    found = [
        f"{name}:{number}: {line.strip()}"
        for name in BATCH_PATH
        for number, line in enumerate((ORDERS / name).read_text().splitlines(), 1)
        if _BACKEND_TEST.search(line)
    ]
    assert len(found) == 1, "one branch point: give a backend's difference to its class\n" + (
        "\n".join(found)
    )
    assert found[0].startswith("placement.py:"), found
    assert "_BACKENDS" in found[0], found


def test_each_backend_has_its_batch() -> None:
    assert isinstance(placement.backend_for("sqlite"), placement.SQLiteBatch)
    assert isinstance(placement.backend_for("postgresql"), placement.PostgresBatch)
    assert placement.backend_for("sqlite").batches_in_flight(3) == 1
    assert placement.backend_for("postgresql").batches_in_flight(3) == 3
