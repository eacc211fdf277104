"""What Codex CLI sends when it compacts its own context: the real CLI (tests/agents.py, set
up as docs/proxy.md says) pointed straight at the provider stand-in with a low
auto-compaction limit, driven through :data:`agents.FILL` (an output that takes the session
past the limit in the middle of a turn, the remote compaction v2 request, the rest of the
turn) and resumed once (:data:`agents.GO_ON`). Every request the stand-in receives is kept
(method, path, headers, body) with the output items it answered, and trimmed for
tests/recorded/codex-<version>-compaction.json: long prompts and the tools' schemas cut
short, while the model's items, the tool outputs, the ``compaction_trigger`` and the
``compaction`` items stay exactly as the CLI sent them.

Recorded again by ``CHATCLI_RECORD=1 python -m pytest tests/proxy/test_compaction.py -k
record`` (the other tests of that file replay the file that is there).
"""

from __future__ import annotations

import datetime
import json
import tempfile
from pathlib import Path
from typing import Any

from agents import AGENT_BY_NAME, FILL, FILL_COMMAND, GO_ON, Run, scripted
from locations import RECORDED
from prompt_cache import PromptCache
from servers import serving
from stand_in import Provider, triggered

AGENT = AGENT_BY_NAME["codex"]
PATH = RECORDED / f"codex-{AGENT.version}-compaction.json"
#: Codex's ``model_auto_compact_token_limit`` for the run (tokens as the stand-in counts
#: them: its requests are ~9,000 without the filling output, ~13,000 with it).
LIMIT = 11_000
#: Strings longer than this outside what is kept whole are cut short.
KEEP_CHARS = 200


class Recorder:
    """An ASGI wrapper that keeps every HTTP request as it came (method, path, headers but
    ``host`` and ``content-length``, body) and the output items of its answer (the
    ``response.completed`` event of a stream, or the JSON answer's ``output``)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
                   if k not in (b"host", b"content-length")}  # fmt: skip
        entry: dict[str, Any] = {"method": scope["method"], "path": scope["path"],
                                 "headers": headers}  # fmt: skip
        asked: list[bytes] = []
        answered: list[bytes] = []

        async def receiving() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                asked.append(message.get("body", b""))
                if not message.get("more_body"):
                    entry["body"] = json.loads(b"".join(asked))
                    self.requests.append(entry)
            return message

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.body":
                answered.append(message.get("body", b""))
                if not message.get("more_body"):
                    entry["answer"] = {"output": answer_output(b"".join(answered))}
            await send(message)

        await self.app(scope, receiving, sending)


def answer_output(raw: bytes) -> list[Any] | None:
    """The output items of a Responses answer: a stream's ``response.completed``, or a
    JSON answer's ``output`` (``None``: an answer without one, an error)."""
    text = raw.decode("utf-8")
    if text.startswith("{"):
        output = json.loads(text).get("output")
        return output if isinstance(output, list) else None
    for line in text.splitlines():
        if line.startswith("data: ") and '"response.completed"' in line:
            event = json.loads(line[len("data: ") :])
            if event.get("type") == "response.completed":
                output: list[Any] = event["response"]["output"]
                return output
    return None


def record(today: str | None = None) -> dict[str, Any]:
    """Run Codex CLI through a compaction and a resume against the stand-in, and write the
    recording; returns it."""
    with tempfile.TemporaryDirectory(prefix="chatcli-rec-") as folder:
        root = Path(folder)
        home, project = root / "home", root / "project"
        home.mkdir()
        project.mkdir()
        provider = Provider(script=scripted(AGENT.tools, AGENT.fmt), cache=PromptCache())
        recorder = Recorder(provider.app())
        with serving(recorder) as url:
            env = AGENT.configure(home, project, url)
            config = home / ".codex" / "config.toml"
            config.write_text(f"model_auto_compact_token_limit = {LIMIT}\n"
                              + config.read_text("utf-8"), "utf-8")  # fmt: skip
            for prompt, resume in ((FILL, False), (GO_ON, True)):
                run = Run(AGENT.argv(prompt, resume), project, env).start()
                try:
                    run.wait(300)
                finally:
                    if run.returncode is None:
                        run.kill()
                assert run.returncode == 0, run.explain()
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
        "requests": [trim(request) for request in requests],
    }
    PATH.write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return recording


# -- trimming ------------------------------------------------------------------------------


def cut(text: str) -> str:
    if len(text) <= KEEP_CHARS:
        return text
    return f"{text[:KEEP_CHARS]}…[{len(text) - KEEP_CHARS} more characters, trimmed for the test]"


def shortened(value: Any) -> Any:
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, list):
        return [shortened(v) for v in value]
    if isinstance(value, dict):
        return {k: shortened(v) for k, v in value.items()}
    return value


def kept(item: Any) -> bool:
    """Whether an input item is kept whole: anything but a developer or user message."""
    return isinstance(item, dict) and (
        item.get("type", "message") != "message" or item.get("role") == "assistant"
    )


def tool(declaration: dict[str, Any]) -> dict[str, Any]:
    """A tool as the other Codex recording keeps it: its type and name."""
    short = {k: declaration[k] for k in ("type", "name") if k in declaration}
    if "parameters" in declaration:
        short["parameters"] = {"type": "object"}
    return short


def trim(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` as the recording keeps it (see the module's docstring)."""
    body = request["body"]
    out: dict[str, Any] = {}
    for name, value in body.items():
        if name == "input" and isinstance(value, list):
            out[name] = [item if kept(item) else shortened(item) for item in value]
        elif name == "tools" and isinstance(value, list):
            out[name] = [tool(t) if isinstance(t, dict) else t for t in value]
        else:
            out[name] = shortened(value)
    return {**request, "body": out}
