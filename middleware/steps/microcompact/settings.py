"""The microcompaction step's settings, bound from a policy snapshot, and its texts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from middleware.policy.settings import converted, group, section, setting
from middleware.policy.templates import fill
from middleware.steps.microcompact.inputs import InputSettings
from middleware.steps.microcompact.protection import ReadSettings
from middleware.steps.previews import PreviewStyle, make_preview, parse_template, recover_preview
from middleware.steps.read_back import FileRead, ReadBack


@section("microcompact")
@dataclass(frozen=True)
class MicrocompactSettings:
    enabled: bool
    truncate_turns: int
    summarize_turns: int
    head_chars: int
    tail_chars: int
    min_content: int
    truncate_template: str
    summary_template: str
    mentions: int
    error_lines: int
    keep_errors: bool
    keep_results: int
    #: A summary's mentions take at most this share of its result's characters.
    mentions_share: float | None
    exempt_tools: frozenset[str] = converted(frozenset)
    step_turns: int = setting("microcompact.schedule.step_turns")
    trigger_tokens: int = setting("microcompact.schedule.trigger_tokens")
    min_reclaim_tokens: int = setting("microcompact.schedule.min_reclaim_tokens")
    min_reclaim_ratio: float = setting("microcompact.schedule.min_reclaim_ratio")
    rewrite_cost: float = setting("microcompact.schedule.rewrite_cost")
    expected_turns_factor: float = setting("microcompact.schedule.expected_turns_factor")
    expected_turns_min: int = setting("microcompact.schedule.expected_turns_min")
    expected_turns_max: int = setting("microcompact.schedule.expected_turns_max")
    cold_rewrites: bool = setting("microcompact.schedule.cold_rewrites")
    window_tokens: int | None = setting("microcompact.schedule.window_tokens")
    chars_per_token: float = setting("microcompact.schedule.chars_per_token")
    #: The budget step's preview style, to recognise its previews.
    budget_preview: PreviewStyle = group(PreviewStyle, "budget.preview")
    #: Which old tool-call inputs are cleared, and how.
    inputs: InputSettings = group(InputSettings, "microcompact.inputs")
    #: How file reads are protected and summarised.
    reads: ReadSettings = group(ReadSettings, "microcompact.reads")
    #: How a ``{recall}`` field says to read the full output back.
    read_back: ReadBack = group(ReadBack, "recall")

    def truncate(
        self, text: str, path: str, session: str = "", file: FileRead | None = None
    ) -> str | None:
        """Head + marker + tail, the marker giving the exact count left out and the file."""
        return make_preview(text, self._truncate_style, path=path, session=session, file=file)

    def summarize(
        self, text: str, path: str, content_type: str, mentions: list[str], errors: list[str],
        *, session: str = "", file: FileRead | None = None, definitions: str = "",
    ) -> str:  # fmt: skip
        """One line naming what was cleared and where it is, how to read it back (the
        file again, for a file read), then what the model is likely to need from it: the
        paths and identifiers it mentions, its error lines, a source file's imports and
        definitions (``definitions``, :mod:`middleware.steps.definitions`)."""
        recall = ""
        if "{recall}" in self.summary_template:
            lines = _line_count(text)
            recall = self.read_back.instruction(
                text, path, 0, len(text), session=session, total_lines=lines, file=file
            )
        return fill(
            self.summary_template,
            {
                "recall": recall,
                "lines": _line_count(text),
                "chars": len(text),
                "type": content_type,
                "mentions": f"\nMentions: {', '.join(mentions)}" if mentions else "",
                "errors": "".join(f"\nError line: {one_line(line)}" for line in errors),
                "definitions": definitions,
            },
            {"path": path},
        )

    def recover(self, text: str, load: Callable[[str], str | None]) -> str | None:
        """The full text of a budget preview or a truncation this product wrote (verified
        against the spill store, never recognised by its words alone)."""
        for style in (self.budget_preview, self._truncate_style):
            content = recover_preview(text, style, load)
            if content is not None:
                return content
        return None

    def is_truncation(self, text: str, load: Callable[[str], str | None]) -> bool:
        """Whether ``text`` is a truncation this step wrote."""
        return recover_preview(text, self._truncate_style, load) is not None

    def is_summary(self, text: str, load: Callable[[str], str | None]) -> bool:
        """Whether ``text`` is a summary this step wrote: it has the template's shape, and
        the file it names holds a text of the size and line count it states."""
        fields = parse_template(text, self.summary_template)
        path = None if fields is None else fields.get("path")
        if fields is None or not path:
            return False
        content = load(path)
        if content is None:
            return False
        if "chars" in fields and int(fields["chars"]) != len(content):
            return False
        return "lines" not in fields or int(fields["lines"]) == _line_count(content)

    @property
    def _truncate_style(self) -> PreviewStyle:
        return PreviewStyle(
            head=self.head_chars,
            tail=self.tail_chars,
            unit="chars",
            template=self.truncate_template,
            line_breaks=True,
            outline_chars=0,
            read_back=self.read_back,
        )


#: The line breaks :meth:`str.splitlines` cuts at, besides "\n": an error line shows each
#: as a space, so it stays one line.
_OTHER_BREAKS = str.maketrans(dict.fromkeys("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", " "))


def one_line(line: str) -> str:
    """``line`` with every line break shown as a space (as long as it was)."""
    return line.translate(_OTHER_BREAKS)


def _line_count(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)
