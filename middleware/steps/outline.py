"""The outline of what a preview leaves out: the lines of the omitted middle that carry the
most distinctive tokens (names, paths, identifiers) the head and tail do not show.

A head + tail preview hides what the model most often comes back for in a long output: the
definitions and names in the middle of a file, the matching lines of a long search. The
outline keeps, within a character budget, the lines that add the most such tokens per
character, each with its line number so the model can read around it in the spill file.
Lines are chosen greedily (most new tokens per character first, earliest line on ties) and
shown in file order: a pure function of the text, so the preview never changes.
"""

from __future__ import annotations

import heapq

from middleware.steps.mentions import distinctive_tokens, tokens_of

#: Characters of one outline line kept at most.
LINE_CHARS = 160
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
    lines: list[tuple[int, str, frozenset[str]]] = []
    position = first
    while position < end:
        stop = text.find("\n", position, end)
        if stop == -1:
            break  # the last line runs past the span: the tail shows its end
        line = text[position:stop].strip()
        if line:
            tokens = frozenset(tokens_of(line)) - shown
            if tokens:
                lines.append((number, f"{number}: {line[:LINE_CHARS]}", tokens))
        position = stop + 1
        number += 1
    chosen = _choose(lines, budget - len(HEADING))
    if not chosen:
        return ""
    return HEADING + "".join(f"\n{rendered}" for _, rendered in sorted(chosen))


def _choose(lines: list[tuple[int, str, frozenset[str]]], budget: int) -> list[tuple[int, str]]:
    """Lazy greedy cover: the line adding the most uncovered tokens per character next."""
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
        if used + cost > budget:
            continue
        chosen.append((number, rendered))
        covered |= tokens
        used += cost
    return chosen
