"""What the tool calls of a request do with files, as the plugins declare it
(:class:`~middleware.FileAccess`): which results are a file's text, which read each
answers, and which calls write a file, for the steps that keep reads whole and tell the
model to read a file again.

A result of the text protocol (mini-swe-agent, SWE-agent's text mode) answers no call:
its command is the code block of the model's answer before it
(:func:`~middleware.formats.text_protocol.command_block`), run by the tool the protocol's
rule names (``bash``), whose declaration says how to read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from middleware.formats.base import Codec
from middleware.formats.text_protocol import command_block
from middleware.formats.values import content_text
from middleware.plugin.capabilities import FileAccess, call_arguments
from middleware.plugin.file_use import NOTHING, FileUse
from middleware.steps.read_back import FileRead
from middleware.view import Conversation, ConversationIndex, ResultSite, ToolCall

#: What a call is: its tool's declaration, its tool's name, its input.
_Call = tuple[FileAccess, str, Any]


class FileTools:
    """What each call does with files, asked of the plugins once per tool and request;
    ``commands(node)``: the command a text-protocol result at ``node`` answers."""

    def __init__(
        self,
        ask: Callable[[str], FileAccess | None],
        commands: Callable[[int], str | None] | None = None,
    ) -> None:
        self._ask = ask
        self._known: dict[str, FileAccess | None] = {}
        self._commands = commands
        self._uses: dict[tuple[int, int], FileUse] = {}

    def access(self, tool_name: str | None) -> FileAccess | None:
        if tool_name is None:
            return None
        if tool_name not in self._known:
            self._known[tool_name] = self._ask(tool_name)
        return self._known[tool_name]

    def call_use(self, call: ToolCall) -> FileUse:
        """What ``call`` reads and writes."""
        access = self.access(call.name)
        return NOTHING if access is None else access.use(call_arguments(call))

    def use(self, site: ResultSite) -> FileUse:
        """What the call ``site`` answers reads and writes."""
        key = (site.node, site.block)
        found = self._uses.get(key)
        if found is None:
            call = self._call(site)
            found = self._uses[key] = NOTHING if call is None else call[0].use(call[2])
        return found

    def is_read(self, site: ResultSite) -> bool:
        """Whether ``site`` is a file's text: its call reads files, and nothing else."""
        return bool(self.use(site).reads)

    def read_of(self, site: ResultSite) -> FileRead | None:
        """The read ``site`` answers, when its call reads files: the tool, the files, and
        the arguments a sentence telling to make the read again names."""
        use = self.use(site)
        call = self._call(site) if use.reads else None
        if call is None:
            return None
        access, tool, arguments = call
        return FileRead.of(tool, ", ".join(use.files_read), arguments, access.said_arguments)

    def acts(self, index: ConversationIndex) -> Iterator[tuple[int, int, FileUse]]:
        """Each call of the history that reads or writes a file (a text-protocol result
        stands for its command), with its node and turn."""
        for call in index.calls:
            use = self.call_use(call.call)
            if use.reads or use.writes:
                yield call.node, call.turn, use
        if self._commands is None:
            return
        for site in index.results:
            if site.result.text_protocol and site.turn is not None:
                use = self.use(site)
                if use.reads or use.writes:
                    yield site.node, site.turn, use

    def _call(self, site: ResultSite) -> _Call | None:
        if site.call is not None:
            call = site.call.call
            access = self.access(call.name)
            return None if access is None else (access, call.name, call_arguments(call))
        if not site.result.text_protocol or self._commands is None:
            return None
        access = self.access(site.tool_name)
        if access is None or access.action != "shell" or site.tool_name is None:
            return None
        command = self._commands(site.node)
        if command is None:
            return None
        return access, site.tool_name, {access.command_arguments[0]: command}


def answer_commands(conversation: Conversation, codec: Codec) -> Callable[[int], str | None]:
    """The command a text-protocol result at a node answers: the code block of the
    model's answer right before it (:func:`.command_block`)."""
    found: dict[int, str | None] = {}

    def command(node: int) -> str | None:
        if node not in found:
            nodes = conversation.nodes
            before = nodes[node - 1] if 0 < node <= len(nodes) else None
            raw = before.raw if before is not None and before.role == "assistant" else None
            found[node] = (
                command_block(content_text(codec.message_content(raw)))
                if isinstance(raw, dict)
                else None
            )
        return found[node]

    return command


def read_outputs(
    results: Sequence[ResultSite], count: int, start: int, tools: FileTools
) -> list[int]:
    """Characters of file reads in each of ``count`` messages from ``start``: what the
    protected window counts (the results as they came: a request carries them so)."""
    out = [0] * count
    for site in results:
        if tools.is_read(site):
            out[site.node - start] += site.result.chars
    return out
