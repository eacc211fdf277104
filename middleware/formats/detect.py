"""Tell the three wire formats apart from the shape of the messages themselves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from middleware.errors import FormatError, HistoryError

#: Format assumed for histories every format reads the same way (plain role/content).
AMBIGUOUS_DEFAULT = "openai"

_ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "document",
        "search_result",
        "mcp_tool_use",
        "mcp_tool_result",
    }
)
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "refusal"})
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
_OPENAI_ROLES = frozenset({"tool", "developer", "function"})
#: Roles both OpenAI formats accept: evidence for Chat Completions only when nothing
#: points at Responses.
_SHARED_ROLES = frozenset({"developer"})


@dataclass(frozen=True)
class Detection:
    """The detected format, and the first message that gave it away (``None`` when the
    history reads the same in every format and :data:`AMBIGUOUS_DEFAULT` was chosen)."""

    format: str
    evidence: str | None


def detect_format(messages: Sequence[Any]) -> Detection:
    """Detect the wire format of ``messages``.

    Raises :class:`FormatError` when messages of different formats are mixed, naming one
    message of each.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise HistoryError(f"expected a list of messages, got {type(messages).__name__}")
    found: dict[str, str] = {}
    strong: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        for fmt, why in _signals(message):
            found.setdefault(fmt, f"message {i}: {why}")
            if not (why.startswith("role ") and _string(message.get("role")) in _SHARED_ROLES):
                strong.add(fmt)
    if "responses" in found and "openai" not in strong:
        found.pop("openai", None)
    if not found:
        return Detection(AMBIGUOUS_DEFAULT, None)
    if len(found) > 1:
        details = "; ".join(f"{fmt} ({why})" for fmt, why in sorted(found.items()))
        raise FormatError(
            f"messages of several wire formats are mixed: {details}; "
            "pass format= explicitly or fix the history"
        )
    ((fmt, why),) = found.items()
    return Detection(fmt, why)


def _string(value: Any) -> str | None:
    """Only strings are evidence (the codecs refuse other types with a HistoryError)."""
    return value if isinstance(value, str) else None


def _signals(message: dict[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    kind = message.get("type")
    if isinstance(kind, str):
        out.append(("responses", f"item of type {kind!r}"))
    role = _string(message.get("role"))
    if role in _OPENAI_ROLES:
        out.append(("openai", f"role {role!r}"))
    if "tool_calls" in message:
        out.append(("openai", "'tool_calls' field"))
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            ptype = _string(part.get("type"))
            if ptype in _ANTHROPIC_BLOCKS or (ptype == "image" and "source" in part):
                out.append(("anthropic", f"{ptype!r} content block"))
            elif ptype in _OPENAI_PARTS:
                out.append(("openai", f"{ptype!r} content part"))
            elif ptype in _RESPONSES_PARTS:
                out.append(("responses", f"{ptype!r} content part"))
    return out
