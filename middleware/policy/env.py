"""Environment overrides: ``CHATCLI_<SECTION>__<KEY>`` for every policy key, ChatCLI's own
variable names as aliases, and strict parsing (ChatCLI silently keeps its default when a
value does not parse; here it is an error naming the variable)."""

from __future__ import annotations

import difflib
import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

from middleware.errors import PolicyError
from middleware.policy.files import schema_message
from middleware.policy.limits import (
    MAX_DEPTH,
    MAX_NUMBER,
    NUMBER_RANGE,
    ValueProblem,
    plain,
    quote,
)
from middleware.policy.schema import key_schema, policy_schema
from middleware.policy.secrets import redact_urls

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
#: A decimal number as JSON writes it, leading ``+`` and ``.5`` allowed: not ``nan``,
#: ``inf`` or ``1_000``, which Python's ``float()`` would accept.
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
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
                raise PolicyError(_no_section(name, parts[0], sections), source=origin)
            key = ".".join(parts)
        else:
            meant = _single_underscore(name, sections)
            if meant is not None:
                raise PolicyError(
                    f"{name}: a section and its key are joined by two underscores; did you "
                    f"mean {meant}?",
                    source=origin,
                )
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


def _no_section(name: str, section: str, sections: Mapping[str, Any]) -> str:
    """Why ``CHATCLI_<SECTION>__...`` names nothing (a variable with ``__`` is always
    ours: ChatCLI's own names have none), with the section probably meant."""
    close = difflib.get_close_matches(section, list(sections), n=1, cutoff=0.6)
    hint = f"; did you mean {PREFIX}{close[0].upper()}__...?" if close else ""
    known = ", ".join(sorted(k for k, v in sections.items() if "properties" in v))
    return f"{name}: the policy has no section {section!r}{hint} (sections: {known})"


def _single_underscore(name: str, sections: Mapping[str, Any]) -> str | None:
    """The variable ``name`` was probably meant to be, if it is a section and one of its
    keys joined by one underscore (``CHATCLI_PROXY_HOST``), else ``None``."""
    rest = name[len(PREFIX) :].lower()
    for section, schema in sections.items():
        if not rest.startswith(section + "_") or "properties" not in schema:
            continue
        key = rest[len(section) + 1 :]
        if key in schema["properties"]:
            return env_name(f"{section}.{key}")
    return None


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
    """Parse ``raw`` as the schema's type says, then check it against the bounds and the
    schema; every failure is a :class:`PolicyError` naming the variable."""
    if not isinstance(raw, str):
        raise PolicyError(
            f"{variable}: an environment value must be text, not {type(raw).__name__}"
        )
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    text = raw.strip()
    value: Any
    if "null" in types and text.lower() in ("null", "none", ""):
        value = None
    elif "integer" in types:
        if not _INTEGER.match(text):
            raise _invalid(variable, raw, _expected(schema))
        if len(text.lstrip("+-").lstrip("0")) > len(str(MAX_NUMBER)):  # no int() of 5,000 digits
            raise _invalid(variable, raw, f"{_expected(schema)} ({NUMBER_RANGE})")
        value = int(text)
    elif "number" in types:
        if not _NUMBER.match(text):
            raise _invalid(variable, raw, _expected(schema))
        value = float(text)
        if not math.isfinite(value):  # 1e309
            raise _invalid(variable, raw, f"{_expected(schema)} ({NUMBER_RANGE})")
        mantissa = re.split("[eE]", text)[0]
        if value == 0 and any(digit in mantissa for digit in "123456789"):  # 1e-400
            raise _invalid(
                variable,
                raw,
                f"{_expected(schema)} (it is too small to "
                "tell from 0: write 0, or a number above 1e-300)",
            )
    elif "boolean" in types:
        if text.lower() not in _TRUE | _FALSE:
            raise _invalid(variable, raw, "true or false")
        value = text.lower() in _TRUE
    elif not types and "enum" in schema:  # true, false or a word (text_protocol.enabled)
        value = _choice(text, raw, schema["enum"])
    elif "array" in types or "object" in types:
        value = _json(text, raw, variable, f"a JSON {types[0]}")
    else:
        value = raw
    try:
        value = plain(value)
    except ValueProblem as problem:
        where = "" if problem.path == "$" else f"{problem.path}: "
        raise _invalid(variable, raw, f"{_expected(schema)} ({where}{problem.message})") from None
    error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(schema).iter_errors(value))
    if error is not None:
        raise _invalid(variable, raw, _expected(schema) + f" ({schema_message(error)})")
    return value


def _choice(text: str, raw: str, choices: list[Any]) -> Any:
    """The choice ``text`` names: a boolean choice by its usual words, any other as is."""
    for choice in choices:
        if isinstance(choice, bool) and text.lower() in (_TRUE if choice else _FALSE):
            return choice
    return text if text in choices else raw


class _OutOfRange(ValueError):
    """An integer in a JSON value with more digits than any number in range."""


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-").lstrip("0")) > len(str(MAX_NUMBER)):
        raise _OutOfRange(digits)
    return int(digits)


def _json(text: str, raw: str, variable: str, expected: str) -> Any:
    """A JSON value; NaN and infinity parse (and are refused by the bounds with their
    path), integers too long to be in range and nesting too deep to parse are refused."""
    try:
        return json.loads(text, parse_int=_bounded_int)
    except _OutOfRange:
        raise _invalid(variable, raw, f"{expected} ({NUMBER_RANGE})") from None
    except RecursionError:
        raise _invalid(
            variable, raw, f"{expected} (this one is nested more than {MAX_DEPTH} levels deep)"
        ) from None
    except ValueError:
        raise _invalid(variable, raw, expected) from None


def _expected(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(
            v if isinstance(v, str) else json.dumps(v) for v in schema["enum"]
        )
    types = schema.get("type")
    kind = types if isinstance(types, str) else "/".join(types or ["value"])
    minimum = schema.get("minimum")
    if kind.startswith("integer"):
        if minimum == 1:
            return "a positive integer"
        if minimum == 0:
            return "an integer of 0 or more"
        return "an integer" if minimum is None else f"an integer of at least {minimum}"
    if kind.startswith("number"):
        bounds = [
            f"greater than {schema['exclusiveMinimum']}" if "exclusiveMinimum" in schema else "",
            f"of at least {schema['minimum']}" if "minimum" in schema else "",
            f"at most {schema['maximum']}" if "maximum" in schema else "",
        ]
        return " ".join(["a finite number", *filter(None, bounds)])
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _invalid(variable: str, raw: str, expected: str) -> PolicyError:
    return PolicyError(f"{variable}={quote(redact_urls(raw))}: expected {expected}")
