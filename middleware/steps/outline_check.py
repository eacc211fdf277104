"""Whether an outline read back (from the derived-text cache, a file another process
wrote) is one :func:`~middleware.steps.outline.outline` could have made of a text: a
preview shows it only then, so it never shows what the text does not hold."""

from __future__ import annotations

from middleware.steps.mentions import cut_between_tokens
from middleware.steps.outline import HEADING, LINE_WIDTHS, NOTICE, REPORT_WIDTH, SHOWN, as_shown


def could_be_outline(found: str, text: str, start: int, end: int, budget: int) -> bool:
    """Whether ``found`` could be the :func:`outline` of these arguments: ``""``, or its
    heading, then lines of ``text`` wholly inside ``text[start:end]`` in file order, each
    as the outline shows it (its number, the line squeezed and cut at one of
    :data:`LINE_WIDTHS`), then its notices; within ``budget``. One pass over the text up
    to the last line shown, far less than working the outline out: an outline read back
    from a file is used only if it passes, so it never shows what the text does not hold."""
    if not found:
        return True
    if len(found) > budget or not found.startswith(HEADING + "\n"):
        return False
    entries = found[len(HEADING) + 1 :].split("\n")
    notices = 0
    while notices < len(entries) and NOTICE.fullmatch(entries[-1 - notices]):
        notices += 1
    shown = [SHOWN.fullmatch(entry) for entry in entries[: len(entries) - notices]]
    numbers = [int(match[1]) for match in shown if match is not None]
    if len(numbers) < len(shown) or numbers != sorted(set(numbers)):
        return False
    if not numbers:
        return notices > 0
    lines = text.split("\n", numbers[-1])  # lines[n - 1] is line n; a line shown ends in one
    if len(lines) <= numbers[-1]:
        return False
    position, at = 0, 1  # where line ``at`` starts
    for number, match in zip(numbers, shown, strict=True):
        assert match is not None
        position += sum(map(len, lines[at - 1 : number - 1])) + number - at
        at = number
        line = lines[number - 1]
        if position < start or position + len(line) > end:
            return False
        squeezed = as_shown(line)
        widths = (*LINE_WIDTHS, REPORT_WIDTH)
        if match[2] not in {cut_between_tokens(squeezed, width) for width in widths}:
            return False
    return True
