"""Find the shipped ``policies/`` and ``schemas/`` folders, installed or not.

A wheel carries them as package data under ``middleware/_data/``; an editable install or a
source checkout reads them from the project root beside the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(kind: Literal["policies", "schemas"]) -> Path:
    """The folder holding the shipped policies or schemas."""
    for candidate in (_PACKAGE_DIR / "_data" / kind, _PACKAGE_DIR.parent / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"the shipped {kind}/ folder is missing from this installation of chatcli-middleware "
        f"(looked in {_PACKAGE_DIR / '_data' / kind} and {_PACKAGE_DIR.parent / kind}); "
        "reinstall the package"
    )


def default_policy_path() -> Path:
    return data_dir("policies") / "default.yaml"


def policy_schema_path() -> Path:
    return data_dir("schemas") / "policy.schema.json"
