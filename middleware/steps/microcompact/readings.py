"""What microcompaction reads of a result: whether this product wrote it (a summary or
truncation, verified against the spill store), the full text it stands for, and what a
summary of it keeps. Each is read once per text and request, and across requests while the
store agrees (a session's requests carry the same old results again and again)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

from middleware.cache import Identity
from middleware.cache.kept import KeptKind
from middleware.plugin.context import StepContext, verified
from middleware.steps.content_types import CONTENT_TYPES, detect_content_type
from middleware.steps.definitions import definitions
from middleware.steps.file_text import is_file_text
from middleware.steps.line_kinds import error_lines
from middleware.steps.mentions import mentions
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.steps.notices import without_notices
from middleware.view import ToolResult

#: About what a summary's line takes, without and with the sentence saying how to read
#: the text back (``{recall}`` in its template).
SUMMARY_LINES = (200, 450)


class Keeps(NamedTuple):
    """What the summary of one result keeps at most: mentions, error lines, and
    characters of a source file's imports and definitions."""

    mentions: int
    error_lines: int
    definitions_chars: int = 0


class Parts(NamedTuple):
    """What a summary of a result is made of, and about how long it is."""

    mentions: tuple[str, ...]
    errors: tuple[str, ...]
    content_type: str
    #: Every request weighs every old result by it: added up once.
    summary_size: int


class Readings:
    """What one request's microcompaction has read of result texts."""

    def __init__(self, settings: MicrocompactSettings, context: StepContext) -> None:
        self.settings = settings
        self.context = context
        #: What each text is (written by this step, or the full text it stands for),
        #: verified against the spill store once per text in this request.
        self._states: dict[str, tuple[str | None, str | None]] = {}

    def compacted_to(self, text: str) -> str | None:
        """``summarize`` or ``truncate`` if this step wrote ``text`` (checked against the
        spill store), else ``None``."""
        return self._own(text)[0]

    def recovered(self, text: str) -> str | None:
        """The full text of a preview or truncation this product wrote, else ``None``."""
        return self._own(text)[1]

    def recover(self, text: str) -> str:
        """The original of a preview or truncation made earlier, read back from the spill
        store; ``text`` itself when it is neither or the store no longer has it."""
        recovered = self.recovered(text)
        return text if recovered is None else recovered

    def full_text(self, result: ToolResult) -> str:
        """The text a summary of ``result`` is made from: the budget step hands it on when
        it spilled the result in this request; a result compacted earlier names its file."""
        return result.original if result.original is not None else self.recover(result.text)

    def original_size(self, result: ToolResult) -> int:
        """The size before any cut (budget preview or truncation), which eligibility is
        judged on."""
        if result.original is not None:
            return len(result.original)
        recovered = self.recovered(result.text)
        return len(recovered if recovered is not None else result.text)

    def summary_size(self, text: str, keeps: Keeps) -> int:
        """About what a summary of ``text`` keeps: its line, its mentions, its errors, its
        definitions."""
        size = self.parts(text, keeps.mentions, keeps.error_lines).summary_size
        return size + len(self.definitions(text, keeps.definitions_chars))

    def definitions(self, text: str, chars: int) -> str:
        """The imports and definitions a summary of ``text`` keeps in ``chars`` characters
        (:func:`~middleware.steps.definitions.definitions`), read once per text."""
        if chars <= 0:
            return ""
        return self.context.internal.cache.derive(
            ("summary-definitions", text, chars), lambda: definitions(text, chars), len, (text,)
        )

    def parts(self, text: str, count: int, lines: int) -> Parts:
        """What a summary keeps of ``text`` (up to ``count`` mentions, within the
        policy's share of the text, and up to ``lines`` error lines, none of a file's
        content) and its detected content type: read once per text and settings, however
        many requests repeat it."""
        share = self.settings.mentions_share
        # The summary's line, and the sentence saying how to read the text back.
        line = SUMMARY_LINES[1] if "{recall}" in self.settings.summary_template else (
            SUMMARY_LINES[0])  # fmt: skip

        def read() -> Parts:
            found = tuple(_within_share(mentions(text, count), share, len(text)))
            kind = detect_content_type(text)
            # A file's lines are code, not failures (:mod:`middleware.steps.file_text`).
            errors = () if is_file_text(text, kind) else tuple(error_lines(text, lines))
            size = line + sum(len(m) + 2 for m in found) + sum(len(e) + 13 for e in errors)
            return Parts(found, errors, kind, size)

        return self.context.internal.kept.derive(
            PARTS, ("summary-parts", text, count, lines, share), read, _parts_size, (text,)
        )

    def _own(self, text: str) -> tuple[str | None, str | None]:
        """What this product made of ``text`` (the step's level, the original it stands
        for), read once per text and request, and across requests while the store agrees."""
        found = self._states.get(text)
        if found is None:
            found = self._states[text] = verified(
                self.context,
                ("microcompact-own", Identity(self.context.policy), text),
                lambda load: self._read_own(text, load),
                lambda _: 100,
                lambda value: (text,) if value[1] is None else (text, value[1]),
            )
        return found

    def _read_own(
        self, text: str, load: Callable[[str], str | None]
    ) -> tuple[str | None, str | None]:
        own = without_notices(text, self.context.policy)
        state = None
        if self.settings.is_summary(own, load):
            state = "summarize"
        elif self.settings.is_truncation(own, load):
            state = "truncate"
        return state, self.settings.recover(own, load)


def _within_share(found: list[str], share: float | None, chars: int) -> list[str]:
    """The first of ``found`` whose list (each with its ``, ``) takes at most ``share``
    of ``chars`` characters."""
    if share is None:
        return found
    room = share * chars
    kept: list[str] = []
    for mention in found:
        room -= len(mention) + 2
        if room < 0:
            break
        kept.append(mention)
    return kept


def _parts_from(value: object) -> Parts | None:
    """The parts :data:`PARTS` kept as ``value``, or ``None`` if it is not their shape."""
    if not (isinstance(value, list) and len(value) == 4):
        return None
    found, errors, content_type, size = value
    if not (
        _strings(found) and _strings(errors) and isinstance(content_type, str)
        and isinstance(size, int) and not isinstance(size, bool)
    ):  # fmt: skip
        return None
    return Parts(tuple(found), tuple(errors), content_type, size)


def _could_be_parts(parts: Parts, text: str, count: int, lines: int) -> bool:
    """Whether ``parts`` could be what a summary keeps of ``text`` (the key of
    :data:`PARTS`): at most ``count`` mentions and ``lines`` error lines, each found in
    the text after the one before it (in order of appearance, as they are read), a
    content type :func:`detect_content_type` gives, and the size they add up to. A
    reading read back from a file is used only if it passes: it never names what the
    text does not say. Each search starts where the last one was found, so the check
    reads no further into the text than working the parts out did."""
    if len(parts.mentions) > count or len(parts.errors) > lines:
        return False
    if parts.content_type not in CONTENT_TYPES:
        return False
    for found in (parts.mentions, parts.errors):
        at = 0
        for piece in found:
            at = text.find(piece, at) if piece and "\n" not in piece else -1
            if at < 0:
                return False
    listed = sum(len(m) + 2 for m in parts.mentions) + sum(len(e) + 13 for e in parts.errors)
    return parts.summary_size - listed in SUMMARY_LINES


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


#: What a summary keeps of a text, kept for a process that starts cold
#: (:mod:`middleware.cache.kept`).
PARTS = KeptKind(
    "summary-parts",
    (
        "middleware.steps.file_text",
        "middleware.steps.line_kinds",
        "middleware.steps.mentions",
        "middleware.steps.content_types",
        "middleware.steps.microcompact.readings",
    ),
    encode=lambda parts: [list(parts.mentions), list(parts.errors), *parts[2:]],
    decode=_parts_from,
    # Its key is ("summary-parts", text, count, lines, share).
    check=lambda parts, key: _could_be_parts(parts, *cast(tuple[str, int, int], key[1:4])),
)


def _parts_size(parts: Parts) -> int:
    return 100 + sum(len(m) + 60 for m in parts.mentions) + sum(len(e) + 60 for e in parts.errors)
