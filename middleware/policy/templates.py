"""Checks of the policy's text templates: a misspelt ``{field}`` is a policy error at
load time (file and key named), never a ``KeyError`` in the middle of a request."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from typing import Any

from middleware.steps.budget.line_rules import NOTICE_FIELDS
from middleware.steps.previews import TEMPLATE_FIELDS, template_fields

#: Key patterns of templates and the fields each may use.
TEMPLATE_RULES: tuple[tuple[str, frozenset[str]], ...] = (
    ("budget.preview.template", TEMPLATE_FIELDS),
    ("budget.empty_result_text", frozenset({"tool"})),
    ("budget.line_limits.notices.*", NOTICE_FIELDS),
    ("tools.*.notices.*", NOTICE_FIELDS),
    ("microcompact.truncate_template", TEMPLATE_FIELDS),
    ("microcompact.summary_template",
     frozenset({"lines", "chars", "type", "path", "mentions", "errors"})),
    ("loop_guard.notice", frozenset({"reason"})),
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


def _strings(value: Any, prefix: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, str):
        yield prefix, value
