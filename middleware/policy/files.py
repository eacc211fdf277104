"""Policy files: read within bounds, YAML composed safely, duplicate keys rejected, every
node's line remembered, and errors reported as ``file:line:col: $.json.path: message``.

A file is read only if it is a regular file of at most :data:`~.limits.MAX_FILE_BYTES`
(:mod:`middleware.policy.file_bytes`); YAML is composed with nesting and the size of
every node (aliases expanded) counted as it goes, so an alias bomb stops at its first
oversized level; and a file is treated as a policy only once it is a mapping with a
``version`` key. Until then (and for every YAML error) a message gives the location and
the problem, never the file's content: an ``extends`` pointing at ``/etc/shadow`` must
not print its first line.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from middleware.errors import PolicyError
from middleware.policy.file_bytes import decode_utf8, read_bounded
from middleware.policy.limits import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_NUMBER,
    NUMBER_RANGE,
    TOO_DEEP,
    ValueProblem,
    child_path,
    clip,
    json_path,
    plain,
    quote,
)
from middleware.policy.schema import policy_schema
from middleware.policy.secrets import redact_urls

#: json path ("$.budget.max_result_chars") -> (line, column), 1-based
Lines = dict[str, tuple[int, int]]

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TAG_KINDS = {
    "tag:yaml.org,2002:int": "a number",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "true/false",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "a date",
    "tag:yaml.org,2002:seq": "a list",
    "tag:yaml.org,2002:map": "a mapping",
}
#: Longest schema message kept (the instance it quotes is cut first).
_MAX_MESSAGE = 300
#: Policy texts kept parsed (:func:`_parsed`): the embedded default, the presets and a
#: host's own files, a few KB of parsed document each.
_PARSED_KEPT = 32
_NOT_A_POLICY = "not a policy: a policy file is a YAML mapping that sets `version: 1`"


def read_policy_file(path: Path) -> tuple[dict[str, Any], Lines]:
    """The document of one policy file and where each of its values is."""
    source = str(path)
    text = decode_utf8(read_bounded(path, "policy"), source)
    document, lines = _parsed(text, source)
    return copy.deepcopy(document), dict(lines)


@functools.lru_cache(maxsize=_PARSED_KEPT)
def _parsed(text: str, source: str) -> tuple[dict[str, Any], Lines]:
    """A policy text parsed and checked, kept by its content (and its name, which errors
    and origins quote): parsing YAML in pure Python is most of what loading a policy costs,
    and the embedded default is read again by every load. An edited file has another text,
    so a reload always parses what it reads; callers get copies."""
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        if node is None:
            raise PolicyError(
                "the policy file is empty (it needs at least `version: 1`)", source=source
            )
        _require_policy(node, source)
        lines: Lines = {}
        _check_and_map(node, "$", lines, source)
        constructed = loader.construct_document(node)
    except _Refused as exc:
        raise _error(exc.message, source, _mark(exc.mark)) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, text) from None
    finally:
        if loader is not None:
            loader.dispose()
    try:
        document = plain(constructed)
    except ValueProblem as problem:
        raise _error(problem.message, source, _at(problem.path, lines), problem.path) from None
    return document, lines


class _Refused(Exception):
    """A bound broken while composing or constructing, at a YAML mark."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting as it composes: the nesting, the nodes created, and
    the size of every finished node with its aliases expanded (an alias adds the size of
    what it names without copying it). An alias bomb stops at the first level whose
    expansion passes :data:`MAX_NODES`, before anything is expanded."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._created = 0
        #: id(node) -> its size with aliases expanded, for every finished node
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            named = self.anchors.get(event.anchor) if event.anchor is not None else None
            if named is not None and id(named) not in self._sizes:
                raise _Refused(
                    "this alias refers to itself (a structure that contains itself); a policy "
                    "cannot hold one",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        collection = isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent))
        if collection:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _Refused(TOO_DEEP, event.start_mark)
        self._created += 1
        if self._created > MAX_NODES:
            raise _Refused(_too_many(), event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            if collection:
                self._depth -= 1
        if node is None:
            return None
        size = 1
        if isinstance(node, yaml.MappingNode):
            size += sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            size += sum(self._sizes[id(item)] for item in node.value)
        if size > MAX_NODES:
            raise _Refused(_too_many(), node.start_mark)
        self._sizes[id(node)] = size
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """Constructors' own errors (a date like 2026-13-45) become located errors."""
        try:
            return super().construct_object(node, deep)
        except (yaml.YAMLError, _Refused):
            raise
        except (ValueError, TypeError, OverflowError, ArithmeticError):
            raise _Refused(
                "YAML cannot read this value; quote it to make it text", node.start_mark
            ) from None

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int:
        """An integer, refused before conversion when it has too many digits to be in
        range (Python refuses more than 4,300 and needs quadratic time below that)."""
        if len(str(node.value)) > len(str(MAX_NUMBER)) + 8:
            raise _Refused(NUMBER_RANGE, node.start_mark)
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_bounded_int)


def _too_many() -> str:
    return (
        f"more than {MAX_NODES:,} keys and values once YAML aliases are expanded, the limit; "
        "a policy needs far fewer"
    )


def _mark(mark: Any) -> tuple[int | None, int | None]:
    """The 1-based line and column of a YAML mark."""
    if mark is None:
        return None, None
    return mark.line + 1, mark.column + 1


def _at(path: str, lines: Lines) -> tuple[int | None, int | None]:
    """The line and column of ``path``, or of the nearest value above it that has one."""
    probe = path
    while probe not in lines and ("." in probe or "[" in probe):
        probe = probe[: max(probe.rfind("."), probe.rfind("["))]
    return lines.get(probe, (None, None))


def _error(
    message: str, source: str, at: tuple[int | None, int | None], path: str | None = None
) -> PolicyError:
    return PolicyError(message, source=source, line=at[0], column=at[1], path=path)


def _yaml_error(exc: yaml.YAMLError, source: str, text: str) -> PolicyError:
    """A YAML error located, in words that quote nothing from the file."""
    if isinstance(exc, yaml.reader.ReaderError):
        position = exc.position
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        message = (
            f"invalid YAML: a control character (#x{exc.character:04x}) YAML does not allow; "
            "remove it"
        )
        return _error(message, source, (line, column))
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = str(getattr(exc, "problem", None) or "")
    if isinstance(exc, yaml.constructor.ConstructorError) and "for the tag" in problem:
        message = (
            "unsupported YAML tag: a policy holds plain values (text, numbers, true/false, "
            "null, lists, mappings); remove the tag"
        )
    elif "duplicate anchor" in str(getattr(exc, "context", "")):
        first = getattr(exc, "context_mark", None)
        where = f" (the first is on line {first.line + 1})" if first is not None else ""
        message = f"invalid YAML: an anchor (&name) defined twice{where}; rename one"
    else:
        context = str(getattr(exc, "context", None) or "")
        message = "invalid YAML: " + (_unquote(problem) or "cannot parse this")
        if context:
            message += f" ({_unquote(context)})"
    return _error(message, source, _mark(mark))


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def _unquote(text: str) -> str:
    """``text`` without the names PyYAML quotes from the file (aliases, anchors, tags,
    directives); one character (an unexpected ``'\\t'``) and its own token names
    (``'<stream end>'``) are kept."""

    def keep(match: re.Match[str]) -> str:
        inner = match.group()[1:-1]
        short = len(inner) <= 2 or (inner.startswith("<") and inner.endswith(">"))
        return match.group() if short else "…"

    return _QUOTED.sub(keep, text)


def _require_policy(node: yaml.Node, source: str) -> None:
    """Refuse, without quoting it, a file that is not a mapping with a ``version`` key."""
    if isinstance(node, yaml.MappingNode) and any(
        isinstance(k, yaml.ScalarNode) and k.tag == _STR_TAG and k.value == "version"
        for k, _ in node.value
    ):
        return
    raise _error(_NOT_A_POLICY, source, _mark(node.start_mark))


def _check_and_map(node: yaml.Node, path: str, lines: Lines, source: str) -> None:
    lines[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            text = isinstance(key_node, yaml.ScalarNode) and key_node.tag in (_STR_TAG, _MERGE_TAG)
            if not text:
                kind = _TAG_KINDS.get(key_node.tag, "a tagged value")
                message = f"a key must be text (YAML reads this one as {kind}); quote it"
                raise _error(message, source, _mark(key_node.start_mark), path)
            key = key_node.value
            if key in seen:
                first = seen[key].start_mark.line + 1
                message = (
                    f"duplicate key {quote(key)} (first set on line {first}; YAML would "
                    "silently keep the last one)"
                )
                raise _error(message, source, _mark(key_node.start_mark), child_path(path, key))
            seen[key] = key_node
            _check_and_map(value_node, child_path(path, key), lines, source)
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


def schema_message(error: jsonschema.ValidationError) -> str:
    """jsonschema's message with the value it quotes cut short (a 1 MiB string or a huge
    mapping stays a one-line error), and without the password of a URL it quotes."""
    message = error.message
    full = repr(error.instance)
    if len(full) > 60 and full in message:
        message = message.replace(full, quote(error.instance), 1)
    return clip(redact_urls(message), _MAX_MESSAGE)


def _located(error: jsonschema.ValidationError, source: str, lines: Lines) -> PolicyError:
    path = json_path(error.absolute_path)
    message = schema_message(error)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        allowed = list(schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra:
            key = str(extra[0])
            path = child_path(path, key)
            message = f"unknown key {quote(key)}"
            close = difflib.get_close_matches(clip(key, 100), allowed, n=1)
            message += (
                f"; did you mean {close[0]!r}?"
                if close
                else (f"; expected one of: {', '.join(allowed)}")
            )
    return _error(message, source, _at(path, lines), path)
