"""Check a history against the providers' tool-pairing rules, without changing it.

:func:`check_history` first parses the history with the format's codec, as ``process()``
does (one structural validation: the same input raises the same error in both). The rules
then read the wire messages directly (they share no code with the pairing repair, so they
can serve as the repair's oracle) and return one :class:`Violation` per broken rule, with
a reason modelled on the provider's own 400 error text:

* Anthropic Messages: every ``tool_use`` is answered by a ``tool_result`` in the very next
  message, which is a user message whose ``tool_result`` blocks come first; every
  ``tool_result`` answers a ``tool_use`` of the message right before it, once; ``tool_use``
  ids are non-empty and unique across the request.
* OpenAI Chat Completions: an assistant message with ``tool_calls`` is followed by ``tool``
  messages answering every call id (ids non-empty and unique in the message), each once;
  a ``tool`` message must belong to such a run.
* OpenAI Responses: every call item the client executes (``function_call``,
  ``local_shell_call``, ...) has an output of a type that answers it
  (:data:`.responses_items.PAIRS`) with its ``call_id`` after it and before the next model
  turn, and every output answers a call of the model turn before it, once; ``call_id``
  values are non-empty and unique in a turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import middleware.formats.wire.responses_items as ri
from middleware.formats import get_codec, resolve_format
from middleware.formats.wire.anthropic import ID_PATTERN, MAX_ID_LENGTH, valid_id

__all__ = ["Violation", "check_history"]


@dataclass(frozen=True)
class Violation:
    """One broken pairing rule: the message it is found at, a short code and the reason."""

    #: Index of the message (or Responses item) in the history.
    index: int
    #: ``missing_result``, ``orphan_result``, ``duplicate_id``, ``duplicate_result``,
    #: ``result_not_first``, ``displaced_result``, ``empty_id``, ``empty_name``,
    #: ``invalid_id`` or ``reasoning_without_item``.
    code: str
    reason: str


def check_history(messages: Sequence[Any], format: str = "auto") -> list[Violation]:
    """The pairing-rule violations of ``messages`` (empty when the history is valid).

    The history is first read by the format's codec, exactly as ``Pipeline.process`` reads
    it, so what is not a conversation in that format raises the same error there and here.

    :param format: ``"auto"`` (detect), ``"anthropic"``, ``"openai"`` or ``"responses"``.
    :raises HistoryError: a malformed history (the message says which message and what).
    :raises FormatError: unknown format, or messages of several formats mixed.
    """
    fmt = resolve_format(messages, format)
    get_codec(fmt).parse(messages)  # the structural validation, shared with process()
    if fmt == "anthropic":
        return _anthropic(messages)
    if fmt == "openai":
        return _openai(messages)
    return _responses(messages)


def _blank(name: Any) -> bool:
    """A missing, empty or blank tool name (the codecs refuse other types)."""
    return name is None or not name.strip()


def _empty_name(where: str) -> str:
    return (
        f"Invalid '{where}.name': empty string. Expected a string with minimum length 1, "
        "but got an empty string instead."
    )


# -- Anthropic Messages --------------------------------------------------------------------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def _anthropic(messages: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    seen_ids: set[str] = set()
    assistants: list[int] = []  # indices of the assistant messages so far
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        if message.get("role") == "assistant":
            assistants.append(i)
            for k, block in enumerate(blocks):
                if block.get("type") != "tool_use":
                    continue
                if _blank(block.get("name")):
                    out.append(
                        Violation(
                            i,
                            "empty_name",
                            f"messages.{i}.content.{k}.tool_use.name: String should have at "
                            "least 1 non-blank character",
                        )
                    )
                uid = block.get("id") or ""
                if not uid:
                    out.append(
                        Violation(
                            i, "empty_id", f"messages.{i}.content.{k}: `tool_use` id is empty"
                        )
                    )
                elif uid in seen_ids:
                    out.append(
                        Violation(
                            i,
                            "duplicate_id",
                            f"messages.{i}.content.{k}: `tool_use` ids must be unique",
                        )
                    )
                elif not valid_id(uid):
                    out.append(
                        Violation(
                            i,
                            "invalid_id",
                            f"messages.{i}.content.{k}.tool_use.id: String should match pattern "
                            f"'{ID_PATTERN.pattern}' (at most {MAX_ID_LENGTH} characters)",
                        )
                    )
                seen_ids.add(uid)
            out.extend(_anthropic_answered(messages, i, blocks))
        else:
            # The latest assistant message before the one right before this message.
            older = [a for a in assistants[-2:] if a <= i - 2]
            out.extend(_anthropic_results(messages, i, blocks, older[-1] if older else None))
    return sorted(out, key=lambda v: v.index)


def _anthropic_answered(
    messages: Sequence[dict[str, Any]], i: int, blocks: list[dict[str, Any]]
) -> list[Violation]:
    wanted = [b.get("id") or "" for b in blocks if b.get("type") == "tool_use"]
    if not wanted:
        return []
    answered: set[str] = set()
    if i + 1 < len(messages) and messages[i + 1].get("role") == "user":
        for block in _blocks(messages[i + 1]):
            if block.get("type") == "tool_result":
                answered.add(block.get("tool_use_id") or "")
    missing = [w for w in wanted if not w or w not in answered]
    if not missing:
        return []
    return [
        Violation(
            i,
            "missing_result",
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message.",
        )
    ]


def _anthropic_results(
    messages: Sequence[dict[str, Any]], j: int, blocks: list[dict[str, Any]], older: int | None
) -> list[Violation]:
    """The results of message ``j``; ``older`` is the latest assistant message before
    message ``j - 1`` (a result answering it is displaced rather than orphaned)."""
    out: list[Violation] = []
    previous = messages[j - 1] if j > 0 else None
    calls: set[str] = set()
    if previous is not None and previous.get("role") == "assistant":
        calls = _tool_use_ids(previous)
    earlier = _tool_use_ids(messages[older]) if older is not None else set()
    seen: set[str] = set()
    other_before = False
    for k, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            other_before = True
            continue
        where = f"messages.{j}.content.{k}"
        uid = block.get("tool_use_id") or ""
        if not uid:
            out.append(
                Violation(j, "empty_id", f"{where}: `tool_result` has an empty `tool_use_id`")
            )
        elif uid not in calls:
            code = "displaced_result" if uid in earlier else "orphan_result"
            out.append(
                Violation(
                    j,
                    code,
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {uid}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the "
                    "previous message.",
                )
            )
        elif uid in seen:
            out.append(
                Violation(j, "duplicate_result", f"{where}: more than one `tool_result` for {uid}")
            )
        elif other_before:
            out.append(
                Violation(
                    j,
                    "result_not_first",
                    f"{where}: `tool_result` blocks must come first in the user message, "
                    "before any other content",
                )
            )
        seen.add(uid)
    return out


def _tool_use_ids(message: dict[str, Any]) -> set[str]:
    return {b.get("id") or "" for b in _blocks(message) if b.get("type") == "tool_use"}


# -- OpenAI Chat Completions ---------------------------------------------------------------


def _openai(messages: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    i = 0
    last_calls: set[str] = set()  # calls of the latest assistant message, for "displaced"
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        if role == "tool":
            uid = message.get("tool_call_id") or ""
            code = "displaced_result" if uid and uid in last_calls else "orphan_result"
            out.append(
                Violation(
                    i,
                    code,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                )
            )
            i += 1
            continue
        calls = message.get("tool_calls") if role == "assistant" else None
        if role == "assistant":
            last_calls = set()
        if not isinstance(calls, list) or not calls:
            i += 1
            continue
        for k, call in enumerate(calls):
            body = call.get(call.get("type") or "function") if isinstance(call, dict) else None
            if isinstance(body, dict) and _blank(body.get("name")):
                out.append(
                    Violation(i, "empty_name", _empty_name(f"messages[{i}].tool_calls[{k}]"))
                )
        ids = [c.get("id") or "" if isinstance(c, dict) else "" for c in calls]
        last_calls = set(ids)
        seen: set[str] = set()
        for uid in ids:
            if not uid:
                out.append(Violation(i, "empty_id", "'tool_calls' has an entry with an empty 'id'"))
            elif uid in seen:
                out.append(
                    Violation(
                        i, "duplicate_id", f"Duplicate 'tool_call_id' of '{uid}' in 'tool_calls'."
                    )
                )
            seen.add(uid)
        answered: set[str] = set()
        j = i + 1
        while j < len(messages) and messages[j].get("role") == "tool":
            uid = messages[j].get("tool_call_id") or ""
            if uid not in seen or not uid:
                out.append(
                    Violation(
                        j,
                        "orphan_result",
                        f"Invalid parameter: 'tool_call_id' of '{uid}' not found in 'tool_calls' "
                        "of previous message.",
                    )
                )
            elif uid in answered:
                out.append(
                    Violation(j, "duplicate_result", f"More than one tool message for '{uid}'.")
                )
            answered.add(uid)
            j += 1
        missing = [uid for uid in ids if not uid or uid not in answered]
        if missing:
            out.append(
                Violation(
                    i,
                    "missing_result",
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(missing)}",
                )
            )
        i = j
    return sorted(out, key=lambda v: v.index)


# -- OpenAI Responses ------------------------------------------------------------------------


def _responses(items: Sequence[dict[str, Any]]) -> list[Violation]:
    out: list[Violation] = []
    # Pending calls of the current turn: call_id -> (index, call item type).
    pending: dict[str, tuple[int, str]] = {}
    answered: dict[str, str] = {}  # call_id -> call item type, answered in this turn
    older: set[str] = set()  # call ids of earlier turns, for "displaced"
    in_turn = False

    def close_turn() -> None:
        for uid, (index, kind) in pending.items():
            out.append(
                Violation(
                    index, "missing_result", f"No tool output found for {ri.words(kind)} {uid}."
                )
            )
        older.update(pending, answered)

    for i, item in enumerate(items):
        kind = ri.item_type(item)
        if kind == "reasoning" and not (i + 1 < len(items) and ri.is_model_item(items[i + 1])):
            out.append(
                Violation(
                    i,
                    "reasoning_without_item",
                    f"Item '{item.get('id', '')}' of type 'reasoning' was provided without its "
                    "required following item.",
                )
            )
        if ri.is_model_item(item):
            if not in_turn:
                close_turn()
                pending, answered, in_turn = {}, {}, True
            spec = ri.call_item(item)
            if spec is not None:
                if spec.name_key is not None and _blank(item.get(spec.name_key)):
                    out.append(Violation(i, "empty_name", _empty_name(f"input[{i}]")))
                uid = item.get("call_id") or ""
                if not uid:
                    out.append(Violation(i, "empty_id", f"{kind} item has an empty call_id."))
                elif uid in pending or uid in answered:
                    out.append(
                        Violation(i, "duplicate_id", f"Duplicate call_id {uid} in one model turn.")
                    )
                else:
                    pending[uid] = (i, kind)
            continue
        in_turn = False
        output = ri.output_item(item)
        if output is None:
            continue
        uid = ri.output_call_id(item, output) or ""
        if uid in pending and ri.answers(kind, pending[uid][1]):
            answered[uid] = pending.pop(uid)[1]
        elif uid and uid in answered and ri.answers(kind, answered[uid]):
            out.append(Violation(i, "duplicate_result", f"More than one output for call_id {uid}."))
        else:
            code = "displaced_result" if uid and uid in older else "orphan_result"
            out.append(
                Violation(i, code, f"No tool call found for {ri.words(kind)} with call_id {uid}.")
            )
    close_turn()
    return sorted(out, key=lambda v: v.index)
