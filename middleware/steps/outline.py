"""The outline of what a preview leaves out: the lines of the omitted middle that carry the
most distinctive tokens (names, paths, identifiers) the head and tail do not show.

A head + tail preview hides what the model most often comes back for in a long output: the
definitions and names in the middle of a file, the matching lines of a long search. The
outline keeps, within a character budget, the lines that add the most such tokens per
character, each with its line number so the model can read around it in the spill file.
Lines are chosen greedily (most new tokens per character first, earliest line on ties,
while a line shows at least one new token per 100 characters) and shown in file order: a
pure function of the text, so the preview never changes.

A line is shown clipped, and only the tokens its clipped part shows count. Long lines (a
lock file's entries, minified JSON) carry what the model wants at their start (a name, a
version) and a long tail of dependencies or hashes after it, so the outline is built at
each of :data:`LINE_WIDTHS` and the one that shows the most tokens is kept: many short
lines, or fewer whole ones.
"""

from __future__ import annotations

import heapq

from middleware.steps.mentions import cut_between_tokens, distinctive_tokens, tokens_of

#: Characters of one outline line kept at most, tried in order (the first wins a tie).
LINE_WIDTHS = (160, 80)
#: New tokens a line must show per character of the outline: one per 100. Below that a line
#: costs its room on every later request and is rarely what the model goes back to.
MIN_TOKENS_PER_CHAR = 1 / 100
#: Characters of the omitted part looked at, from its start: a 50 MB log is outlined from
#: its first 200,000 characters, in bounded time and memory.
MAX_SCAN = 200_000
#: The first line of an outline.
HEADING = "\nLines from the omitted part:"


def outline(text: str, start: int, end: int, budget: int) -> str:
    """The outline of ``text[start:end]`` in at most ``budget`` characters, or ``""``.

    Only lines wholly inside the span (and within :data:`MAX_SCAN` of its start) are
    shown; a token already in the rest of the text (the head and tail the preview keeps)
    adds nothing.
    """
    if budget <= len(HEADING) or end <= start:
        return ""
    first = text.find("\n", start - 1) + 1 if start > 0 and text[start - 1] != "\n" else start
    shown = distinctive_tokens(text[:start]) | distinctive_tokens(text[end:])
    end = min(end, first + MAX_SCAN)
    number = text.count("\n", 0, first) + 1
    # Per width: (line number, rendered line, the new tokens its clipped part shows).
    lines: dict[int, list[tuple[int, str, frozenset[str]]]] = {w: [] for w in LINE_WIDTHS}
    position = first
    while position < end:
        stop = text.find("\n", position, end)
        if stop == -1:
            break  # the last line runs past the span: the tail shows its end
        line = text[position:stop].strip()
        entry: tuple[int, str, frozenset[str]] | None = None
        for width in LINE_WIDTHS if line else ():
            if entry is None or len(line) > width:  # a short line is the same at any width
                clipped = cut_between_tokens(line, width)
                tokens = frozenset(tokens_of(clipped)) - shown
                entry = (number, f"{number}: {clipped}", tokens)
            if entry[2]:
                lines[width].append(entry)
        position = stop + 1
        number += 1
    best: list[tuple[int, str]] = []
    most = 0
    for width in LINE_WIDTHS:
        chosen, covered = _choose(lines[width], budget - len(HEADING))
        if covered > most:
            best, most = chosen, covered
    if not best:
        return ""
    return HEADING + "".join(f"\n{rendered}" for _, rendered in sorted(best))


def _choose(
    lines: list[tuple[int, str, frozenset[str]]], budget: int
) -> tuple[list[tuple[int, str]], int]:
    """Lazy greedy cover: the line adding the most uncovered tokens per character next,
    down to :data:`MIN_TOKENS_PER_CHAR`. Returns the lines chosen and how many distinct
    tokens they show."""
    covered: set[str] = set()
    heap = [(-len(tokens) / (len(rendered) + 1), number, i)
            for i, (number, rendered, tokens) in enumerate(lines)]  # fmt: skip
    heapq.heapify(heap)
    chosen: list[tuple[int, str]] = []
    used = 0
    while heap:
        score, number, i = heapq.heappop(heap)
        _, rendered, tokens = lines[i]
        new = len(tokens - covered)
        if new == 0:
            continue
        current = -new / (len(rendered) + 1)
        if current > score:  # stale: its tokens were covered since; weigh it again
            heapq.heappush(heap, (current, number, i))
            continue
        cost = len(rendered) + 1
        if new / cost < MIN_TOKENS_PER_CHAR:
            break  # the densest line left: every other one shows less per character
        if used + cost > budget:
            continue
        chosen.append((number, rendered))
        covered |= tokens
        used += cost
    return chosen, len(covered)
