"""What an agent wraps a command's output in before the output itself: its exit code, its
timing, a notice that the output was cut. What a result holds is told from what the
command printed (a file's lines, a log, JSON), not from the agent's header.

* mini-swe-agent: ``<returncode>0</returncode>``, a ``<warning>`` when the output was too
  long, then ``<output>`` (its :class:`~middleware.formats.text_protocol.TextAgent`
  declares it);
* Codex CLI's ``exec_command`` (and ``shell``): ``Chunk ID: ...``, ``Wall time: ...
  seconds``, ``Process exited with code N`` (or the session it still runs in),
  ``Original token count: N``, then ``Output:``.
"""

from __future__ import annotations

import re

from middleware.formats.text_protocol import TEXT_AGENTS, WINDOW

CODEX_EXEC = re.compile(
    r"\A(?:Chunk ID: \w+\n)?Wall time: [\d.]+ seconds\n"
    r"(?:Process exited with code -?\d+\n|Process running with session ID \d+\n)?"
    r"(?:Original token count: \d+\n)?Output:\n"
)
#: Every envelope known, each matched at the start of a result's text.
ENVELOPES: tuple[re.Pattern[str], ...] = (
    *(agent.envelope for agent in TEXT_AGENTS if agent.envelope is not None),
    CODEX_EXEC,
)


def command_output(text: str) -> str:
    """``text`` without the envelope a known agent wraps a command's output in."""
    head = text[:WINDOW]
    for envelope in ENVELOPES:
        found = envelope.match(head)
        if found:
            return text[found.end() :]
    return text
