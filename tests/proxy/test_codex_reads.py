"""The real Codex CLI reads a source file with ``sed -n`` through ``chatcli-mw serve``,
against the stand-in, over several turns (issue 46, item 6).

What Codex 0.171 sends for such a read, recorded through the proxy: the ``function_call``
carries the arguments the model gave as it gave them (gpt-5.5's: ``cmd``, ``workdir``,
``yield_time_ms``, ``max_output_tokens``), and its ``function_call_output`` is a text
envelope, ``Chunk ID: …\\nWall time: … seconds\\nProcess exited with code 0\\nOriginal
token count: N\\nOutput:\\n`` and the lines the command printed.

The read is a file read for microcompaction: it reaches the model whole while a plain
command's output of about its size, as old, is compacted; once compacted it says the
command that reads it again (in its workdir), not the error lines of the code, and the
scripted model, following those words, runs it: the proxy counts that read-back, and the
session goes on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from agent_events import Event, events
from agent_script import (
    AFTER_READ_BACK,
    PLAIN_COMMAND,
    READ_SOURCE,
    SOURCE_FILE,
    SOURCE_READ,
    WENT_ON,
    plain_output,
    read_it_again,
    source_file,
)
from agent_setup import Setup, readbacks_counted, set_up
from agents import AGENT_BY_NAME, codex_read
from stand_in import Call
from waiting import wait_for

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow

#: Turns a read is kept whole at most: 3 instead of the default 20 for a part of a file
#: (``sed -n`` prints one), so that the read is compacted three turns after its own rather
#: than twenty (each turn sends the whole history again). The plain output is compacted at
#: age 2 (``microcompact.truncate_turns`` and ``summarize_turns``, the defaults), inside
#: those three turns: the difference shows all the same. The read, under 4,000
#: characters, is far inside the window of reads (``reads.protect_part_tokens``, 40,000
#: tokens), which therefore does not release it first.
PROTECT_TURNS = 3
#: The test's policy: the default, with :data:`PROTECT_TURNS`, and the rewrite cost of the
#: session's provider: Codex's model here, gpt-5.5 on OpenAI, bills no cache writes (the
#: value docs/microcompact.md gives for OpenAI before GPT-5.6), so compacting pays at
#: once. The default (11.5, Anthropic's 5-minute cache) holds compaction back in a session
#: this young: its few turns are not expected to pay back a rewrite of what follows the
#: plain output.
POLICY = {
    "microcompact.reads.protect_turns": PROTECT_TURNS,
    "microcompact.reads.protect_part_turns": PROTECT_TURNS,  # sed -n reads a part
    "microcompact.schedule.rewrite_cost": 0,
}
#: How Codex CLI wraps a command's output for the model.
ENVELOPE = re.compile(
    r"Chunk ID: \w+\nWall time: [\d.]+ seconds\nProcess exited with code 0\n"
    r"Original token count: \d+\nOutput:\n"
)


@pytest.fixture
def codex(tmp_path: Path) -> Iterator[Setup]:
    with set_up(AGENT_BY_NAME["codex"], tmp_path, POLICY) as ready:
        yield ready


def test_a_sed_read_is_kept_whole_then_its_summary_says_the_command_to_read_it_again(
    codex: Setup,
) -> None:
    source = codex.project / SOURCE_FILE
    source.parent.mkdir()
    source.write_text(source_file(), "utf-8")
    workdir = str(codex.project)
    done = codex.run(f"{READ_SOURCE} Workdir {workdir}")
    sent = [events("responses", body) for body in codex.bodies()]
    calls = [e for e in sent[-1] if e.kind == "call"]
    # Codex sent the model's calls as they were made: the plain command, then the read.
    assert calls[0].arguments == {"cmd": PLAIN_COMMAND}
    assert calls[1].arguments == codex_read(SOURCE_READ, workdir)
    # Their outputs as Codex wrapped them, the first time a request carries them.
    plain, read = _result(sent[1], 0), _result(sent[2], 1)
    lines = "".join(source_file().splitlines(keepends=True)[:200])
    assert ENVELOPE.fullmatch(read[: -len(lines)]) and read.endswith(lines), read[:300]
    assert ENVELOPE.fullmatch(plain[: -len(plain_output())]), plain[:300]
    assert len(plain) < len(read) < 5000  # the budget step's cap (5,000) cuts neither

    # The request where the read first reaches the model compacted; before it, every
    # request carries it whole, while the plain output, compacted at an age the read
    # reached whole, does not come whole any more.
    first = next((i for i, seen in enumerate(sent) if _result(seen, 1, read) != read), None)
    assert first is not None, "the read was never compacted"
    summary = _result(sent[first], 1)
    plain_age = next(_age(seen, 0) for seen in sent if _result(seen, 0, plain) != plain)
    whole = [_age(seen, 1) for seen in sent[2:first]]
    assert max(whole, default=-1) >= plain_age, (plain_age, whole, summary)
    assert _age(sent[first], 1) == PROTECT_TURNS, summary  # whole for protect_turns turns
    # Its summary says the command that reads it again, in the workdir, and not the
    # error lines of the code it held (``raise ValueError(r)``).
    told = Call("exec_command", {"cmd": SOURCE_READ, "workdir": workdir})
    assert read_it_again(summary) == told, summary
    assert "Error line:" not in summary and "ValueError" not in summary, summary

    # The model ran that command (the call after the read was compacted), got the lines
    # again, and went on.
    assert WENT_ON in done.stdout, done.explain()
    again = [e for e in sent[-1] if e.kind == "call"][_age(sent[first], 1) + 2 :]
    assert [call.arguments for call in again] == [told.arguments, {"cmd": AFTER_READ_BACK}]
    assert _result(sent[-1], len(calls) - 2).endswith(lines)
    # The proxy saw the read-back: one read of the file again after microcompaction hid
    # it, by Codex's shell tool, in /metrics and in the session's ledger.
    assert readbacks_counted(codex) == {("reread", "microcompact", "exec_command"): 1}
    (session,) = {line["session"] for line in codex.cleaned() if line.get("chars_before")}
    assert wait_for(
        lambda: (
            httpx.get(f"{codex.url}/sessions/{quote(session, safe='')}")
            .json()
            .get("readbacks", {})
            .get("count")
            == 1
        )
    )


def _result(seen: list[Event], n: int, default: str | None = None) -> str:
    """The text of the ``n``-th result of a request (``default`` if it has fewer)."""
    found = [e.text for e in seen if e.kind == "result"]
    if default is not None and len(found) <= n:
        return default
    return found[n]


def _age(seen: list[Event], n: int) -> int:
    """The age of the ``n``-th call of a request: the model's turns after its own (one
    call a turn)."""
    return sum(1 for e in seen if e.kind == "call") - 1 - n
