"""Microcompaction's writing: what a plan compacts, and the old calls' inputs it clears,
written into the conversation, each saved whole to the spill store first and recorded.

:mod:`.step` decides what to compact and when; this module only carries it out, so the
request's size it keeps follows every rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from middleware.cache import Identity
from middleware.plugin.context import (
    StepContext,
    file_access,
    plugin_content_type,
    plugin_summary,
)
from middleware.report import ActionKind
from middleware.steps.definitions import is_source_file
from middleware.steps.file_tools import FileTools, answer_commands
from middleware.steps.microcompact.inputs import clear_input
from middleware.steps.microcompact.readings import Keeps, Readings
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.steps.read_back import FileRead
from middleware.view import CallSite, Conversation, ResultSite, ToolCall


@dataclass(frozen=True)
class Plan:
    """A result to compact, and how far."""

    site: ResultSite
    level: str  # "truncate" | "summarize"


class Rewrite:
    """Writes compacted results and cleared inputs into ``conversation``, keeping
    :attr:`size` (characters of the request) up to date as they shrink."""

    def __init__(
        self,
        settings: MicrocompactSettings,
        context: StepContext,
        conversation: Conversation,
        readings: Readings,
    ) -> None:
        self.size = 0  # characters of the request, kept up to date as results shrink
        self.settings = settings
        self.context = context
        self.conversation = conversation
        self.readings = readings
        self.tools = FileTools(
            partial(file_access, context), answer_commands(conversation, context.codec)
        )
        #: The results that are a file's text, by (node, block), and what each read.
        self.reads: dict[tuple[int, int], FileRead] = {}
        host = context.internal.host
        self._plugins_summarize = host.implements("summarize_result") or host.implements(
            "detect_content_type"
        )

    def keeps(self, node: int, block: int) -> Keeps:
        """What the summary of the result at ``node``, ``block`` keeps at most: a file
        read's lines are code, not failures, and a source file's imports and definitions
        are what the agent comes back for."""
        s = self.settings
        read = self.reads.get((node, block))
        if read is None:
            return Keeps(s.mentions, s.error_lines)
        written = "{definitions}" in s.summary_template and is_source_file(read.file)
        return Keeps(s.reads.mentions, 0, s.reads.definitions_chars if written else 0)

    def apply(self, plans: list[Plan]) -> None:
        for plan in plans:
            site = plan.site
            result = site.result
            current = result.text
            # Work from the full text: the budget step hands it on when it spilled the
            # result in this call; a result compacted earlier names its file. The pointer
            # then names the same file and the counts are the original's.
            text = self.readings.full_text(site.result)
            path = self._save(site, text)
            if path is None:
                continue
            file = self.reads.get((site.node, site.block))
            if plan.level == "truncate":
                new = self.settings.truncate(text, path, self.context.session_id, file)
            else:
                new = self._summary(text, site, path, file)
            if new is None or len(new) >= len(current):
                continue
            self.conversation.replace_block(site.node, site.block, result.with_text(new))
            self.size -= len(current) - len(new)
            self.context.record(
                ActionKind.TRUNCATED if plan.level == "truncate" else ActionKind.SUMMARIZED,
                tool_call_id=result.call_id, tool_name=site.tool_name,
                message_index=self.conversation.nodes[site.node].origin,
                chars_before=len(current), chars_after=len(new), age=site.age, path=path,
            )  # fmt: skip

    def _summary(self, text: str, site: ResultSite, path: str, file: FileRead | None) -> str | None:
        """The summary of ``text``, saved at ``path`` (for a file read, ``file``: the
        summary says to read the file again). Plugins that summarise or name content types
        are asked every time (their answer is theirs to cache); without them, the summary
        depends on the text, the path, the read and the policy alone and is made once,
        however many requests carry the result."""
        tool_name = site.tool_name
        keeps = self.keeps(site.node, site.block)

        def built_in(kind: str | None = None) -> str | None:
            found, errors, detected, _ = self.readings.parts(
                text, keeps.mentions, keeps.error_lines
            )
            return self.settings.summarize(
                text, path, kind or detected, list(found), list(errors),
                session=self.context.session_id, file=file,
                definitions=self.readings.definitions(text, keeps.definitions_chars),
            )  # fmt: skip

        if self._plugins_summarize:
            kind = plugin_content_type(self.context, text, tool_name)
            content_type = (
                kind or self.readings.parts(text, keeps.mentions, keeps.error_lines).content_type
            )
            found = plugin_summary(self.context, text, tool_name, content_type, path)
            return found if found is not None else built_in(kind)
        return self.context.internal.cache.derive(
            ("summary", Identity(self.context.policy), text, path, file),
            built_in,
            lambda summary: 0 if summary is None else len(summary),
            (text,),
        )

    def clear_inputs(self, calls: tuple[CallSite, ...], boundary: int) -> None:
        """Clear the long strings of old calls' inputs (:mod:`.inputs`), from
        ``inputs.clear_turns``, before the same boundary as results."""
        settings = self.settings.inputs
        if not settings.tools:
            return
        for site in calls:
            if boundary - 1 - site.turn < settings.clear_turns:
                continue
            call = self.conversation.nodes[site.node].blocks[site.block]
            if not isinstance(call, ToolCall) or call.sealed:
                continue
            key = f"{call.id or call.name}-input"

            def save(text: str, key: str = key) -> str:
                return self.context.spill.save(key, text, suffix=".json")

            try:
                cleared = clear_input(call, settings, save, self.context.internal.cache)
            except OSError as exc:
                self.context.record(
                    ActionKind.COMPACTION_SKIPPED, tool_call_id=call.id, tool_name=call.name,
                    message_index=self.conversation.nodes[site.node].origin, error=str(exc),
                )  # fmt: skip
                continue
            if cleared is None:
                continue
            new_call, path, before, after = cleared
            self.conversation.replace_block(site.node, site.block, new_call)
            self.size -= before - after
            self.context.record(
                ActionKind.INPUT_CLEARED, tool_call_id=call.id, tool_name=call.name,
                message_index=self.conversation.nodes[site.node].origin,
                chars_before=before, chars_after=after, age=boundary - 1 - site.turn, path=path,
            )  # fmt: skip

    def _save(self, site: ResultSite, text: str) -> str | None:
        key = site.result.call_id or site.tool_name or "result"
        try:
            return self.context.spill.save(key, text)
        except OSError as exc:
            self.context.record(
                ActionKind.COMPACTION_SKIPPED,
                tool_call_id=site.result.call_id, tool_name=site.tool_name,
                message_index=self.conversation.nodes[site.node].origin,
                chars_before=len(text), chars_after=len(text), error=str(exc),
            )  # fmt: skip
            return None
