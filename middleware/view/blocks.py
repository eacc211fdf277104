"""The blocks of a node that steps act on: tool calls, tool results, and the rest kept
opaque; and how a result's text is read from its content parts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeAlias

#: Content-part types that carry plain text, across the wire formats that type their parts.
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True)
class ToolCall:
    """A tool call made by the model: an Anthropic ``tool_use`` block, an OpenAI
    ``tool_calls`` entry or a Responses ``function_call`` item."""

    id: str
    name: str
    #: The arguments as the wire carries them: a dict (Anthropic) or a JSON string (OpenAI).
    arguments: Any
    #: The original wire block; ``None`` when a step created the call.
    raw: Any = None
    #: Nested too deep to read (:mod:`middleware.formats.structure`): ``arguments`` is a
    #: cut copy, and the block is written as ``raw`` (its id and name aside).
    sealed: bool = False

    @property
    def decoded_arguments(self) -> Any:
        """The arguments as a value: an OpenAI call's JSON string read (``None`` when it is
        not JSON). Worked out once per call."""
        if isinstance(self.arguments, str):
            if "_decoded" not in self.__dict__:
                try:
                    self.__dict__["_decoded"] = json.loads(self.arguments)
                except ValueError:
                    self.__dict__["_decoded"] = None
            return self.__dict__["_decoded"]
        return self.arguments

    @property
    def canonical_arguments(self) -> str:
        """The arguments as JSON with sorted keys (a string that is not JSON as it is), so
        two calls with the same arguments compare equal however the wire wrote them.
        Worked out once per call (kept beside the fields, as :attr:`Node.calls`)."""
        found: str | None = self.__dict__.get("_canonical")
        if found is None:
            arguments = self.arguments
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    found = self.__dict__["_canonical"] = self.arguments
                    return found
            found = self.__dict__["_canonical"] = json.dumps(
                arguments, sort_keys=True, ensure_ascii=False, default=str
            )
        return found


@dataclass(frozen=True)
class ToolResult:
    """A tool result: an Anthropic ``tool_result`` block, an OpenAI ``role: tool`` message,
    a Responses ``function_call_output`` item, or a user message that the policy's text
    protocol rule marks as tool output (``text_protocol=True``, no call id)."""

    call_id: str
    #: The wire content: a string, or a tuple of content parts (text, images, ...).
    content: str | tuple[Any, ...]
    is_error: bool = False
    raw: Any = None
    text_protocol: bool = False
    #: Tool name for text-protocol outputs (from the rule); structured results take the
    #: name of the call they answer.
    tool_name: str | None = None
    #: The full text before a step of this ``process()`` call cut it (the budget step
    #: sets it when it spills), so later steps can work from the original. Never written
    #: to the wire.
    original: str | None = None
    #: Nested too deep to read (:mod:`middleware.formats.structure`): ``content`` is a
    #: cut copy, and the block is written as ``raw`` (its call id and error flag aside).
    #: Steps leave its content alone.
    sealed: bool = False

    @property
    def text(self) -> str:
        """All text of the result, one line break between text blocks (so a spill file
        keeps where one block ended); non-text parts (images, files) count for nothing."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part["text"] for part in self.content if is_text_part(part))

    @property
    def chars(self) -> int:
        """``len(self.text)``, worked out once (a result of text parts joins them)."""
        found: int | None = self.__dict__.get("_chars")
        if found is None:
            found = self.__dict__["_chars"] = len(self.text)
        return found

    @property
    def has_non_text(self) -> bool:
        """Whether the result carries parts other than text (images, documents, ...)."""
        return not isinstance(self.content, str) and any(not is_text_part(p) for p in self.content)

    def with_text(self, text: str, *, original: str | None = None) -> ToolResult:
        """Return a copy whose text is ``text`` and whose non-text parts are kept in place
        (with ``original``: the text it was cut from, see :attr:`original`).

        For block content the first text part takes the new text (keeping its other keys,
        such as ``cache_control``) and the other text parts are dropped; with no text part,
        a new one of the format's usual type is put first.
        """
        if isinstance(self.content, str):
            return self._with(text, original)
        parts: list[Any] = []
        placed = False
        for part in self.content:
            if is_text_part(part):
                if not placed:
                    parts.append({**part, "text": text})
                    placed = True
            else:
                parts.append(part)
        if not placed:
            parts.insert(0, {"type": _text_type_for(self.content), "text": text})
        return self._with(tuple(parts), original)

    def _with(self, content: str | tuple[Any, ...], original: str | None) -> ToolResult:
        # The constructor, not dataclasses.replace: every request rewrites many results.
        return ToolResult(
            self.call_id,
            content,
            self.is_error,
            self.raw,
            self.text_protocol,
            self.tool_name,
            self.original if original is None else original,
            self.sealed,
        )


@dataclass(frozen=True)
class Opaque:
    """A content block no step looks into (text, image, thinking, server tool blocks...)."""

    raw: Any


Block: TypeAlias = ToolCall | ToolResult | Opaque


def is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") in TEXT_PART_TYPES
        and isinstance(part.get("text"), str)
    )


def _text_type_for(parts: tuple[Any, ...]) -> str:
    types = {p.get("type") for p in parts if isinstance(p, dict)}
    return "input_text" if types & {"input_image", "input_file"} else "text"
