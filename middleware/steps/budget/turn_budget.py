"""A turn over its budget (``budget.turn_strategy: largest_first``): its largest results
are spilled first until the turn fits."""

from __future__ import annotations

import logging

from middleware.steps.budget.spilling import Candidate, Spilling
from middleware.steps.previews import fit_preview, make_preview

logger = logging.getLogger(__name__)


def fit_turn(spilling: Spilling, candidates: list[Candidate], budget: int) -> None:
    """Spill the turn's largest results first until the turn fits its budget.

    Each spilled result keeps as much as the turn can afford, and at least the
    standard preview; only if that is not enough are those previews shrunk, down to
    the bare marker, so the turn fits whenever that is possible at all.
    """
    total = sum(len(c.result.text) for c in candidates)
    if total <= budget:
        return
    settings, context = spilling.settings, spilling.context
    style, session, kept = settings.preview, context.session_id, context.internal.kept
    plan: list[tuple[Candidate, str, str]] = []  # candidate, path, preview
    for cand in sorted(
        (c for c in candidates if not c.frozen),
        key=lambda c: (-len(c.result.text), c.site.node, c.site.block),
    ):
        if total <= budget:
            break
        text, tool = cand.result.text, cand.site.tool_name
        if not spilling.could_shorten(cand):
            continue  # no preview is shorter: nothing to save
        path = spilling.save(cand)
        if isinstance(path, OSError):
            target = len(text) - (total - budget)
            total -= len(text) - len(spilling.spill_failed(cand, target, "turn_budget", str(path)))
            continue
        file = spilling.files.read_of(cand.site)
        standard = make_preview(
            text, style, path=path, tool=tool, cache=kept, session=session, file=file
        )
        floor = len(standard) if standard is not None else 0
        target = max(len(text) - (total - budget), floor)
        grow = settings.turn_previews == "fill"
        preview = fit_preview(
            text,
            style,
            target,
            path=path,
            tool=tool,
            grow=grow,
            cache=kept,
            session=session,
            file=file,
        )
        if preview is not None:
            plan.append((cand, path, preview))
            total -= len(text) - len(preview)
    for i, (cand, path, preview) in sorted(enumerate(plan), key=lambda p: -len(p[1][2])):
        if total <= budget:
            break
        smaller = fit_preview(
            cand.result.text,
            style,
            max(len(preview) - (total - budget), 0),
            path=path,
            tool=cand.site.tool_name,
            cache=kept,
            session=session,
            file=spilling.files.read_of(cand.site),
        )
        if smaller is not None and len(smaller) < len(preview):
            total -= len(preview) - len(smaller)
            plan[i] = (cand, path, smaller)
    for cand, path, preview in plan:
        spilling.apply(cand, path, preview, "turn_budget")
    if total > budget:
        logger.info("turn still over budget after spilling all it could: %d > %d", total, budget)
