"""The policy's JSON Schema: the one place where each key's type, meaning and default live.

The embedded default policy is the schema's ``default`` values; the loader, the settings
binder, the environment parser and the generated reference (``docs/policy.md``) all read
them from here, so adding a key means editing the schema and the settings class that reads
it, nothing else.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from middleware.policy.resources import policy_schema_path

#: Top-level keys that describe the policy itself rather than set a step's behaviour.
DOCUMENT_KEYS = frozenset({"$schema", "extends", "version", "name", "description"})


@cache
def policy_schema() -> dict[str, Any]:
    """The schema document (read once; treat it as read-only)."""
    schema: dict[str, Any] = json.loads(policy_schema_path().read_text(encoding="utf-8"))
    return schema


def resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """``node`` itself, or the part of the schema its local ``$ref`` points at, with the
    annotations written beside the reference (``default``, ``$comment``) on top."""
    if "$ref" not in node:
        return node
    target: Any = policy_schema()
    for part in str(node["$ref"]).removeprefix("#/").split("/"):
        target = target[part]
    annotations = {k: v for k, v in node.items() if k != "$ref"}
    return {**resolve(target), **annotations}


@dataclass(frozen=True)
class Key:
    """One settable leaf of the policy: its dotted name and its schema."""

    dotted: str
    schema: Mapping[str, Any]

    @property
    def default(self) -> Any:
        return copy.deepcopy(self.schema.get("default"))

    @property
    def types(self) -> tuple[str, ...]:
        kind = self.schema.get("type")
        if kind is None and "enum" in self.schema:
            return tuple(sorted({_json_type(v) for v in self.schema["enum"]}))
        if kind is None and "const" in self.schema:
            return (_json_type(self.schema["const"]),)
        return (kind,) if isinstance(kind, str) else tuple(kind or ())


def keys(node: Mapping[str, Any] | None = None, prefix: str = "") -> Iterator[Key]:
    """Every leaf key under ``node`` (default: the whole schema), in schema order. A
    mapping with fixed ``properties`` is a section and is walked; anything else (including
    ``tools``, whose keys are tool names) is a leaf."""
    node = resolve(policy_schema() if node is None else node)
    for name, raw in node.get("properties", {}).items():
        dotted = f"{prefix}{name}"
        child = resolve(raw)
        if "properties" in child:
            yield from keys(child, f"{dotted}.")
        else:
            yield Key(dotted, child)


def key_schema(dotted: str) -> Mapping[str, Any] | None:
    """The schema of ``section.key`` (through ``additionalProperties`` for the entries of
    ``tools``), or ``None`` when the policy has no such key."""
    node: Mapping[str, Any] = policy_schema()
    for part in dotted.split("."):
        node = resolve(node)
        properties = node.get("properties", {})
        if part in properties:
            node = properties[part]
        elif isinstance(node.get("additionalProperties"), Mapping):
            node = node["additionalProperties"]
        else:
            return None
    return resolve(node)


def default_of(dotted: str) -> Any:
    """The schema default of one key, or of a whole section (a fresh copy)."""
    schema = key_schema(dotted)
    if schema is not None and "default" in schema:
        return copy.deepcopy(schema["default"])
    if schema is not None and "properties" in schema:
        return {name: default_of(f"{dotted}.{name}") for name in schema["properties"]}
    raise KeyError(f"the policy schema has no default for {dotted!r}")


def defaults() -> dict[str, Any]:
    """The embedded default policy's settings, nested like a policy document."""
    document: dict[str, Any] = {}
    for key in keys():
        if key.dotted in DOCUMENT_KEYS:
            continue
        node = document
        *parents, last = key.dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = key.default
    return document


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object"
