"""Environment overrides: ``CHATCLI_<SECTION>__<KEY>`` for every policy key, ChatCLI's own
variable names as aliases, and strict parsing (ChatCLI silently keeps its default when a
value does not parse; here it is an error naming the variable)."""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from middleware.errors import PolicyError
from middleware.policy.schema import key_schema, policy_schema

logger = logging.getLogger(__name__)

PREFIX = "CHATCLI_"

#: ChatCLI's variable names that set one of our keys.
ALIASES: dict[str, str] = {
    "CHATCLI_TOOL_RESULT_BUDGET_CHARS": "budget.turn_budget_chars",
    "CHATCLI_TOOL_RESULT_MAX_CHARS": "budget.max_result_chars",
    "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "microcompact.truncate_turns",
    "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "microcompact.summarize_turns",
    "CHATCLI_MICROCOMPACT_HEAD_CHARS": "microcompact.head_chars",
    "CHATCLI_MICROCOMPACT_TAIL_CHARS": "microcompact.tail_chars",
    "CHATCLI_MICROCOMPACT_MIN_CONTENT": "microcompact.min_content",
    "CHATCLI_AGENT_KEEP_TMPDIR": "spill.keep",
}

#: Operational variables that are not policy keys.
RESERVED = frozenset(
    {"CHATCLI_POLICY", "CHATCLI_LOAD_PLUGINS", "CHATCLI_BLOCK_PLUGINS", "CHATCLI_TRACE_HOOKS"}
)

_INTEGER = re.compile(r"^[+-]?\d+$")
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def env_name(dotted: str) -> str:
    """The variable that sets a key (``budget.preview.head``: ``CHATCLI_BUDGET__PREVIEW__HEAD``)."""
    return PREFIX + dotted.upper().replace(".", "__")


def env_overrides(environ: Mapping[str, str], origin: str) -> dict[str, tuple[Any, str]]:
    """The policy keys ``environ`` sets: dotted key -> (value, where it came from)."""
    out: dict[str, tuple[Any, str]] = {}
    sections = policy_schema()["properties"]
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in RESERVED:
            continue
        raw = environ[name]
        if name in ALIASES:
            key = ALIASES[name]
        elif "__" in name:
            parts = name[len(PREFIX) :].lower().split("__")
            if parts[0] not in sections:
                logger.debug("ignoring %s: not a policy section of chatcli-middleware", name)
                continue
            key = ".".join(parts)
        else:
            logger.debug("ignoring %s: not a chatcli-middleware variable", name)
            continue
        schema = _subschema(key, name)
        value = coerce(raw, schema, name)
        previous = out.get(key)
        if previous is not None and previous[0] != value:
            raise PolicyError(
                f"{name}={raw!r} conflicts with {previous[1]}, which sets {key} to "
                f"{previous[0]!r}; set only one of them",
                source=origin,
            )
        out[key] = (value, f"{origin} {name}")
    return out


def _subschema(key: str, variable: str) -> Mapping[str, Any]:
    schema = key_schema(key)
    if schema is not None:
        return schema
    parts = key.split(".")
    known = max(n for n in range(len(parts)) if n == 0 or key_schema(".".join(parts[:n])))
    parent = key_schema(".".join(parts[:known])) if known else policy_schema()
    properties = list((parent or {}).get("properties", {}))
    close = difflib.get_close_matches(parts[known], properties, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = ".".join(parts[:known]) or "the policy"
    raise PolicyError(f"{variable}: {where} has no key {parts[known]!r}{hint}")


def coerce(raw: str, schema: Mapping[str, Any], variable: str) -> Any:
    """Parse ``raw`` as the schema's type says, then check it against the schema."""
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    text = raw.strip()
    value: Any
    if "null" in types and text.lower() in ("null", "none", ""):
        value = None
    elif "integer" in types:
        if not _INTEGER.match(text):
            raise _invalid(variable, raw, _expected(schema))
        value = int(text)
    elif "number" in types:
        try:
            value = float(text)
        except ValueError:
            raise _invalid(variable, raw, _expected(schema)) from None
    elif "boolean" in types:
        if text.lower() not in _TRUE | _FALSE:
            raise _invalid(variable, raw, "true or false")
        value = text.lower() in _TRUE
    elif "array" in types or "object" in types:
        try:
            value = json.loads(text)
        except ValueError:
            raise _invalid(variable, raw, f"a JSON {types[0]}") from None
    else:
        value = raw
    error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(schema).iter_errors(value))
    if error is not None:
        raise _invalid(variable, raw, _expected(schema) + f" ({error.message})")
    return value


def _expected(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    types = schema.get("type")
    kind = types if isinstance(types, str) else "/".join(types or ["value"])
    minimum = schema.get("minimum")
    if kind.startswith("integer"):
        if minimum == 1:
            return "a positive integer"
        if minimum == 0:
            return "an integer of 0 or more"
        return "an integer" if minimum is None else f"an integer of at least {minimum}"
    return f"a {kind}"


def _invalid(variable: str, raw: str, expected: str) -> PolicyError:
    return PolicyError(f"{variable}={raw!r}: expected {expected}")
