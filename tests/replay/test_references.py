"""Hidden references: distinctive tokens, where they first appeared, and hiding."""

from __future__ import annotations

from typing import Any

from middleware.formats import get_codec
from middleware.replay.costs import serialize
from middleware.replay.references import answer_tokens, build_index, distinctive_tokens, is_hidden


def test_distinctive_tokens_are_identifiers_paths_versions_and_codes() -> None:
    text = (
        "The error E1234 comes from src/app/main.py line 42 in parseConfig(); "
        "upgrade requests to 2.31.0, see ERR_CONNECTION_RESET and http://x.io/a. "
        "Plain words like function and the number 2024 are not distinctive."
    )
    assert distinctive_tokens(text) == {
        "E1234", "src/app/main.py", "parseConfig", "2.31.0", "ERR_CONNECTION_RESET",
        "http://x.io/a", "//x.io/a",
    }  # fmt: skip
    assert distinctive_tokens("src/a.py:17: x") == {"src/a.py:17", "src/a.py"}


def history() -> list[dict[str, Any]]:
    def use(i: str, cmd: str) -> dict[str, Any]:
        return {"type": "tool_use", "id": i, "name": "bash", "input": {"cmd": cmd}}

    def res(i: str, text: str) -> dict[str, Any]:
        return {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": i, "content": text}],
        }

    return [
        {"role": "user", "content": "Fix the failing test in tests/test_api.py."},
        {"role": "assistant", "content": [use("t1", "pytest -x")]},
        res("t1", "FAILED tests/test_api.py::test_login - KeyError: session_token\n"),
        {"role": "assistant", "content": [use("t2", "grep -rn session_token src/")]},
        res("t2", "src/auth/session.py:17: TOKEN_KEY = 'session_token'\n"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "maybe hidden_in_thinking_1", "signature": "s"},
                {"type": "text", "text": "The key is read in src/auth/session.py as TOKEN_KEY."},
                use("t3", "sed -n 1,40p src/auth/session.py"),
            ],
        },
    ]


def test_references_first_appeared_in_a_tool_result() -> None:
    messages = history()
    conversation = get_codec("anthropic").parse(messages)
    index = build_index(conversation)
    answer = answer_tokens(conversation, 5)
    assert "hidden_in_thinking_1" not in answer
    # tests/test_api.py is in the task statement; session_token appeared first in the
    # model's own grep command; the path and TOKEN_KEY first came from a tool result.
    assert index.references(answer, 5) == {"src/auth/session.py", "TOKEN_KEY"}
    assert index.references(answer, 4) == set()  # not yet seen before message 4


def test_hidden_when_the_processed_request_lacks_the_token() -> None:
    request = history()[:5]
    text = serialize(request)
    assert not is_hidden("TOKEN_KEY", text)
    cleared = [*request[:4], {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t2", "content": "[cleared]"}]}]  # fmt: skip
    assert is_hidden("TOKEN_KEY", serialize(cleared))
    assert not is_hidden("C:\\dir", serialize([{"role": "user", "content": "C:\\dir"}]))


def test_absolute_home_and_relative_paths_keep_their_start() -> None:
    """Issue 13, item 19: summaries dropped the leading / and ~/ of paths."""
    text = "edit /etc/nginx/nginx.conf, then ~/src/app.py and ./run.sh or ../lib/x.py"
    assert distinctive_tokens(text) == {
        "/etc/nginx/nginx.conf",
        "~/src/app.py",
        "./run.sh",
        "../lib/x.py",
    }
