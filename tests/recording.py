"""Recording what a real agent CLI sends to the provider stand-in, for the files under
tests/recorded/ (tests/read_recording.py, tests/compaction_recording.py).

:func:`run_cli` runs the CLI to its end; :class:`Recorder` keeps every HTTP request as it
came, and if asked the output items the stand-in answered; :func:`trim` cuts a kept request
as the recordings keep one: strings over :data:`KEEP_CHARS` characters cut short with a
marker (:func:`cut`), the tools' declarations cut to their names but those of the tools a
recording is about, while the history items that are the model's turns or carry tool calls
or results stay exactly as sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_runs import Run

#: Strings longer than this outside what is kept whole are cut short.
KEEP_CHARS = 200

#: The key of a request body's history, by format.
HISTORY = {
    "anthropic": "messages",
    "openai": "messages",
    "responses": "input",
    "gemini": "contents",
}


def run_cli(argv: list[str], cwd: Path, env: dict[str, str], seconds: float = 300) -> Run:
    """The agent CLI's ``argv`` run in ``cwd`` to its end (killed with what it started if
    it is still going after ``seconds``), which must be a success."""
    run = Run(argv, cwd, env).start()
    try:
        run.wait(seconds)
    finally:
        if run.returncode is None:
            run.kill()
    assert run.returncode == 0, run.explain()
    return run


class Recorder:
    """An ASGI wrapper that keeps every HTTP request as it came: method, path with its
    query, headers (but ``host`` and ``content-length``) and body (its JSON, else its text,
    ``None`` if empty); with ``answers``, the output items of its answer too, under
    ``answer`` (:func:`answer_output`)."""

    def __init__(self, app: Any, *, answers: bool = False) -> None:
        self.app = app
        self.answers = answers
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = scope.get("query_string", b"").decode("latin-1")
        headers = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope["headers"]
            if k not in (b"host", b"content-length")
        }
        entry: dict[str, Any] = {
            "method": scope["method"],
            "path": scope["path"] + (f"?{query}" if query else ""),
            "headers": headers,
        }

        def asked(raw: bytes) -> None:
            try:
                entry["body"] = json.loads(raw) if raw else None
            except ValueError:
                entry["body"] = raw.decode("utf-8", "replace")
            self.requests.append(entry)

        def answered(raw: bytes) -> None:
            entry["answer"] = {"output": answer_output(raw)}

        request, answer = _whole("http.request", asked), _whole("http.response.body", answered)

        async def receiving() -> Any:
            message = await receive()
            request(message)
            return message

        async def sending(message: Any) -> None:
            answer(message)
            await send(message)

        await self.app(scope, receiving, sending if self.answers else send)


def _whole(kind: str, then: Callable[[bytes], None]) -> Callable[[Any], None]:
    """A watcher of the ASGI messages of one exchange that calls ``then`` with the whole
    body once the last of its ``kind`` messages (``http.request``, ``http.response.body``)
    has come."""
    chunks: list[bytes] = []

    def watch(message: Any) -> None:
        if message["type"] == kind:
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                then(b"".join(chunks))

    return watch


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


# -- trimming ----------------------------------------------------------------------------------


def cut(text: str) -> str:
    """``text`` cut to :data:`KEEP_CHARS` characters, with a marker saying how many more
    there were."""
    if len(text) <= KEEP_CHARS:
        return text
    return f"{text[:KEEP_CHARS]}…[{len(text) - KEEP_CHARS} more characters, trimmed for the test]"


def strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (JSON) with ``change`` made to each of its strings (not the keys)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [strings(v, change) for v in value]
    if isinstance(value, dict):
        return {k: strings(v, change) for k, v in value.items()}
    return value


def model_item(fmt: str, item: Any) -> bool:
    """Whether a history item is the model's turn or carries tool calls or results (for
    Responses, anything but a developer or user message)."""
    if not isinstance(item, dict):
        return False
    if fmt == "gemini":
        parts = item.get("parts") or []
        return item.get("role") == "model" or any(
            isinstance(p, dict) and ("functionResponse" in p or "functionCall" in p) for p in parts
        )
    if fmt == "responses":
        return item.get("type", "message") != "message" or item.get("role") == "assistant"
    if item.get("role") in ("assistant", "tool"):
        return True
    content = item.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_result", "tool_use") for b in content
    )


def tool_name(tool: dict[str, Any]) -> str:
    return str(tool.get("name") or (tool.get("function") or {}).get("name") or "")


def tool_cut(fmt: str, tool: dict[str, Any], kept: tuple[str, ...]) -> Any:
    """A tool's declaration cut to its name (and type), or whole if it is one of ``kept``."""
    if fmt == "gemini":
        declarations = [
            d if d.get("name") in kept else _declaration_cut(d)
            for d in tool.get("functionDeclarations") or []
        ]
        rest = {k: strings(v, cut) for k, v in tool.items() if k != "functionDeclarations"}
        return {"functionDeclarations": declarations, **rest} if declarations else rest
    if tool_name(tool) in kept:
        return tool
    if fmt == "anthropic":
        short = {"name": tool.get("name")}
        if "input_schema" in tool:
            short["input_schema"] = {"type": "object"}
        return short
    short = {k: tool[k] for k in ("type", "name") if k in tool}
    if "parameters" in tool:
        short["parameters"] = {"type": "object"}
    if "function" in tool:
        short["function"] = {"name": tool_name(tool), "parameters": {"type": "object"}}
    return short


def _declaration_cut(declaration: dict[str, Any]) -> dict[str, Any]:
    """A Gemini function as the older recording keeps one: the names of its arguments."""
    schema = declaration.get("parametersJsonSchema") or declaration.get("parameters") or {}
    return {
        "name": declaration.get("name"),
        "description": "...",
        "parametersJsonSchema": {
            "type": schema.get("type", "object"),
            "properties": dict.fromkeys(schema.get("properties") or {}, "..."),
            "required": schema.get("required"),
        },
    }


def _item_cut(fmt: str, item: Any) -> Any:
    return item if model_item(fmt, item) else strings(item, cut)


def trim(
    fmt: str,
    request: dict[str, Any],
    kept: tuple[str, ...] = (),
    item_cut: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """``request`` as a recording keeps it: in its body, each history item the model's
    turn or carrying tool calls or results as it was sent and every other one's strings
    cut (or each item as ``item_cut`` makes it), the tools' declarations cut
    (:func:`tool_cut`) but those of ``kept``, every other string cut (:func:`cut`)."""
    body = request.get("body")
    if not isinstance(body, dict):
        return {**request, "body": strings(body, cut)}
    out: dict[str, Any] = {}
    for name, value in body.items():
        if name == HISTORY[fmt] and isinstance(value, list):
            out[name] = [
                item_cut(item) if item_cut is not None else _item_cut(fmt, item) for item in value
            ]
        elif name == "tools" and isinstance(value, list):
            out[name] = [
                tool_cut(fmt, tool, kept) if isinstance(tool, dict) else tool for tool in value
            ]
        else:
            out[name] = strings(value, cut)
    return {**request, "body": out}
