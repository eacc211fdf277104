"""Values read from wire objects without refusing any: a content's text, the evidence of a
format (detection), token counts (usage) and a call's arguments, read alike in every
format."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from middleware.view import is_text_part


def content_text(content: str | list[Any] | None) -> str:
    """The text of a message's content: a string, or its text parts one line apart."""
    if content is None or isinstance(content, str):
        return content or ""
    return "\n".join(part["text"] for part in content if is_text_part(part))


def string_of(value: Any) -> str | None:
    """Only strings are evidence of a format (the codecs refuse other types)."""
    return value if isinstance(value, str) else None


def part_types(message: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The ``type`` of each typed part of a message's content list, with the part."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        (kind, part)
        for part in content
        if isinstance(part, dict)
        if (kind := string_of(part.get("type"))) is not None
    ]


def count_of(mapping: Mapping[str, Any], key: str) -> int:
    """A token count of a usage object (anything but a positive whole number: 0)."""
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def arguments_of(text: Any) -> dict[str, Any]:
    """A call's arguments as an answer carries them (a JSON string for OpenAI), as a
    mapping (``{}`` when they are not one)."""
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def arguments_json(arguments: Any) -> str:
    """OpenAI carries call arguments as a JSON string; serialise anything else stably."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
