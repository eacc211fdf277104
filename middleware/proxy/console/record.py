"""One request's record as the console keeps it: the steps' new actions, with the text the
model saw instead and what a repair dropped, as JSON of a bounded size (the longest run of
actions that fits, then each text cut to its share of what is left).

Its cost follows what it keeps, not what the request did: each action is encoded once, as
it is added, until one does not fit, and only the texts of the actions kept are read from
the history the pipeline gave back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from middleware.conversations.cleaning import Cleaned
from middleware.formats import get_codec
from middleware.formats.base import Codec
from middleware.report import Action, ActionKind
from middleware.view import Node, ToolCall, ToolResult

#: Kinds of action that replace a result (or a call's input) with another text: the
#: console shows the text the model saw instead.
REPLACING = frozenset(
    {ActionKind.SPILLED, ActionKind.TRUNCATED, ActionKind.SUMMARIZED,
     ActionKind.TRUNCATED_UNSAVED, ActionKind.EMPTY_REPLACED, ActionKind.SYNTHETIC_RESULT,
     ActionKind.INPUT_CLEARED}
)  # fmt: skip
#: What a dropping action's detail holds of what it dropped.
_DROPPED_KEYS = ("content", "arguments", "removed_text")
_CUT = "… [{} more characters]"


def fitted(record: dict[str, Any], actions: Sequence[Action], cleaned: Cleaned, room: int) -> bytes:
    """``record`` with ``actions`` (the new ones of the request ``cleaned``) as JSON of
    ``room`` bytes at most."""
    record, size = longest_run(record, map(step_of, actions), len(actions), room)
    shown = actions[: len(record["steps"])]
    texts = texts_seen(cleaned, shown) if any(a.kind in REPLACING for a in shown) else {}
    return with_texts(record, [texts_of(a, texts) for a in shown], size, room)


def texts_seen(cleaned: Cleaned, actions: Sequence[Action]) -> dict[str, str]:
    """The text of each result (and each call's input, under ``call:ID``) as the cleaned
    body sends it, for the calls ``actions`` replaced something of: what the model saw.

    Read from the last message back, as far as the last of them: what a request replaces
    is mostly in its latest turn. (Gemini links its calls and results across messages, so
    its history is read whole.) Where an id is given twice, the later one is read."""
    report = cleaned.report
    messages = cleaned.messages
    if report is None or messages is None:
        return {}
    wanted = {("call:" if a.kind == ActionKind.INPUT_CLEARED else "") + a.tool_call_id
              for a in actions if a.kind in REPLACING}  # fmt: skip
    texts: dict[str, str] = {}
    try:
        codec = get_codec(report.format)
        if type(codec).parse is not Codec.parse:
            nodes: Iterable[Node] = reversed(codec.parse(messages).nodes)
        else:
            nodes = (codec.read_message(messages[i], i) for i in reversed(range(len(messages))))
        for node in nodes:
            for block in reversed(node.blocks):
                if isinstance(block, ToolResult):
                    key, text = block.call_id, block.text
                elif isinstance(block, ToolCall):
                    key, text = "call:" + block.id, block.canonical_arguments
                else:
                    continue
                if key in wanted and key not in texts:
                    texts[key] = text
            if len(texts) == len(wanted):
                break
    except Exception:  # what the console shows is never the reason a request fails
        return {}
    return texts


def step_of(action: Action) -> dict[str, Any]:
    """One action as the console shows it (its texts are added once it is known to fit)."""
    detail = action.detail
    step: dict[str, Any] = {
        "step": action.step,
        "kind": action.kind,
        "call": action.tool_call_id,
        "tool": action.tool_name,
        "chars": [action.chars_before, action.chars_after],
    }
    for key in ("reason", "path", "cap", "cap_source", "age", "original_id", "error"):
        value = detail.get(key)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            step[key] = value
    return step


def texts_of(action: Action, texts: Mapping[str, str]) -> dict[str, str]:
    """The texts an action shows, whole (cut to fit later): what the model saw instead
    (``texts``: :func:`texts_seen`) and what it dropped."""
    detail = action.detail
    found: dict[str, str] = {}
    if action.kind in REPLACING:
        seen = texts.get(
            ("call:" if action.kind == ActionKind.INPUT_CLEARED else "") + action.tool_call_id
        )
        if seen is not None:
            found["seen"] = seen
    for key in _DROPPED_KEYS:
        if key in detail:
            value = detail[key]
            found["dropped"] = value if isinstance(value, str) else _dumped(value)
            break
    return found


def _dumped(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except ValueError:  # a circular structure: never from the wire
        return repr(value)


def longest_run(
    record: dict[str, Any], steps: Iterable[dict[str, Any]], total: int, room: int
) -> tuple[dict[str, Any], int]:
    """``record`` with the longest run of ``steps`` (of ``total``) that fits in ``room``
    bytes as JSON, the rest counted as ``omitted``, and its size.

    Each step is encoded once, as it is added, and the record's size is known from the
    sizes of its parts; each step makes it longer, so the first that does not fit ends
    the run: a request of thousands of actions costs what the ones kept do."""
    # The record with no step, less the digits of its count of omitted steps.
    size = len(encoded({**record, "steps": [], "omitted": 0})) - 1 + len(str(total))
    kept: list[dict[str, Any]] = []
    for step in steps:
        left_out = total - len(kept)
        grown = (size + len(encoded(step)) + (1 if kept else 0)  # a comma after the first
                 + len(str(left_out - 1)) - len(str(left_out)))  # fmt: skip
        if grown > room:
            break
        kept.append(step)
        size = grown
    return {**record, "steps": kept, "omitted": total - len(kept)}, size


def with_texts(
    record: dict[str, Any], texts: Sequence[Mapping[str, str]], size: int, room: int
) -> bytes:
    """``record`` (of ``size`` bytes, :func:`longest_run`) as JSON of ``room`` bytes at
    most, each of its steps with its ``texts`` (the same order) cut to its share of what is
    left (the shorter ones whole, so the longer get more)."""
    kept = record["steps"]
    cuts = sorted(
        ((len(text), step, key, text) for step, found in zip(kept, texts, strict=True)
         for key, text in found.items()),
        key=lambda item: item[0],
    )  # fmt: skip
    left = room - size
    for i, (_, step, key, text) in enumerate(cuts):
        share = left // (len(cuts) - i)
        value = _cut(text, share - len(f',"{key}":') - len(f',"{key}_chars":{len(text)}'))
        if value is None:
            continue
        step[key] = value
        step[f"{key}_chars"] = len(text)
        left -= len(encoded(value)) + len(f',"{key}":') + len(f',"{key}_chars":{len(text)}')
    out = encoded(record)
    if len(out) > room:  # an estimate was off: the texts go, never the bound
        for step in kept:
            for key in ("seen", "dropped"):
                step.pop(key, None)
                step.pop(f"{key}_chars", None)
        out = encoded(record)
    return out


def _cut(text: str, room: int) -> str | None:
    """``text``, or its start with a note of what was cut, as JSON of ``room`` bytes at
    most (``None``: not even the note fits)."""
    if room <= 0:
        return None
    if len(encoded(text)) <= room:
        return text
    budget = room - len(encoded(_CUT.format(len(text)))) + 2  # one pair of quotes
    if budget <= 2:
        return None
    low, high = 0, min(len(text), budget)  # the longest start that fits, by halves
    while low < high:
        middle = (low + high + 1) // 2
        if len(encoded(text[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + _CUT.format(len(text) - low)


def encoded(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")
