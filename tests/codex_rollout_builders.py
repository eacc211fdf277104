"""Small Codex CLI rollouts, modelled on the lines of real ones (Codex CLI 0.140-0.142):
one ``{timestamp, type, payload}`` object per line, ``response_item`` payloads as Codex
sent them, exec output in Codex's text envelope, apply_patch as a custom tool call.

Each builder returns one line; :func:`rollout` is a whole session with one of each kind of
item the loader has to handle, and :data:`ROLLOUT_REQUESTS` what it holds.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2026, 6, 18, 0, 57, 5, 559_000, tzinfo=UTC)
WORKDIR = "/home/dev/projects/shop"
BASE_INSTRUCTIONS = "You are Codex, a coding agent based on GPT-5."


def stamp(seconds: float) -> str:
    """The ISO time Codex writes, ``seconds`` after :data:`START`."""
    return (START + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")[:-6] + "Z"


def line(kind: str, payload: dict[str, Any], at: float) -> dict[str, Any]:
    return {"timestamp": stamp(at), "type": kind, "payload": payload}


def item(payload: dict[str, Any], at: float) -> dict[str, Any]:
    return line("response_item", payload, at)


def session_meta(at: float = 0.0, session_id: str = "019ed836-0000") -> dict[str, Any]:
    return line("session_meta", {
        "id": session_id, "timestamp": stamp(at), "cwd": WORKDIR, "originator": "codex-tui",
        "cli_version": "0.140.0", "source": "cli", "model_provider": "openai",
        "base_instructions": {"text": BASE_INSTRUCTIONS},
    }, at)  # fmt: skip


def turn_context(at: float) -> dict[str, Any]:
    return line("turn_context", {"turn_id": "t-1", "cwd": WORKDIR, "model": "gpt-5.4"}, at)


def message(role: str, text: str, at: float) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return item({"type": "message", "role": role, "content": [{"type": part, "text": text}]}, at)


def reasoning(at: float, *, redacted: bool = True) -> dict[str, Any]:
    """A reasoning item as the recorder left it: ``encrypted_content`` replaced, or gone."""
    payload: dict[str, Any] = {"type": "reasoning", "summary": []}
    if redacted:
        payload.update(id=f"rs_{int(at * 1000)}", encrypted_content="REDACTED")
    return item(payload, at)


def exec_call(call_id: str, cmd: str, at: float) -> dict[str, Any]:
    arguments = {"cmd": cmd, "workdir": WORKDIR, "yield_time_ms": 1000, "max_output_tokens": 4000}
    return item({"type": "function_call", "name": "exec_command",
                 "arguments": json.dumps(arguments), "call_id": call_id}, at)  # fmt: skip


def envelope(output: str, code: int = 0) -> str:
    """Codex's exec output: chunk id, wall time, exit code, token count, then the output."""
    return (
        f"Chunk ID: 9e8d70\nWall time: 0.3383 seconds\nProcess exited with code {code}\n"
        f"Original token count: {len(output) // 4}\nOutput:\n{output}"
    )


def exec_output(call_id: str, output: str, at: float, code: int = 0) -> dict[str, Any]:
    return item(
        {"type": "function_call_output", "call_id": call_id, "output": envelope(output, code)}, at
    )


def apply_patch(call_id: str, patch: str, at: float) -> dict[str, Any]:
    return item({"type": "custom_tool_call", "status": "completed", "call_id": call_id,
                 "name": "apply_patch", "input": patch}, at)  # fmt: skip


def patch_output(call_id: str, at: float) -> dict[str, Any]:
    text = "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess. Updated the following files:"
    return item({"type": "custom_tool_call_output", "call_id": call_id, "output": text}, at)


def image_output(call_id: str, at: float) -> dict[str, Any]:
    """A ``view_image`` output: a list of content items, not a string."""
    parts = [
        {"type": "input_text", "text": "Viewed screenshot.png"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
    ]
    return item({"type": "function_call_output", "call_id": call_id, "output": parts}, at)


def function_call(call_id: str, name: str, arguments: dict[str, Any], at: float) -> dict[str, Any]:
    return item({"type": "function_call", "name": name, "arguments": json.dumps(arguments),
                 "call_id": call_id}, at)  # fmt: skip


def web_search(at: float) -> dict[str, Any]:
    """Run by the server: no output item follows it."""
    return item({"type": "web_search_call", "status": "completed",
                 "action": {"type": "search", "query": "codex rollout format"}}, at)  # fmt: skip


def tool_search(call_id: str, at: float) -> list[dict[str, Any]]:
    return [
        item({"type": "tool_search_call", "call_id": call_id, "status": "completed",
              "execution": "client", "arguments": {"query": "github"}}, at),
        item({"type": "tool_search_output", "call_id": call_id, "status": "completed",
              "execution": "client", "tools": []}, at + 0.1),
    ]  # fmt: skip


def token_count(total: int, at: float) -> dict[str, Any]:
    """What Codex logs after each model call: the session's total grows by the call's."""
    usage = {"input_tokens": total, "cached_input_tokens": 0, "output_tokens": 10,
             "reasoning_output_tokens": 0, "total_tokens": total + 10}  # fmt: skip
    return line("event_msg", {"type": "token_count", "info": {
        "total_token_usage": usage, "last_token_usage": usage, "model_context_window": 258400,
    }}, at)  # fmt: skip


def event(kind: str, at: float, **fields: Any) -> dict[str, Any]:
    return line("event_msg", {"type": kind, **fields}, at)


def compacted(history: list[dict[str, Any]], at: float) -> dict[str, Any]:
    """A ``compacted`` line: ``history`` (payloads) replaces everything before it."""
    return line("compacted", {"message": "", "replacement_history": history}, at)


def payload(line_: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = line_["payload"]
    return found


#: The file :func:`rollout` reads, and the patch its apply_patch call sends.
SOURCE = "\n".join(
    f"export function priceOfItem{n}(cart: Cart): number {{ return cart.total * {n}; }}"
    for n in range(1, 60)
)
PATCH = (
    "*** Begin Patch\n"
    f"*** Update File: {WORKDIR}/src/cart.ts\n"
    "@@ export function priceOfItem11(cart: Cart): number { return cart.total * 11; }\n"
    " export function priceOfItem12(cart: Cart): number { return cart.total * 12; }\n"
    "-export function priceOfItem13(cart: Cart): number { return cart.total * 13; }\n"
    "+export function priceOfItem13(cart: Cart): number { return cart.subtotal * 13; }\n"
    " export function priceOfItem14(cart: Cart): number { return cart.total * 14; }\n"
    "*** End Patch"
)


def rollout() -> list[dict[str, Any]]:
    """A session of two user turns and a compaction: exec calls and outputs, a file read
    and an apply_patch quoting it, a content-list output, a web search, a tool search,
    reasoning items, a repeated ``session_meta`` (a resume), and a last call the
    recording caught before it returned."""
    read = f"sed -n '1,80p' {WORKDIR}/src/cart.ts"
    summary_user = message("user", "Make item 13 use the subtotal.", 1)
    return [
        session_meta(0),
        event("task_started", 0.5, turn_id="t-1"),
        message("developer", "<permissions instructions>full access</permissions instructions>", 1),
        turn_context(1),
        summary_user,
        event("user_message", 1, message="Make item 13 use the subtotal."),
        # model call 1: reasoning, a comment, two calls
        reasoning(5),
        message("assistant", "Reading the cart module.", 6),
        exec_call("call_a", read, 6.1),
        exec_call("call_b", "git status --short", 6.2),
        exec_output("call_a", SOURCE, 7),
        exec_output("call_b", " M src/cart.ts", 7.1),
        token_count(1000, 7.2),
        # model call 2: the patch
        reasoning(10, redacted=False),
        apply_patch("call_c", PATCH, 11),
        event("patch_apply_end", 11.5, call_id="call_c", stdout="Success."),
        patch_output("call_c", 12),
        token_count(2500, 12.1),
        # model call 3: a screenshot (content-list output), a web search
        function_call("call_d", "view_image", {"path": "screenshot.png"}, 20),
        web_search(20.5),
        image_output("call_d", 21),
        token_count(4000, 21.1),
        # model call 4: the answer that ends the turn
        message("assistant", "Item 13 now uses the subtotal.", 30),
        token_count(5500, 30.1),
        event("task_complete", 30.2, turn_id="t-1"),
        session_meta(600),  # resumed ten minutes later: nothing restarts
        turn_context(601),
        message("user", "Now search the tools.", 601),
        # model call 5
        reasoning(605),
        *tool_search("call_e", 606),
        token_count(7000, 606.2),
        compacted(
            [
                payload(summary_user),
                payload(message("user", "Now search the tools.", 0)),
                {"type": "compaction", "encrypted_content": "REDACTED"},
            ],
            700,
        ),
        turn_context(700.1),
        token_count(7000, 700.2),  # unchanged: the compaction is no model call of the turn
        event("context_compacted", 700.3),
        # model call 6, in the compacted history
        reasoning(710),
        exec_call("call_f", "npm test", 711),
        exec_output("call_f", "Tests: 12 passed", 720),
        token_count(8000, 720.1),
        # model call 7: caught while its command ran
        exec_call("call_g", "git commit -am 'Use the subtotal'", 730),
    ]


#: :func:`rollout`'s requests per segment: the model calls it records.
ROLLOUT_REQUESTS = (5, 2)


def write(path: Path, lines: list[dict[str, Any]], *, final_newline: bool = True) -> Path:
    """Write ``lines`` as JSONL (real rollouts sometimes lack the last newline)."""
    text = "\n".join(json.dumps(line_) for line_ in lines) + ("\n" if final_newline else "")
    path.write_text(text, encoding="utf-8")
    return path
