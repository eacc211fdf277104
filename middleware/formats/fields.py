"""A wire message's fields, read strictly: every codec's ``parse_message`` checks them
here, so a malformed field is refused in the same words whatever the format, and a tool
result's content is written back as it was read."""

from __future__ import annotations

from typing import Any

from middleware.errors import HistoryError
from middleware.view import ToolCall


def check_content(value: Any, index: int, what: str = "content") -> str | list[Any]:
    """Accept a string or a list of content parts, else raise :class:`HistoryError`."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for j, part in enumerate(value):
            if not isinstance(part, dict):
                raise HistoryError(
                    f"{what} part {j} must be a JSON object, got {type(part).__name__}",
                    index=index,
                )
        return value
    raise HistoryError(
        f"{what} must be a string or a list of content parts, got {type(value).__name__}",
        index=index,
    )


def string_field(message: dict[str, Any], key: str, index: int, what: str) -> str | None:
    """``message[key]`` when it is a string, ``None`` when it is missing or null; another
    type is malformed (checked before the value is used as a dict key)."""
    value = message.get(key)
    if value is None or isinstance(value, str):
        return value
    raise HistoryError(f"{what} must be a string, got {type(value).__name__}", index=index)


def optional_id(value: Any, index: int, what: str) -> str:
    """Tool ids may be missing or empty (pairing repairs that); other types are malformed."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise HistoryError(f"{what} must be a string, got {type(value).__name__}", index=index)
    return value


def tool_name(value: Any, index: int, what: str) -> str:
    """A call's tool name may be missing, empty or blank (pairing repair drops such a call
    and what answers it); another type is malformed."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise HistoryError(f"{what} must be a string, got {type(value).__name__}", index=index)
    return value


def unnamed(call: ToolCall) -> bool:
    """Whether a call has no usable tool name (empty or blank): providers reject it."""
    return not call.name.strip()


def result_content(value: Any, index: int, what: str) -> str | tuple[Any, ...]:
    """A tool result's content as the view stores it; a missing one reads as empty."""
    if value is None:
        return ""
    content = check_content(value, index, what)
    return content if isinstance(content, str) else tuple(content)


def wire_content(content: str | tuple[Any, ...]) -> str | list[Any]:
    return content if isinstance(content, str) else list(content)
