"""Gemini CLI 0.61's requests, built as it sends them with its model router on: a router
call declares no tools and copies the opening (split in two contents) or the
conversation's history (its call ids as ``NAME__ID``); the request opening the
conversation has no reply yet; the conversation's requests repeat its first reply's calls,
whose ids the CLI makes."""

from __future__ import annotations

from typing import Any

#: What Gemini CLI sends as its User-Agent, and what the google-genai SDK does.
CLI = {"user-agent": "GeminiCLI-tui/0.61.0/gemini-3.1-pro-preview (linux; x64; terminal)"}
SDK = {"user-agent": "google-genai-sdk/1.30.0 gl-node/v20.20.2"}
CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our "
    "chat.\nToday's date is Wednesday, December 2, 2026.\n</session_context>"
)
PROMPT = "Run the big command."
AGAIN = "Read the big output again."
TOOLS = [{"functionDeclarations": [{"name": "run_shell_command"}]}]


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text} for text in texts]}


def called(call_id: str, output: str = "built") -> list[dict[str, Any]]:
    """A model turn calling ``run_shell_command`` (signed, with a thought) and its answer."""
    call = {"id": call_id, "name": "run_shell_command", "args": {"command": "make"}}
    answer = {"id": call_id, "name": "run_shell_command", "response": {"output": output}}
    return [
        {"role": "model", "parts": [{"text": "Thinking about it.", "thought": True},
                                    {"functionCall": call, "thoughtSignature": "sig-1"}]},
        {"role": "user", "parts": [{"functionResponse": answer}]},
    ]  # fmt: skip


def turn(*contents: dict[str, Any]) -> dict[str, Any]:
    """A request of the conversation (its tools declared)."""
    return {
        "contents": list(contents),
        "systemInstruction": user("You are Gemini CLI."),
        "tools": TOOLS,
    }


def router(*contents: dict[str, Any]) -> dict[str, Any]:
    """A call of the model router: no tools, a system instruction of its own."""
    return {
        "contents": list(contents),
        "systemInstruction": user("You are a Task Routing AI."),
        "generationConfig": {"responseMimeType": "application/json"},
    }


def run(
    call_id: str, *, context: str = CONTEXT, output: str = "built", prefixed: bool = True
) -> dict[str, Any]:
    """One run's requests, by name: the router call before the first prompt, the opening
    request, the conversation's first request after the model's first reply (the call's
    ``output``), the router call of a second prompt (the history, its call ids as the
    router sends them, or as the conversation does if not ``prefixed``) and the request of
    that prompt."""
    history = [
        user(context, PROMPT),
        *called(call_id, output),
        {"role": "model", "parts": [{"text": "Done."}]},
    ]
    routed_id = f"run_shell_command__{call_id}" if prefixed else call_id
    routed = [user(context, PROMPT), *called(routed_id, output), history[-1]]
    return {
        "router": router(user(context), user(PROMPT)),
        "opening": turn(user(context, PROMPT)),
        "first": turn(*history[:3]),
        "router again": router(*routed, user(AGAIN)),
        "again": turn(*history, user(AGAIN)),
    }
