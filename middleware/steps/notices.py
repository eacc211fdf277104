"""The loop guard's notices at the end of a result, as the steps see past them.

The loop guard (a plugin, ``loop_alerts``) may append its notice to the latest tool result
(``loop_guard.action: annotate``); the budget and microcompaction steps still recognise a
preview or a summary of theirs that carries one. What a notice looks like is the policy's
(``loop_guard.notice``), so neither step imports the guard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from middleware.policy.settings import bind, section
from middleware.policy.templates import template_pattern

if TYPE_CHECKING:
    from middleware.policy import Policy


@section("loop_guard")
@dataclass(frozen=True)
class NoticeSettings:
    """The one key of the ``loop_guard`` section a step reads."""

    notice: str


def without_notices(text: str, policy: Policy) -> str:
    """``text`` without the loop-guard notices appended to its end, so the steps recognise
    a preview or summary the guard annotated as their own."""
    pattern = template_pattern(bind(policy, NoticeSettings).notice, field=".+?")
    while True:
        body, separator, last = text.rpartition("\n\n")
        if not separator or not pattern.fullmatch(last):
            return text
        text = body
