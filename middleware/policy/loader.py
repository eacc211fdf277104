"""Loading a policy: layer, validate and freeze it into one immutable snapshot.

Layers, lowest to highest: the embedded default policy < the policy file (and the files it
``extends``) < ``.env`` < the real environment < explicit overrides. The merged document is
validated against ``schemas/policy.schema.json`` (whose ``default`` values are the embedded
default policy) and frozen; every leaf remembers where its value came from.
"""

from __future__ import annotations

import io
import os
import re
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from dotenv import dotenv_values
from dotenv.variables import parse_variables

from middleware.errors import PolicyError
from middleware.policy.document import Override, Policy, freeze
from middleware.policy.env import PREFIX, env_overrides
from middleware.policy.file_bytes import decode_utf8, read_bounded
from middleware.policy.files import Lines, read_policy_file, schema_errors
from middleware.policy.limits import FILE_SIZE, MAX_EXTENDS, MAX_FILE_BYTES, ValueProblem, plain
from middleware.policy.resources import (
    PRESET_PREFIX,
    data_dir,
    default_policy_path,
    resolve_policy_path,
)
from middleware.policy.schema import defaults
from middleware.policy.templates import template_problems

#: ``CHATCLI_POLICY``: the policy file ``load_policy(None)`` reads, when set.
POLICY_ENV = "CHATCLI_POLICY"

#: What the schema cannot say about a valid policy, told by the layer that knows it (the
#: proxy: which provider names exist): each check yields ``(dotted key, problem)``.
PolicyCheck = Callable[[Mapping[str, Any]], Iterator[tuple[str, str]]]
_CHECKS: list[PolicyCheck] = []


def register_check(check: PolicyCheck) -> PolicyCheck:
    """Make every policy loaded from now on pass ``check`` (a bad value is a
    :class:`PolicyError`, and hot reload keeps the last good policy)."""
    _CHECKS.append(check)
    return check


def load_policy(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    dotenv_path: str | Path | Literal[False] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Policy:
    """Load, layer, validate and freeze a policy.

    :param path: a policy file, or ``preset:NAME`` for a shipped preset
        (``preset:claude-code``); ``None`` reads ``$CHATCLI_POLICY`` if set, else only the
        embedded default.
    :param env: the environment to read ``CHATCLI_*`` variables from (default
        ``os.environ``); never modified.
    :param dotenv_path: a ``.env`` file (default ``./.env`` if it exists); ``False`` for
        none. Read with python-dotenv without touching ``os.environ``.
    :param overrides: dotted keys and values that win over everything (a value given as
        an :class:`Override` names who set it).
    :raises PolicyError: with ``file:line:col: $.json.path: message`` where known.
    """
    environ = os.environ if env is None else env
    if path is None and environ.get(POLICY_ENV):
        path = environ[POLICY_ENV]
    origins: dict[str, str] = {}
    document, source, files = _files_layer(path, origins)
    for key, (value, origin) in _dotenv_layer(dotenv_path).items():
        _set(document, key, value)
        origins[key] = origin
    for key, (value, origin) in env_overrides(environ, "env").items():
        _set(document, key, value)
        origins[key] = origin
    for key, given in (overrides or {}).items():
        if not isinstance(key, str):
            raise PolicyError(
                "explicit overrides are keyed by dotted key names (text), such as "
                f"'budget.max_result_chars', not {type(key).__name__}"
            )
        named = isinstance(given, Override)
        _set(document, key, given.value if named else given)
        origins[key] = given.origin if named else "override"
    document.pop("extends", None)
    document = _checked(document, origins, source)
    return Policy(freeze(document), source, MappingProxyType(origins), files)


def _files_layer(
    path: str | Path | None, origins: dict[str, str]
) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    """The schema defaults, the default policy file, then ``path`` and what it extends;
    the policy's source; and the files of those a user edits (not the shipped ones)."""
    document = defaults()
    origins.update(dict.fromkeys(_dotted_leaves(document), "default"))
    default_file = default_policy_path()
    identity, lines = read_policy_file(default_file)
    _merge(document, identity)
    _record(identity, "", lines, origins, where=f"default ({default_file}", suffix=")")
    if path is None:
        return document, "embedded default", ()
    given = str(path)
    resolved = resolve_policy_path(path)
    layered = _read_with_extends(resolved, set())
    for layer, layer_lines, layer_file in layered:
        _merge(document, layer)
        _record(layer, "", layer_lines, origins, where=layer_file)
    if "name" not in layered[-1][0]:
        # A policy that does not name itself is called after its own file, never after
        # the policy it extends ("default" would hide which file is in effect).
        document["name"] = given
        origins["name"] = f"{given} (its path: the file sets no name)"
    shipped = data_dir("policies").resolve()
    files = tuple(f for _, _, f in layered if not Path(f).resolve().is_relative_to(shipped))
    return document, str(resolved), files


def _checked(document: dict[str, Any], origins: Mapping[str, str], source: str) -> dict[str, Any]:
    """``document`` as plain JSON data, valid against the schema, with well-formed
    templates and pattern; else a :class:`PolicyError` saying which layer set the value."""
    try:
        document = plain(document)
    except ValueProblem as bad:
        set_by = _origin(bad.path, origins)
        hint = f" (set by {set_by})" if set_by else ""
        raise PolicyError(f"{bad.message}{hint}", source=source, path=bad.path) from None
    errors = schema_errors(document, source=source)
    if errors:
        first = errors[0]
        set_by = origins.get((first.path or "$")[2:])
        hint = f" (set by {set_by})" if set_by else ""
        raise PolicyError(f"{first.detail}{hint}", source=source, path=first.path)
    for key, problem in template_problems(document):
        where = origins.get(key, source)
        raise PolicyError(f"{problem} (set by {where})", source=source, path=f"$.{key}")
    for check in _CHECKS:
        for key, problem in check(document):
            where = _origin(key, origins) or source
            raise PolicyError(f"{problem} (set by {where})", source=source, path=f"$.{key}")
    pattern = document.get("text_protocol", {}).get("pattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError, ValueError) as exc:
            where = origins.get("text_protocol.pattern", source)
            reason = exc if isinstance(exc, re.error) else "nested or repeated too deeply"
            raise PolicyError(
                f"invalid regular expression ({reason}; set by {where})",
                source=source,
                path="$.text_protocol.pattern",
            ) from None
    return document


def validate_policy_file(path: str | Path) -> list[PolicyError]:
    """Every problem of one policy file (for ``chatcli-mw validate``), located."""
    try:
        layered = _read_with_extends(resolve_policy_path(path), set())
    except PolicyError as exc:
        return [exc]
    document = defaults()
    _merge(document, read_policy_file(default_policy_path())[0])
    errors: list[PolicyError] = []
    for layer, lines, file in layered:
        errors.extend(
            e
            for e in schema_errors(layer, source=file, lines=lines)
            if "is a required property" not in e.detail or file == str(path)
        )
        _merge(document, layer)
    document.pop("extends", None)
    if not errors:
        errors.extend(schema_errors(document, source=str(path)))
    if not errors:  # what the schema cannot say: templates, the pattern, registered checks
        try:
            _checked(document, {}, str(path))
        except PolicyError as exc:
            errors.append(exc)
    return errors


def _read_with_extends(path: Path, seen: set[Path]) -> list[tuple[dict[str, Any], Lines, str]]:
    """The file and the files it extends, base first."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL in the name
        raise PolicyError(f"cannot read policy: {exc}", source=str(path)) from None
    if resolved in seen:
        raise PolicyError("`extends` makes a cycle back to this file", source=str(path))
    if len(seen) >= MAX_EXTENDS:
        raise PolicyError(
            f"`extends` chains more than {MAX_EXTENDS} files, the limit; flatten the chain",
            source=str(path),
        )
    seen.add(resolved)
    document, lines = read_policy_file(path)
    layers: list[tuple[dict[str, Any], Lines, str]] = []
    base = document.get("extends")
    if base is not None:
        if not isinstance(base, str):
            line, column = lines.get("$.extends", (None, None))
            raise PolicyError(
                "`extends` must be a file path, `preset:NAME` or `default`",
                source=str(path),
                line=line,
                column=column,
                path="$.extends",
            )
        if base.startswith(PRESET_PREFIX):
            layers.extend(_read_with_extends(resolve_policy_path(base), seen))
        elif base != "default":
            base_path = (path.parent / base) if not Path(base).is_absolute() else Path(base)
            layers.extend(_read_with_extends(base_path, seen))
    layers.append((document, lines, str(path)))
    errors = schema_errors(document, source=str(path), lines=lines)
    if errors:
        raise errors[0]
    return layers


def _dotenv_layer(dotenv_path: str | Path | Literal[False] | None) -> dict[str, tuple[Any, str]]:
    if dotenv_path is False:
        return {}
    file = Path(".env") if dotenv_path is None else Path(dotenv_path)
    if dotenv_path is None and not file.is_file():
        return {}
    text = decode_utf8(read_bounded(file, ".env"), str(file))
    raw = dotenv_values(stream=io.StringIO(text), interpolate=False)
    values = {
        k: v for k, v in _interpolate(raw, file).items() if k.startswith(PREFIX) and v is not None
    }
    return env_overrides(values, f".env ({file})")


def _interpolate(values: Mapping[str, str | None], file: Path) -> dict[str, str | None]:
    """python-dotenv's ``${NAME}`` and ``${NAME:-default}`` expansion (names set earlier in
    the file win over ``os.environ``), with everything it produces bounded by
    :data:`MAX_FILE_BYTES`: doubling a variable line after line would otherwise grow
    exponentially."""
    resolved: dict[str, str | None] = {}
    lookup = ChainMap[str, str | None](resolved, dict(os.environ))
    total = 0
    for name, value in values.items():
        if value is None:
            resolved[name] = None
            continue
        parts: list[str] = []
        for atom in parse_variables(value):
            part = atom.resolve(lookup)
            total += len(part)
            if total > MAX_FILE_BYTES:
                raise PolicyError(
                    f"its ${{VARIABLE}} expansions produce more than {FILE_SIZE}, the limit "
                    f"(at {name})",
                    source=str(file),
                )
            parts.append(part)
        resolved[name] = "".join(parts)
    return resolved


def _origin(path: str, origins: Mapping[str, str]) -> str | None:
    """Where the value at a JSON path (or the nearest key above it) came from."""
    dotted = re.sub(r"\[\d+\]", "", path).removeprefix("$").removeprefix(".")
    while dotted:
        if dotted in origins:
            return origins[dotted]
        dotted = dotted.rpartition(".")[0]
    return None


def _record(
    layer: Mapping[str, Any],
    prefix: str,
    lines: Lines,
    origins: dict[str, str],
    *,
    where: str,
    suffix: str = "",
) -> None:
    for key, value in layer.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            _record(value, f"{dotted}.", lines, origins, where=where, suffix=suffix)
        else:
            line = lines.get(f"$.{dotted}", (None, None))[0]
            origins[dotted] = f"{where}:{line}{suffix}" if line else f"{where}{suffix}"


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """Deep-merge ``layer`` into ``base``: mappings merge, everything else replaces."""
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _set(document: dict[str, Any], dotted: str, value: Any) -> None:
    node = document
    *parents, last = dotted.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[last] = value


def _dotted_leaves(document: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in document.items():
        if isinstance(value, Mapping) and value:
            out.extend(_dotted_leaves(value, f"{prefix}{key}."))
        else:
            out.append(f"{prefix}{key}")
    return out
