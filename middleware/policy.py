"""Policies: the declarative settings of the three steps, as one immutable snapshot."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import yaml

from .errors import PolicyError
from .resources import default_policy_path, policy_schema_path


@dataclass(frozen=True)
class Policy:
    """A validated, deep-frozen policy document and where it came from."""

    data: Mapping[str, Any]
    source: str

    @property
    def name(self) -> str:
        return str(self.data.get("name", self.source))

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the document (equal policies, equal digests)."""
        canonical = json.dumps(_thaw(self.data), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def get(self, dotted: str, default: Any = None) -> Any:
        """The value at ``section.key`` (``default`` when absent)."""
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node


def load_policy(path: str | Path | None = None) -> Policy:
    """Load and validate a policy file; ``None`` loads the embedded default."""
    file = default_policy_path() if path is None else Path(path)
    source = "embedded default" if path is None else str(file)
    try:
        document = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyError(f"cannot read policy: {exc.strerror}", source=str(file)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise PolicyError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}",
            source=str(file),
            line=None if mark is None else mark.line + 1,
            column=None if mark is None else mark.column + 1,
        ) from exc
    schema = json.loads(policy_schema_path().read_text(encoding="utf-8"))
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft7Validator(schema).iter_errors(document)
    )
    if error is not None:
        raise PolicyError(error.message, source=str(file), path=error.json_path)
    return Policy(_freeze(document), source)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value
