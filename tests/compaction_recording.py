"""What Codex CLI sends when it compacts its own context: the real CLI (tests/agents.py, set
up as docs/proxy.md says) pointed straight at the provider stand-in with a low
auto-compaction limit, driven through :data:`agent_script.FILL` (an output that takes the session
past the limit in the middle of a turn, the remote compaction v2 request, the rest of the
turn) and resumed once (:data:`agent_script.GO_ON`). Every request the stand-in receives is kept
(method, path, headers, body) with the output items it answered, and trimmed for
tests/recorded/codex-<version>-compaction.json (both by tests/recording.py): long prompts
and the tools' schemas cut short, while the model's items, the tool outputs, the
``compaction_trigger`` and the ``compaction`` items stay exactly as the CLI sent them.

Recorded again by ``CHATCLI_RECORD=1 python -m pytest tests/proxy/test_compaction.py -k
record`` (the other tests of that file replay the file that is there).
"""

from __future__ import annotations

import datetime
import json
import tempfile
from pathlib import Path
from typing import Any

from agent_script import FILL, FILL_COMMAND, GO_ON, scripted
from agents import AGENT_BY_NAME
from locations import RECORDED
from prompt_cache import PromptCache
from recording import Recorder, run_cli, trim
from servers import serving
from stand_in import Provider, triggered

AGENT = AGENT_BY_NAME["codex"]
PATH = RECORDED / f"codex-{AGENT.version}-compaction.json"
#: Codex's ``model_auto_compact_token_limit`` for the run (tokens as the stand-in counts
#: them: its requests are ~9,000 without the filling output, ~13,000 with it).
LIMIT = 11_000


def record(today: str | None = None) -> dict[str, Any]:
    """Run Codex CLI through a compaction and a resume against the stand-in, and write the
    recording; returns it."""
    with tempfile.TemporaryDirectory(prefix="chatcli-rec-") as folder:
        root = Path(folder)
        home, project = root / "home", root / "project"
        home.mkdir()
        project.mkdir()
        provider = Provider(script=scripted(AGENT.tools, AGENT.fmt), cache=PromptCache())
        recorder = Recorder(provider.app(), answers=True)
        with serving(recorder) as url:
            env = AGENT.configure(home, project, url)
            config = home / ".codex" / "config.toml"
            config.write_text(
                f"model_auto_compact_token_limit = {LIMIT}\n" + config.read_text("utf-8"), "utf-8"
            )
            for prompt, resume in ((FILL, False), (GO_ON, True)):
                run_cli(AGENT.argv(prompt, resume), project, env)
        assert not provider.refused, [reason for _, reason, _ in provider.refused]
    requests = recorder.requests
    assert sum(1 for r in requests if triggered(r["body"])) == 1, "Codex did not compact once"
    recording = {
        "agent": "Codex CLI",
        "version": AGENT.version,
        "recorded": today or datetime.date.today().isoformat(),
        "how": (
            f"codex exec {FILL!r} then codex exec resume --last {GO_ON!r}, as "
            "tests/agents.py runs them (set up as docs/proxy.md says: a config.toml "
            "provider named OpenAI, wire_api responses), pointed straight at the provider "
            f"stand-in, with model_auto_compact_token_limit = {LIMIT} added to the "
            "config. The stand-in's model called exec_command with "
            f"{FILL_COMMAND!r} (4,000 characters the stand-in counts as a token each, "
            "taking the request past the limit), then 'echo before compaction'; Codex "
            "compacted in the middle of its turn (remote compaction v2: its history "
            "with a compaction_trigger item last, answered by the stand-in with one "
            "compaction item, streamed), went on with the retained user messages and "
            "that item (the model called 'echo after compaction', then answered), and "
            "the resumed session sent the item again. Every request the stand-in "
            "received, in order, with the output items it answered ('answer'); long "
            "prompts and the tools' schemas cut short, the model's items, the tool "
            "outputs and the compaction items as they were sent. Recorded by "
            "tests/compaction_recording.py."
        ),
        "requests": [trim(AGENT.fmt, request) for request in requests],
    }
    PATH.write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return recording
