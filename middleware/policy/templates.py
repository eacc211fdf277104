"""The policy's text templates: checked at load time, so that a misspelt ``{field}`` is a
policy error (file and key named), never a ``KeyError`` in the middle of a request; filled
(:func:`fill`) with the names they show escaped or quoted (:mod:`.quoting`); and read
back, as the pattern of the texts a template writes, so that a step recognises a preview,
a notice or a summary it wrote."""

from __future__ import annotations

import fnmatch
import re
import string
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from middleware.policy.quoting import from_prose, prose, shell_word

#: Fields that name something (a file, a tool, a stored output) rather than count or
#: quote text: ``{path}`` writes the name escaped for a sentence, ``{quoted_path}`` as one
#: word of a shell command (:mod:`.quoting`); every template that may use a name may use
#: its quoted form.
NAME_FIELDS = frozenset({"path", "file", "tool", "key", "source"})
QUOTED = "quoted_"

#: Fields of a preview or truncation template (the budget step's previews and the
#: microcompaction step's truncations fill all of them).
PREVIEW_FIELDS = frozenset(
    {
        "head",
        "tail",
        "omitted",
        "total",
        "total_bytes",
        "size",
        "lines",
        "path",
        "tool",
        "outline",
        "recall",
    }
)
#: Fields of a line rule's notices (pi's truncation notices).
NOTICE_FIELDS = frozenset(
    {
        "first", "last", "total", "next", "limit", "max_bytes", "line_size", "path", "source",
        "max_items", "more_items", "noun", "shown", "count", "line_chars", "tool",
    }
)  # fmt: skip
#: Fields of a microcompaction summary.
SUMMARY_FIELDS = frozenset(
    {"lines", "chars", "type", "path", "mentions", "errors", "definitions", "recall"}
)
#: Fields of the sentence that says how to read a spilled output back (``recall.*``).
RECALL_FIELDS = frozenset(
    {
        "path", "url", "key",
        "first", "last", "count", "hidden_first", "hidden_last", "lines", "next", "rest",
    }
)  # fmt: skip


def with_quoted(fields: frozenset[str]) -> frozenset[str]:
    """``fields`` and the quoted form of each name among them."""
    return fields | {QUOTED + name for name in fields & NAME_FIELDS}


#: Key patterns of templates and the fields each may use.
TEMPLATE_RULES: tuple[tuple[str, frozenset[str]], ...] = tuple(
    (pattern, with_quoted(fields))
    for pattern, fields in (
        ("budget.preview.template", PREVIEW_FIELDS),
        ("budget.empty_result_text", frozenset({"tool"})),
        ("budget.line_limits.notices.*", NOTICE_FIELDS),
        ("tools.*.notices.*", NOTICE_FIELDS),
        ("microcompact.truncate_template", PREVIEW_FIELDS),
        ("microcompact.summary_template", SUMMARY_FIELDS),
        ("microcompact.inputs.template", frozenset({"chars", "path", "tool"})),
        ("loop_guard.notice", frozenset({"reason"})),
        ("recall.file_template", RECALL_FIELDS | {"file", "tool", "arguments"}),
        ("recall.*_template", RECALL_FIELDS),
    )
)


def fill(template: str, values: Mapping[str, object], names: Mapping[str, str]) -> str:
    """``template`` with ``values`` written as they are (counts, texts the middleware
    composed) and ``names`` as :data:`NAME_FIELDS` say: ``{path}`` escaped for a sentence,
    ``{quoted_path}`` quoted for a shell. Each is worked out only if the template uses it."""
    return template.format_map(_Filled(values, names))


def read_names(fields: Mapping[str, str | None]) -> dict[str, str]:
    """The fields a template's pattern matched (:func:`template_pattern` with ``named``),
    each name as it was before :func:`fill` escaped it."""
    return {
        name: from_prose(value) if name in NAME_FIELDS else value
        for name, value in fields.items()
        if value is not None
    }


class _Filled(dict[str, object]):
    """The fields of one :func:`fill`: a name's two forms made when a template asks."""

    def __init__(self, values: Mapping[str, object], names: Mapping[str, str]) -> None:
        super().__init__(values)
        self.names = names

    def __missing__(self, field: str) -> str:
        if field in self.names:
            return prose(self.names[field])
        if field.startswith(QUOTED) and field[len(QUOTED) :] in self.names:
            return shell_word(self.names[field[len(QUOTED) :]])
        raise KeyError(field)


def template_problems(document: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(dotted key, message)`` for every template with a malformed or unknown field."""
    for key, value in _strings(document, ""):
        for pattern, allowed in TEMPLATE_RULES:
            if not fnmatch.fnmatchcase(key, pattern):
                continue
            try:
                unknown = template_fields(value) - allowed
            except ValueError as exc:
                yield key, f"malformed template ({exc}); write a literal brace as {{{{ or }}}}"
                break
            if unknown:
                yield (
                    key,
                    (
                        f"unknown field(s) {', '.join('{' + f + '}' for f in sorted(unknown))}; "
                        f"this template may use {', '.join('{' + f + '}' for f in sorted(allowed))}"
                    ),
                )
            break


def template_fields(template: str) -> set[str]:
    """The ``{field}`` names a template uses (raises ``ValueError`` if malformed)."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def template_literals(template: str) -> list[str]:
    """The text of a template between its fields, in order."""
    return [literal for literal, _, _, _ in string.Formatter().parse(template)]


@lru_cache(maxsize=256)
def template_pattern(
    template: str,
    *,
    field: str = ".*?",
    named: bool = False,
    repeated: bool = False,
    numbers: frozenset[str] = frozenset(),
) -> re.Pattern[str]:
    """The pattern of what ``template.format(...)`` writes: its text as it is, and each
    ``{field}`` as ``field`` (``\\d+`` for one of ``numbers``). With ``named``, the first
    occurrence of a field is a group of its name; with ``repeated`` too, a later one must
    repeat what the first matched (else it matches ``field`` again)."""
    parts = []
    seen: set[str] = set()
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is None:
            continue
        body = r"\d+" if name in numbers else field
        if not named:
            parts.append(body)
        elif name not in seen:
            seen.add(name)
            parts.append(f"(?P<{name}>{body})")
        else:
            parts.append(f"(?P={name})" if repeated else body)
    return re.compile("".join(parts), re.DOTALL)


def _strings(value: Any, prefix: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, str):
        yield prefix, value
