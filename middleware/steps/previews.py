"""Head + tail previews of a result whose full text was spilled to disk.

The preview's sizes and its template come from the policy, so ChatCLI's head+tail marker,
Claude Code's head-only ``<persisted-output>`` block or Ethos' one-line notice are
policies, not code. Counts in the marker are exact, cuts fall on line breaks where the
policy says so and never inside a character (:mod:`.preview_cuts`), and a preview is
never longer than the text it replaces (in that case the caller keeps the text whole).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import cast

from middleware.cache.kept import KeptKind, KeptReadings
from middleware.policy.schema import default_of
from middleware.policy.settings import build
from middleware.policy.templates import (
    PREVIEW_FIELDS,
    fill,
    read_names,
    template_fields,
    template_literals,
    template_pattern,
    with_quoted,
)
from middleware.steps.file_text import is_file_text, is_log_file
from middleware.steps.outline import outline
from middleware.steps.outline_check import could_be_outline
from middleware.steps.preview_cuts import Unit, head_of, tail_of
from middleware.steps.read_back import FileRead, ReadBack

#: The outline of a preview, kept for a process that starts cold (:mod:`middleware.cache.kept`).
OUTLINE = KeptKind(
    "outline",
    (
        "middleware.steps.outline",
        "middleware.steps.mentions",
        "middleware.steps.line_kinds",
        "middleware.steps.file_text",
        "middleware.steps.content_types",
    ),
    encode=lambda lines: lines,
    decode=lambda value: value if isinstance(value, str) else None,
    # Its key is ("outline", text, start, end, budget, whether the result is a file read).
    check=lambda lines, key: could_be_outline(lines, *cast(tuple[str, int, int, int], key[1:5])),
)
#: Fields a preview template may use.
_FIELDS = with_quoted(PREVIEW_FIELDS)


@dataclass(frozen=True)
class PreviewStyle:
    """How a preview looks: ``head`` and ``tail`` sizes in ``unit``, and the template
    (the budget step binds it from ``budget.preview``)."""

    head: int
    tail: int
    unit: Unit
    template: str
    #: Cut the head back to its last line break (if that keeps at least half of it) and
    #: start the tail at a line break (if that drops at most half of it).
    line_breaks: bool
    #: Characters for the ``{outline}`` field: the lines of the omitted part that carry
    #: the most names the head and tail do not show (:mod:`.outline`); 0: none.
    outline_chars: int
    #: How the ``{recall}`` field says to read the rest back (the ``recall`` section;
    #: ``None``: its defaults).
    read_back: ReadBack | None = field(default=None, metadata={"group": ReadBack, "key": "recall"})

    def __post_init__(self) -> None:
        if self.head < 0 or self.tail < 0:
            raise ValueError("preview head and tail sizes must not be negative")
        unknown = template_fields(self.template) - _FIELDS
        if unknown:
            raise ValueError(
                f"unknown field(s) {', '.join(sorted(unknown))} in preview template; "
                f"known fields: {', '.join(sorted(_FIELDS))}"
            )


def make_preview(
    text: str,
    style: PreviewStyle,
    *,
    path: str,
    tool: str | None = None,
    cache: KeptReadings | None = None,
    session: str = "",
    file: FileRead | None = None,
) -> str | None:
    """The preview replacing ``text``, or ``None`` when it would not be shorter. What reads
    the whole text (its size and lines, the outline of the omitted part) is read once per
    text when a ``cache`` is given (the outline kept in its store too). ``session`` is the
    spill store's session, which a ``{recall}`` URL or command names; ``file`` the read
    a file-reading tool's result answers, which ``{recall}`` says to make again."""
    head = head_of(text, style.head, style.unit, style.line_breaks)
    tail = tail_of(text, style.tail, style.unit, style.line_breaks, len(head))
    omitted = len(text) - len(head) - len(tail)
    if omitted <= 0:
        return None
    lines = ""
    if style.outline_chars and "{outline}" in style.template:
        span = (len(head), len(text) - len(tail), style.outline_chars)
        # A file's lines report nothing (:mod:`.file_text`): a read's (but a log file's
        # lines are a log's), or by its shape.
        read = file is not None and not is_log_file(file.file)

        def outlined() -> str:
            return outline(text, *span, reports=not (read or is_file_text(text)))

        if cache is None:
            lines = outlined()
        else:
            key = ("outline", text, *span, read)
            lines = cache.derive(OUTLINE, key, outlined, span[2], (text,))
    n_bytes, n_lines = (
        _measure(text)
        if cache is None
        else cache.cache.derive(("measure", text), lambda: _measure(text), 64, (text,))
    )
    recall = ""
    if "{recall}" in style.template:
        read_back = style.read_back or default_read_back()
        recall = read_back.instruction(
            text, path, len(head), len(text) - len(tail), session=session, total_lines=n_lines,
            file=file,
        )  # fmt: skip
    preview = fill(
        style.template,
        {
            "recall": recall,
            "outline": lines,
            "head": head,
            "tail": tail,
            "omitted": omitted,
            "total": len(text),
            "total_bytes": n_bytes,
            "size": human_size(n_bytes),
            "lines": n_lines,
        },
        {"path": path, "tool": tool or "tool"},
    )
    return preview if len(preview) < len(text) else None


@lru_cache(maxsize=1)
def default_read_back() -> ReadBack:
    """The ``recall`` section's defaults, for a style made by hand (bound once)."""
    return build(ReadBack, "recall", default_of)


def _measure(text: str) -> tuple[int, int]:
    """UTF-8 bytes and lines of ``text``: reads all of it, so a cache keeps them (a result
    kept over its cap is previewed again on every request that carries it)."""
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return len(text.encode("utf-8", "surrogatepass")), lines


def human_size(n_bytes: int) -> str:
    """``512 B``, ``85.4 KB``, ``1.2 MB`` (decimal units, one decimal place)."""
    if n_bytes < 1000:
        return f"{n_bytes} B"
    if n_bytes < 1_000_000:
        return f"{n_bytes / 1000:.1f} KB"
    return f"{n_bytes / 1_000_000:.1f} MB"


def parse_preview(text: str, style: PreviewStyle) -> dict[str, str] | None:
    """The fields of a preview ``style`` produced (``head``, ``omitted``, ``path``...), or
    ``None`` if ``text`` is not such a preview."""
    return parse_template(text, style.template)


def parse_template(text: str, template: str) -> dict[str, str] | None:
    """The fields of ``template`` if the whole of ``text`` has its shape, else ``None``.
    A cheap check first: the template's longest fixed piece must be in the text."""
    marker = _template_marker(template)
    if marker and marker not in text:
        return None
    match = template_pattern(template, named=True, repeated=True, numbers=_NUMBERS).fullmatch(text)
    return None if match is None else read_names(match.groupdict())


def recover_preview(
    text: str, style: PreviewStyle, load: Callable[[str], str | None]
) -> str | None:
    """The full text ``text`` is a preview of, if it is one this product wrote: it has the
    style's shape, names a file the spill store ``load`` holds, and its head, tail and counts
    agree with that file. Text that only looks like a preview (an agent reading an old log
    that quotes one) is not recognised, so it is bounded like any other output."""
    fields = parse_preview(text, style)
    path = None if fields is None else fields.get("path")
    if fields is None or not path:
        return None
    content = load(path)
    if content is None:
        return None
    head, tail = fields.get("head", ""), fields.get("tail", "")
    if len(head) + len(tail) > len(content):
        return None
    if not content.startswith(head) or not content.endswith(tail):
        return None

    expected = {
        "omitted": len(content) - len(head) - len(tail),
        "total": len(content),
        "total_bytes": len(content.encode("utf-8", "surrogatepass")),
        "lines": content.count("\n") + (0 if content.endswith("\n") else 1),
    }
    if any(name in fields and int(fields[name]) != value for name, value in expected.items()):
        return None
    if "size" in fields and fields["size"] != human_size(expected["total_bytes"]):
        return None
    return content


#: Fields of a preview that are counts.
_NUMBERS = frozenset({"omitted", "total", "total_bytes", "lines", "chars"})


#: Texts longer than this always have a shorter preview (the bare marker is far shorter).
_SURELY_LONGER = 4096


def could_shorten(
    text: str, style: PreviewStyle, *, path: str | None, tool: str | None, session: str = ""
) -> bool:
    """Whether some preview of ``text`` naming ``path`` (unknown: ``None``, the shortest,
    an empty one) can be shorter than the text: if not, nothing is worth saving for it."""
    if len(text) > _SURELY_LONGER:
        return True
    bare = replace(style, head=0, tail=0, outline_chars=0)
    return make_preview(text, bare, path=path or "", tool=tool, session=session) is not None


def fit_preview(
    text: str,
    style: PreviewStyle,
    target: int,
    *,
    path: str,
    tool: str | None,
    grow: bool = False,
    cache: KeptReadings | None = None,
    session: str = "",
    file: FileRead | None = None,
) -> str | None:
    """The preview of ``text`` in ``style`` if it fits in ``target`` characters (with
    ``grow``, head and tail enlarged in proportion to fill ``target``); else one shrunk to
    fit; else the bare marker. ``None`` when no preview is shorter than the text."""
    preview = make_preview(
        text, style, path=path, tool=tool, cache=cache, session=session, file=file
    )
    if preview is not None and len(preview) <= target and not grow:
        return preview
    bare = make_preview(
        text,
        replace(style, head=0, tail=0, outline_chars=0),
        path=path,
        tool=tool,
        cache=cache,
        session=session,
        file=file,
    )
    if bare is None:
        return None
    room = target - len(bare)
    if room <= 0:
        return bare
    # The room is shared in the standard preview's proportions, the outline included (given
    # all of it, head and tail would crowd the outline out, and the result overflow).
    lines = style.outline_chars if "{outline}" in style.template else 0
    if style.unit == "bytes":
        room //= 4  # a character takes at most 4 bytes: stay within target characters
    total = style.head + style.tail + lines
    head = room * style.head // total if total else 0
    tail = room * style.tail // total if lines else room - head
    shares = replace(style, head=head, tail=tail, outline_chars=room - head - tail if lines else 0)
    scaled = make_preview(
        text, shares, path=path, tool=tool, cache=cache, session=session, file=file
    )
    for candidate in (scaled, preview):
        if candidate is not None and len(candidate) <= target:
            return candidate
    return bare


@lru_cache(maxsize=64)
def _template_marker(template: str) -> str:
    longest = max(template_literals(template), key=len, default="")
    return longest if len(longest.strip()) >= 8 else ""
