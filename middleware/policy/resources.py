"""Find the shipped ``policies/`` and ``schemas/`` folders, installed or not.

A wheel carries them as package data under ``middleware/_data/``; an editable install or a
source checkout reads them from the project root beside the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from middleware.errors import PolicyError

#: The installed ``middleware`` package (this module lives in ``middleware/policy/``).
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


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


#: How a policy argument names a shipped preset instead of a file: ``preset:claude-code``.
PRESET_PREFIX = "preset:"


def preset_names() -> list[str]:
    """The shipped presets (``policies/presets/*.yaml``), by name."""
    return sorted(p.stem for p in (data_dir("policies") / "presets").glob("*.yaml"))


def resolve_policy_path(path: str | Path) -> Path:
    """``path`` itself, or the file of the preset ``preset:NAME`` names."""
    text = str(path)
    if not text.startswith(PRESET_PREFIX):
        return Path(path)
    name = text[len(PRESET_PREFIX) :]
    if name not in preset_names():
        raise PolicyError(
            f"no preset named {name!r}; the shipped presets are: {', '.join(preset_names())}",
            source=text,
        )
    return data_dir("policies") / "presets" / f"{name}.yaml"
