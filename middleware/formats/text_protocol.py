"""The text protocol: plain user messages read as tool output, for agents without
structured tool calls (mini-swe-agent, SWE-agent's text mode)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from middleware.policy import Policy
from middleware.policy.settings import bind, section


@dataclass(frozen=True)
class TextProtocolRule:
    """Marks plain user messages as tool output, for agents without structured tool calls
    (mini-swe-agent, SWE-agent's text mode): a user message is tool output when it directly
    follows an assistant message (if ``follows_assistant``) and its text matches
    ``pattern`` (if one is set). At least one of the two conditions must be set."""

    pattern: re.Pattern[str] | None = None
    follows_assistant: bool = True
    tool_name: str = "text_protocol"

    def matches(self, text: str, previous_role: str | None) -> bool:
        if self.follows_assistant and previous_role != "assistant":
            return False
        return self.pattern is None or self.pattern.search(text) is not None


@section("text_protocol")
@dataclass(frozen=True)
class TextProtocolSettings:
    enabled: bool
    pattern: str | None
    follows_assistant: bool
    tool_name: str


def text_protocol_rule(policy: Policy) -> TextProtocolRule | None:
    """The policy's rule for marking user messages as tool output, if it is enabled (the
    loader has already checked the pattern compiles)."""
    settings = bind(policy, TextProtocolSettings)
    if not settings.enabled:
        return None
    return TextProtocolRule(
        pattern=re.compile(settings.pattern) if settings.pattern is not None else None,
        follows_assistant=settings.follows_assistant,
        tool_name=settings.tool_name,
    )
