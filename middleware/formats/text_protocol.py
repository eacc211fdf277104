"""The text protocol: plain user messages read as tool output, for agents without
structured tool calls (mini-swe-agent, SWE-agent's text mode).

The policy sets it on (``enabled: true``, with its own pattern), off, or leaves it to
``auto``: the history alone then says whether it comes from a text agent this module knows,
and which rule applies (:class:`AutoTextProtocol`, docs/text-protocol.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from middleware.policy import Policy
from middleware.policy.settings import bind, section
from middleware.view import Node

#: The ``text_protocol.enabled`` value that recognises text agents from the history.
AUTO = "auto"


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


@dataclass(frozen=True)
class TextAgent:
    """A text-protocol agent auto mode recognises: what its observations look like, and
    the rule that marks them once it is recognised (the one an operator would set)."""

    name: str
    #: The observation shape, in words (reports and docs).
    shape: str
    #: Searched in the observation's first or last :data:`WINDOW` characters (``where``).
    observation: re.Pattern[str]
    where: Literal["head", "tail"]
    rule: TextProtocolRule
    #: What the agent writes before the command's own output (its status, its notices),
    #: matched at the start of an observation (:mod:`.envelopes`); ``None``: the output
    #: starts the message.
    envelope: re.Pattern[str] | None = None

    def observes(self, text: str) -> bool:
        """Whether ``text`` has this agent's observation shape (only one end of it is read,
        so a huge output costs no more than a small one)."""
        part = text[:WINDOW] if self.where == "head" else text[-WINDOW:]
        return self.observation.search(part) is not None


#: Characters of an observation's head or tail that recognition reads.
WINDOW = 4096

#: mini-swe-agent: ``<returncode>0</returncode>`` opens every command's observation.
MINI_SWE_AGENT = TextAgent(
    name="mini-swe-agent",
    shape="<returncode> observations",
    observation=re.compile(r"\A\s{0,64}<returncode>-?\d+</returncode>"),
    where="head",
    rule=TextProtocolRule(re.compile(r"^\s*<returncode>"), True, "bash"),
    # Then a <warning> when the output was too long, and <output> or <output_head>.
    envelope=re.compile(
        r"\A\s{0,64}<returncode>-?\d+</returncode>[ \t]*\n?(?:<warning>.*?</warning>\s*)?"
        r"(?:<output(?:_head)?>[ \t]*\n?)?",
        re.DOTALL,
    ),
)
#: SWE-agent (text mode): every observation ends with its state footer, ``(Current
#: directory: ...)``, optional further ``(...)`` lines (open file, interactive session),
#: and the ``bash-$`` prompt. Every user message after the model's action is its output.
SWE_AGENT = TextAgent(
    name="SWE-agent",
    shape="observations ending in '(Current directory: ...)' and 'bash-$'",
    observation=re.compile(
        r"(?:\A|\n)\(Current directory: [^\n]*\)[ \t]*\n(?:\([^\n]*\)[ \t]*\n)*bash-\$\s*\Z"
    ),
    where="tail",
    rule=TextProtocolRule(None, True, "swe_agent_action"),
)
TEXT_AGENTS = (MINI_SWE_AGENT, SWE_AGENT)


@dataclass(frozen=True)
class AutoTextProtocol:
    """``text_protocol.enabled: auto``: recognise a known text agent from the history.

    The history is a text agent's when it holds no structured tool call or result at all
    and ``evidence`` exchanges (one: the observation shapes are specific enough) show the
    agent's shape: an assistant message carrying a
    command block (a fenced ``` block, or ``<command>...</command>``) answered by a user
    message with the agent's observation shape. The first agent to reach ``evidence``
    such exchanges, reading from the start, is the one recognised.

    Why this is stable: an agent's history only grows, so once recognised a session stays
    recognised with the same rule. In a processed history, assistant messages are as they
    were and the observations of the last turns are never compacted, so the output is
    recognised again; and where it is not, nothing is a tool result, so processing it
    again changes nothing either.
    """

    agents: tuple[TextAgent, ...] = TEXT_AGENTS
    evidence: int = 1

    def recognise(self, nodes: Sequence[Node], text: Callable[[int], str]) -> TextAgent | None:
        """The agent whose history ``nodes`` is, if any; ``text(i)`` reads node ``i``'s
        text (only user observations and the assistant messages before them are read)."""
        if any(node.calls or node.results for node in nodes):
            return None
        counts = dict.fromkeys(self.agents, 0)
        for i in range(1, len(nodes)):
            if nodes[i].role != "user" or nodes[i - 1].role != "assistant":
                continue
            observation = text(i)
            agent = next((a for a in self.agents if a.observes(observation)), None)
            if agent is None or not has_command_block(text(i - 1)):
                continue
            counts[agent] += 1
            if counts[agent] >= self.evidence:
                return agent
        return None


def has_command_block(text: str) -> bool:
    """Whether an assistant message carries a command the way text agents write one: a
    fenced block (an opening ``` line, a closing ```) or ``<command>...</command>``."""
    fence = text.find("```")
    if fence >= 0:
        line_end = text.find("\n", fence)
        if line_end >= 0 and text.find("```", line_end) >= 0:
            return True
    command = text.find("<command>")
    return command >= 0 and text.find("</command>", command) >= 0


#: A fenced block of an answer: its info string and its code.
_FENCED = re.compile(r"^[ \t]*```([^\n`]*)\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
#: Info strings that say a block is a shell command.
SHELL_BLOCKS = frozenset({"bash", "sh", "shell", "console", "zsh"})


def command_block(text: str) -> str | None:
    """The command a text agent's answer ``text`` runs: its one fenced block marked as a
    shell's (```` ```bash ````), else its one fenced block; ``None`` when which one runs is
    not certain (none, or several). mini-swe-agent and SWE-agent run exactly one."""
    blocks = _FENCED.findall(text)
    shell = [code for info, code in blocks if info.strip().lower() in SHELL_BLOCKS]
    if len(shell) == 1:
        return str(shell[0])
    return str(blocks[0][1]) if len(blocks) == 1 and not shell else None


#: What a codec is given to read user messages as tool output: a fixed rule, auto mode, or
#: ``None`` (never).
TextProtocol = TextProtocolRule | AutoTextProtocol


@section("text_protocol")
@dataclass(frozen=True)
class TextProtocolSettings:
    enabled: bool | str
    pattern: str | None
    follows_assistant: bool
    tool_name: str


def text_protocol_rule(policy: Policy) -> TextProtocol | None:
    """The policy's way of marking user messages as tool output: its own rule when enabled
    (the loader has already checked the pattern compiles), recognition when ``auto``."""
    settings = bind(policy, TextProtocolSettings)
    if settings.enabled == AUTO:
        return AutoTextProtocol()
    if settings.enabled is not True:
        return None
    return TextProtocolRule(
        pattern=re.compile(settings.pattern) if settings.pattern is not None else None,
        follows_assistant=settings.follows_assistant,
        tool_name=settings.tool_name,
    )
