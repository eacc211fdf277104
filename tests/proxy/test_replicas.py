"""Two proxy replicas (``chatcli-mw serve`` twice, in processes of their own) sharing one
S3 store, behind which a session's requests alternate: the provider gets from them exactly
the bodies one proxy sends; what one spilled the other serves; a session's end removes its
outputs for both."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from object_store import S3Server, hanging_server, set_credentials
from proxy_stack import serve_process
from stand_in import Provider

#: It times a real wait: it runs in the suite's "timing" group, never beside another such
#: test (pyproject.toml's addopts).
pytestmark = pytest.mark.xdist_group("timing")

pytest.importorskip("s3fs", reason="the replica tests need the [s3] extra")

HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
SESSION = "replicated-session"


def output(turn: int) -> str:
    lines = 30 + (turn * 701) % 2200
    return "".join(f"turn {turn}: src/module_{n}.py:{n}: ok\n" for n in range(lines))


def conversation(turns: int) -> dict[str, Any]:
    """The request an agent sends after ``turns`` tool calls: the whole history again."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the checks."}]
    for turn in range(turns):
        call = {
            "type": "tool_use",
            "id": f"toolu_{turn:02d}",
            "name": "Bash",
            "input": {"command": f"check {turn}"},
        }
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{turn:02d}",
            "content": output(turn),
        }
        messages += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return {
        "model": "claude-test",
        "max_tokens": 512,
        "system": "You check code.",
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": messages,
    }


def store(s3: S3Server, bucket: str) -> dict[str, Any]:
    """The replicas' store (the credentials are in the environment they inherit)."""
    return {
        "spill.url": f"s3://{bucket}/mw",
        "spill.storage_options": s3.storage_options,
    }


def test_requests_alternating_between_two_replicas_reach_the_provider_as_from_one(
    provider: tuple[Provider, str], s3: S3Server
) -> None:
    stand_in, upstream = provider
    alone_bucket, shared_bucket = s3.bucket(), s3.bucket()
    turns = range(1, 11)
    headers = {**HEADERS, "x-chatcli-session": SESSION}

    with serve_process(upstream, store(s3, alone_bucket)) as single:
        for n in turns:
            answer = httpx.post(
                single + "/v1/messages", json=conversation(n), headers=headers, timeout=60
            )
            assert answer.status_code == 200, answer.text
    from_one = [raw.replace(alone_bucket.encode(), shared_bucket.encode()) for raw in stand_in.raw]
    stand_in.raw.clear()

    with (
        serve_process(upstream, store(s3, shared_bucket)) as first,
        serve_process(upstream, store(s3, shared_bucket)) as second,
    ):
        replicas = (first, second)
        for i, n in enumerate(turns):
            answer = httpx.post(
                replicas[i % 2] + "/v1/messages", json=conversation(n), headers=headers, timeout=60
            )
            assert answer.status_code == 200, answer.text
        from_two = list(stand_in.raw)
        assert from_two == from_one  # byte for byte

        spilled = f"s3://{shared_bucket}/mw/chatcli-agent-{SESSION}/tool-results/".encode()
        assert spilled in from_two[-1]  # the previews name objects of the shared store
        written = s3.versions(f"s3://{shared_bucket}/mw")
        results = {key: n for key, n in written.items() if "/tool-results/" in key}
        assert results and set(results.values()) == {1}  # each written once, by one replica

        # What the first replica spilled, the second serves (and the other way round).
        name = next(key for key in results if "toolu_01-" in key).rsplit("/", 1)[1]
        for url in replicas:
            recalled = httpx.get(f"{url}/recall/{SESSION}/{name}?offset=2&limit=2")
            assert recalled.status_code == 200
            assert recalled.text == "".join(output(1).splitlines(keepends=True)[1:3])
            assert recalled.headers["x-chatcli-lines"] == f"2-3/{output(1).count(chr(10))}"

        # The client says the session ended: its outputs go, for every replica.
        ended = httpx.delete(f"{second}/sessions/{SESSION}")
        assert ended.status_code == 200 and ended.json()["removed"] is True
        assert httpx.get(f"{first}/recall/{SESSION}/{name}").status_code == 404
        assert not [k for k in s3.filesystem().find(f"{shared_bucket}/mw") if SESSION in k]


def test_a_hung_store_costs_a_request_one_deadline_and_shows_on_healthz(
    provider: tuple[Provider, str],
) -> None:
    """A store that accepts connections and never answers (issue 26, item 1): requests go
    through with their results whole within the store's deadline, recall answers 504, and
    /healthz says the store is in trouble."""
    stand_in, upstream = provider
    set_credentials()
    with hanging_server() as endpoint:
        hung = {
            "spill.url": "s3://hung/mw",
            "spill.timeout_seconds": 1,
            "spill.storage_options": {"client_kwargs": {"endpoint_url": endpoint}},
        }
        with serve_process(upstream, hung) as url:
            headers = {**HEADERS, "x-chatcli-session": "hung"}
            answers = [
                httpx.post(url + "/v1/messages", json=conversation(n), headers=headers, timeout=60)
                for n in (1, 1, 2)
            ]
            assert [a.status_code for a in answers] == [200, 200, 200]
            sent = stand_in.accepted[-1][2]["messages"]
            assert sent[-1]["content"][0]["content"] == output(1)  # kept whole, not lost
            health = httpx.get(url + "/healthz").json()
            assert health["status"] == "degraded"
            assert "spill.timeout_seconds" in health["spill"]["error"]
            name = "toolu_01-0123456789abcdef.txt"
            recalled = httpx.get(f"{url}/recall/hung/{name}", timeout=60)
            assert recalled.status_code in (502, 504)  # 504 when it hangs, 502 while down
