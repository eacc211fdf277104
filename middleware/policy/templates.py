"""Checks of the policy's text templates: a misspelt ``{field}`` is a policy error at
load time (file and key named), never a ``KeyError`` in the middle of a request."""

from __future__ import annotations

import fnmatch
import string
from collections.abc import Iterator, Mapping
from typing import Any

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
SUMMARY_FIELDS = frozenset({"lines", "chars", "type", "path", "mentions", "errors", "recall"})
#: Fields of the sentence that says how to read a spilled output back (``recall.*``).
RECALL_FIELDS = frozenset(
    {
        "path", "quoted_path", "url", "key", "quoted_key",
        "first", "last", "count", "hidden_first", "hidden_last", "lines",
    }
)  # fmt: skip

#: Key patterns of templates and the fields each may use.
TEMPLATE_RULES: tuple[tuple[str, frozenset[str]], ...] = (
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
)  # fmt: skip


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


def _strings(value: Any, prefix: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, str):
        yield prefix, value
