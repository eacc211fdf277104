"""Old tool-call inputs: the file a Write created, the strings an Edit swapped.

An agent's own edits are a fifth of a long coding session's context and grow with it, and
once the file is on disk the model reads it back rather than its old call. From
``clear_turns`` (at the schedule boundary; by default the age results are summarised
from), every string of a listed tool's input longer than ``min_chars`` becomes a
pointer to the spill file that keeps the whole input; the input keeps its keys and types, so
the call still reads as the call it was. A pointer is shorter than ``min_chars``, so
processing the output again changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from middleware.cache import DerivedCache
from middleware.formats.values import arguments_json
from middleware.policy.settings import converted
from middleware.policy.templates import fill
from middleware.steps.tool_names import names_match
from middleware.view import ToolCall

#: A string shorter than this is never cleared, whatever min_chars says: the pointer must
#: be shorter than what it replaces.
POINTER_ROOM = 200


@dataclass(frozen=True)
class InputSettings:
    """``microcompact.inputs``, bound as a group of the step's settings."""

    #: Age from which an old call's input is cleared.
    clear_turns: int
    #: Strings of at least this many characters are cleared.
    min_chars: int
    #: What replaces a cleared string: fields {chars}, {path}, {tool}.
    template: str
    #: Tools (names or glob patterns) whose old inputs are cleared; empty: none.
    tools: tuple[str, ...] = converted(tuple)

    def applies_to(self, name: str) -> bool:
        return names_match(self.tools, name)

    @property
    def threshold(self) -> int:
        return max(self.min_chars, POINTER_ROOM)


def clearable_chars(call: ToolCall, settings: InputSettings, cache: DerivedCache) -> int:
    """Characters clearing ``call``'s input would remove (estimated: pointers are short)."""
    if not settings.applies_to(call.name):
        return 0

    def measure() -> int:
        value = _value(call.arguments)
        if value is None:
            return 0
        return sum(len(s) - POINTER_ROOM for s in _long_strings(value, settings.threshold))

    return cache.derive_for(call, ("input-clearable", settings), measure, lambda _: 0)


def clear_input(
    call: ToolCall, settings: InputSettings, save: Callable[[str], str], cache: DerivedCache
) -> tuple[ToolCall, str, int, int] | None:
    """``call`` with its long strings replaced by pointers to the saved input, the path,
    and the characters before and after; ``None`` when nothing is long enough. ``save``
    stores the whole input (as JSON) and returns its path; it may raise ``OSError``.
    What only depends on the call and the settings is worked out once per call."""
    if not settings.applies_to(call.name):
        return None
    original = cache.derive_for(
        call,
        ("input-original", settings.threshold),
        lambda: _original(call, settings),
        lambda text: 0 if text is None else len(text),
    )
    if original is None:
        return None
    path = save(original)
    cleared = cache.derive_for(
        call,
        ("input-cleared", settings, path),
        lambda: _cleared(call, settings, path, len(original)),
        lambda found: 0 if found is None else found[1],
    )
    if cleared is None:
        return None
    new_call, after = cleared
    return new_call, path, len(original), after


def _original(call: ToolCall, settings: InputSettings) -> str | None:
    """The input as it is saved (JSON), or ``None`` when no string is long enough."""
    value = _value(call.arguments)
    if value is None or not any(True for _ in _long_strings(value, settings.threshold)):
        return None
    return call.arguments if isinstance(call.arguments, str) else _dump(call.arguments)


def _cleared(
    call: ToolCall, settings: InputSettings, path: str, before: int
) -> tuple[ToolCall, int] | None:
    """The call with pointers to ``path``, and its size; ``None`` if that is no shorter
    than the ``before`` characters of the saved input."""
    value = _value(call.arguments)

    def pointer(text: str) -> str:
        return fill(settings.template, {"chars": len(text)}, {"path": path, "tool": call.name})

    cleared = _replace(value, settings.threshold, pointer)
    arguments = arguments_json(cleared) if isinstance(call.arguments, str) else cleared
    after = len(arguments) if isinstance(arguments, str) else len(_dump(arguments))
    if after >= before:
        return None
    return ToolCall(call.id, call.name, arguments, call.raw), after


def _value(arguments: Any) -> Any:
    """The input as data: a dict as it is, a JSON string parsed (``None`` if it is not)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return None
    return arguments


def _long_strings(value: Any, threshold: int) -> Any:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) >= threshold:
                yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _replace(value: Any, threshold: int, pointer: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return pointer(value) if len(value) >= threshold else value
    if isinstance(value, dict):
        return {key: _replace(item, threshold, pointer) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace(item, threshold, pointer) for item in value]
    return value


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
