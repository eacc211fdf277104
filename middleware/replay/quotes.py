"""An independent retention measure: what the model quotes.

A model quotes what it read: an edit's old text is lines of the file it read, a command or
a search often repeats a line of an earlier output. A *quote* is a line of a tool call's
input (stripped, at least :data:`MIN_QUOTE` characters) found, exactly, in a tool result
earlier in the session and in nothing else written before it (not typed by the user, not
written by the model itself, as an earlier edit's new text); it is *hidden* when the
processed request no longer holds it anywhere.

Nothing here tokenizes: it shares no code with what summaries and previews keep
(:mod:`middleware.steps.mentions`), so they cannot satisfy it by construction, as they do
the token measure of :mod:`.references`.

An edit one of whose quoted lines is hidden is a *forced re-read*: the agent must read the
file again (one more turn, and the text written to the cache again) or edit blind.

An agent of the text protocol (mini-swe-agent, SWE-agent's text mode) has no tool calls:
its command is the fenced code of its answer, and its lines are read as a call's input.

Codex edits with ``apply_patch`` (a custom tool call whose input is the patch, or the same
patch in a shell heredoc, ``apply_patch <<'EOF'``): in a patch, context lines (``' '``)
and removed lines (``'-'``) are an edit's old text, added lines (``'+'``) are the model's
own (no quote, and written by it for the calls after), and the headers (``*** Update
File:``, ``@@``) are not quotes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from middleware.replay.references import answer_texts, other_strings
from middleware.replay.references import is_hidden as is_token_hidden
from middleware.view import Conversation, ToolCall, ToolResult

#: Characters a quoted line has at least: shorter lines (``}``, ``return x``, ``fi``)
#: are everywhere and say nothing about where they came from.
MIN_QUOTE = 20
#: Call input keys that hold the text an edit replaces (Claude Code's ``Edit`` and
#: ``MultiEdit``, Gemini CLI's ``replace``, opencode's ``edit``, SWE-agent's and
#: OpenHands' ``str_replace``).
EDIT_KEYS = frozenset({"old_string", "oldString", "old_str"})
#: A fenced block of an answer's text: a text-protocol agent's command.
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
#: The lines that open and close an apply_patch patch (Codex's format).
PATCH_BEGIN, PATCH_END = "*** Begin Patch", "*** End Patch"


@dataclass(frozen=True)
class Quote:
    """One quoted line, where it was taken from, and by what."""

    text: str
    #: (message, block) of the latest earlier tool result that holds it.
    source: tuple[int, int]
    #: The tool whose result it was taken from, and the tool whose call quotes it.
    source_tool: str
    call_id: str
    #: Whether it is a line of an edit's old text.
    in_edit: bool


def quotes(conversation: Conversation, start: int) -> list[Quote]:
    """The quotes of the assistant turn starting at message ``start`` (its tool calls'
    inputs), taken from the results of the messages before it."""
    results = _results(conversation, start)
    if not results:
        return []
    written = "\n".join(_written(conversation, start))
    found: list[Quote] = []
    for call_id, lines in _inputs(conversation, start):
        seen: set[str] = set()
        for line, in_edit in lines:
            if line in seen or line in written:
                continue
            seen.add(line)
            source = next((where for where, text, _ in results if line in text), None)
            if source is not None:
                tool = next(name for where, _, name in results if where == source)
                found.append(Quote(line, source, tool, call_id, in_edit))
    return found


def _inputs(
    conversation: Conversation, start: int
) -> Iterator[tuple[str, Iterator[tuple[str, bool]]]]:
    """Each tool input of the assistant turn starting at ``start``, by its call id, as
    its quotable lines: a call's arguments, or, for a text-protocol agent, the fenced code
    of its answer."""
    text_agent = any(
        isinstance(block, ToolResult) and block.text_protocol
        for node in conversation.nodes[:start]
        for block in node.blocks
    )
    for index, node in enumerate(conversation.nodes[start:], start):
        if node.role != "assistant":
            break
        calls = [block for block in node.blocks if isinstance(block, ToolCall)]
        for call in calls:
            yield call.id, _quoted_lines(call.arguments)
        if text_agent and not calls:
            code = "\n".join(_FENCED.findall("\n".join(answer_texts(node.raw))))
            yield f"text:{index}", _lines_of(code, in_edit=False)


def is_hidden(quote: Quote, serialized_request: str) -> bool:
    """Whether the serialised (JSON) request lacks the quoted line, escaped or not."""
    return is_token_hidden(quote.text, serialized_request)


def _results(conversation: Conversation, start: int) -> list[tuple[tuple[int, int], str, str]]:
    """(message, block), text and tool of every tool result before ``start``, latest first."""
    names = {
        block.id: block.name
        for node in conversation.nodes[:start]
        for block in node.blocks
        if isinstance(block, ToolCall)
    }
    out = []
    for i in range(start - 1, -1, -1):
        for j, block in enumerate(conversation.nodes[i].blocks):
            if isinstance(block, ToolResult):
                tool = names.get(block.call_id) or block.tool_name or "tool"
                out.append(((i, j), block.text, tool))
    return out


def _written(conversation: Conversation, start: int) -> Iterator[str]:
    """What was written before ``start`` other than tool results: the user's and the
    model's text, and the model's earlier tool inputs (an edit's new text), also as
    decoded from the JSON string a call's arguments may be (where quotes are escaped)."""
    for node in conversation.nodes[:start]:
        yield from other_strings(node.raw, node.results)
        for block in node.blocks:
            if isinstance(block, ToolCall) and isinstance(block.arguments, str):
                yield from other_strings(_decoded(block.arguments), ())


def _decoded(arguments: Any) -> Any:
    """A call's input: its arguments, decoded when they are a JSON string (a plain
    string, as a custom tool's input, is ``{"input": text}``)."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return {"input": arguments}


def _quoted_lines(arguments: Any) -> Iterator[tuple[str, bool]]:
    """Each line of the string values of a call's input long enough to be a quote, and
    whether it is a line of an edit's old text."""
    yield from _lines_of(_decoded(arguments), in_edit=False)


def _lines_of(value: Any, *, in_edit: bool) -> Iterator[tuple[str, bool]]:
    if isinstance(value, str):
        in_patch = False
        for line in value.splitlines():
            stripped = line.strip()
            if stripped in (PATCH_BEGIN, PATCH_END):
                in_patch = stripped == PATCH_BEGIN
                continue
            quoted = _patch_line(line) if in_patch else (stripped, in_edit)
            if quoted is not None and len(quoted[0]) >= MIN_QUOTE:
                yield quoted
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _lines_of(item, in_edit=in_edit or key in EDIT_KEYS)
    elif isinstance(value, list):
        for item in value:
            yield from _lines_of(item, in_edit=in_edit)


def _patch_line(line: str) -> tuple[str, bool] | None:
    """A line of an apply_patch patch as a possible quote: context and removed lines are
    old text, headers and added lines nothing (``None``); another line, which no patch
    holds, is read as a plain line."""
    if line.startswith(("***", "@@", "+")):
        return None
    if line.startswith((" ", "-")):
        return line[1:].strip(), True
    return line.strip(), False
