"""Policy files: YAML read safely, duplicate keys rejected, every node's line remembered,
and schema errors reported as ``file:line:col: $.json.path: message``."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from middleware.errors import PolicyError
from middleware.policy.schema import policy_schema

#: json path ("$.budget.max_result_chars") -> (line, column), 1-based
Lines = dict[str, tuple[int, int]]


def read_policy_file(path: Path) -> tuple[dict[str, Any], Lines]:
    """The document of one policy file and where each of its values is."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"cannot read policy: {exc.strerror or exc}", source=source) from exc
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise PolicyError(
            f"invalid YAML: {getattr(exc, 'problem', None) or exc}",
            source=source,
            line=None if mark is None else mark.line + 1,
            column=None if mark is None else mark.column + 1,
        ) from exc
    if node is None:
        raise PolicyError(
            "the policy file is empty (it needs at least `version: 1`)", source=source
        )
    lines: Lines = {}
    _check_and_map(node, "$", lines, source)
    document = yaml.safe_load(text)
    if not isinstance(document, dict):
        raise PolicyError("a policy must be a mapping of sections", source=source, line=1, column=1)
    return document, lines


def _check_and_map(node: yaml.Node, path: str, lines: Lines, source: str) -> None:
    lines[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise PolicyError(
                    f"duplicate key {key!r} (first set on line {first}; YAML would silently "
                    "keep the last one)",
                    source=source,
                    line=key_node.start_mark.line + 1,
                    column=key_node.start_mark.column + 1,
                    path=f"{path}.{key}",
                )
            seen[key] = key_node
            _check_and_map(value_node, f"{path}.{key}", lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_and_map(item, f"{path}[{i}]", lines, source)


def schema_errors(
    document: Mapping[str, Any], *, source: str, lines: Lines | None = None
) -> list[PolicyError]:
    """Every schema violation of ``document``, best first, located where possible."""
    validator = jsonschema.Draft7Validator(policy_schema())
    errors = sorted(validator.iter_errors(document), key=jsonschema.exceptions.relevance)
    return [_located(error, source, lines or {}) for error in errors]


def _located(error: jsonschema.ValidationError, source: str, lines: Lines) -> PolicyError:
    path = error.json_path
    message = error.message
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        allowed = list(schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra:
            key = extra[0]
            path = f"{path}.{key}"
            message = f"unknown key {key!r}"
            close = difflib.get_close_matches(str(key), allowed, n=1)
            message += (
                f"; did you mean {close[0]!r}?"
                if close
                else (f"; expected one of: {', '.join(allowed)}")
            )
    probe = path
    while probe not in lines and "." in probe:
        probe = probe.rsplit(".", 1)[0]
    line, column = lines.get(probe, (None, None))
    return PolicyError(message, source=source, line=line, column=column, path=path)
