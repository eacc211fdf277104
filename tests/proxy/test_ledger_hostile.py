"""The ledger against a hostile upstream and a hostile ledger file (issue 36, items 4 and
5): what it bills, keeps and writes stays finite, valid and bounded, so ``/sessions``
always answers, a restart finds what was recorded, and importing a file skips and counts
what is not an answer."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from servers import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from waiting import wait_for

from middleware.formats.routes import providers
from middleware.ledger import LedgerSettings, sums
from middleware.ledger.imports import import_files
from middleware.policy.settings import bind
from middleware.proxy.app import Proxy
from middleware.proxy.build import build_proxy
from middleware.records import RecordSettings

HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "k"}


class Hostile:
    """An Anthropic upstream whose answers report the usage and model the test queues."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        async def messages(request: Request) -> Response:
            await request.body()
            usage, model = self.answers.pop(0) if self.answers else ({"input_tokens": 1}, "m")
            answer = {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                      "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                      "usage": usage}  # fmt: skip
            # json.dumps writes a 309-digit integer as digits and a lone surrogate as its
            # escape, as a hostile upstream can.
            return Response(json.dumps(answer).encode(), media_type="application/json")

        return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])

    def queue(self, usage: dict[str, Any], model: str = "claude-sonnet-5") -> None:
        self.answers.append((usage, model))  # type: ignore[arg-type]


@contextmanager
def proxy_on(upstream: str, tmp_path: Path, **overrides: Any) -> Iterator[tuple[Proxy, str]]:
    layered = {
        "proxy.upstreams": {provider.name: upstream for provider in providers()},
        "spill.root": str(tmp_path / "spill"),
        "ledger.url": f"sqlite:///{tmp_path / 'records.sqlite'}",
        **overrides,
    }
    proxy, app = build_proxy(None, layered)
    with serving(app) as url:
        yield proxy, url


def records_at(path: Path) -> RecordSettings:
    return RecordSettings(f"sqlite:///{path}", 64 * 1024 * 1024, None, None, "test")


def send(url: str, session: str, **body: Any) -> httpx.Response:
    request = {
        "model": "claude-sonnet-5",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
        **body,
    }
    named = {"x-chatcli-session": session} if session else {}
    # Serialised ASCII-escaped: a lone surrogate goes as its escape, as a client sends it.
    return httpx.post(
        url + "/v1/messages",
        content=json.dumps(request).encode(),
        headers={**HEADERS, **named, "content-type": "application/json"},
        timeout=30,
    )


def strict(line: str) -> Any:
    """A JSON line as a strict reader takes it: ``NaN`` and ``Infinity`` are not JSON."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


def finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return True


def test_a_hostile_usage_or_model_name_never_breaks_sessions_nor_the_file(
    tmp_path: Path,
) -> None:
    """A usage of 10^308 tokens (infinite dollars), of 10^400 (too large for a float), a
    model name with a lone surrogate: ``/sessions`` answers, the file holds JSON only, a
    restart finds the session whole in the records, and the file imports whole."""
    hostile = Hostile()
    file = tmp_path / "ledger.jsonl"
    with serving(hostile.app()) as upstream:
        with proxy_on(upstream, tmp_path, **{"ledger.file": str(file)}) as (proxy, url):
            hostile.queue({"input_tokens": 10**308, "output_tokens": 1})
            hostile.queue({"input_tokens": 10**400, "output_tokens": 1})
            hostile.queue({"input_tokens": 7, "output_tokens": 1}, model="claude-\ud800-x")
            hostile.queue({"input_tokens": 5, "output_tokens": 1})
            statuses = []
            for n in range(4):
                assert send(url, "s").status_code == 200
                wait_for(lambda n=n: proxy.ledger.total()["requests"] == n + 1, 10)
                listed = httpx.get(url + "/sessions")
                one = httpx.get(url + "/sessions/s")
                statuses.append((listed.status_code, one.status_code))
            assert statuses == [(200, 200)] * 4
            assert one.json()["requests"] == 4 and finite(listed.json())
            # The two answers out of range are not billed: their usage counts as unread.
            assert one.json()["unread"] == 2 and one.json()["billed"]["input"] == 12
            assert list(one.json()["models"]) == ["claude-sonnet-5", "claude-\ufffd-x"]
        lines = file.read_text(encoding="utf-8").splitlines()
        assert len(lines) == 4 and all(finite(strict(line)) for line in lines)
        with proxy_on(upstream, tmp_path, **{"ledger.file": str(file)}) as (proxy, url):
            again = httpx.get(url + "/sessions/s")
            assert again.status_code == 200 and again.json() == one.json()
    imported = import_files(records_at(tmp_path / "imported.sqlite"), [file])
    assert (imported.read, imported.new, imported.skipped) == (4, 4, 0)


def test_a_lone_surrogate_in_the_session_name_is_kept_as_valid_unicode(
    tmp_path: Path,
) -> None:
    hostile = Hostile()
    with serving(hostile.app()) as upstream, proxy_on(upstream, tmp_path) as (proxy, url):
        assert send(url, "", prompt_cache_key="key-\udc80").status_code == 200
        assert wait_for(lambda: proxy.ledger.total()["requests"] == 1)
        listed = httpx.get(url + "/sessions")
        assert listed.status_code == 200
        assert [s["session"] for s in listed.json()["sessions"]] == ["key-\ufffd"]
        assert httpx.get(url + "/sessions/key-%EF%BF%BD").status_code == 200


def test_non_finite_and_out_of_range_lines_of_the_file_are_skipped_and_counted(
    tmp_path: Path,
) -> None:
    """A ledger file with ``NaN``, ``Infinity``, ``1e400``, a 400-digit count or a lone
    surrogate, as a crash, a hand edit or an older version left it: imported, each bad
    line is skipped and counted, and ``/sessions`` answers."""
    file = tmp_path / "ledger.jsonl"

    def line(**fields: Any) -> str:
        record = {"time": 5, "session": "s", "format": "anthropic", "model": "m",
                  "priced_as": "m", "billed": {"input": 4}, "without": {"input": 9},
                  "dollars": 0.5, "dollars_without": 1.0, **fields}  # fmt: skip
        return json.dumps(record)

    file.write_text(
        "\n".join(
            [
                line(),
                line(dollars=float("nan")),
                line(dollars_without=float("inf")),
                line(dollars=-1.0),
                line(time=float("nan")),
                line(time=float("-inf")),
                line(billed={"input": 10**400}),
                line(without={"input": 10**308}),
                line(expected_read=10**30),
                line().replace('"dollars": 0.5', '"dollars": 1e400'),
                line().replace('"time": 5', '"time": ' + "9" * 400),
                line(model="m-\ud800", session="s"),
                line(session="tiny", dollars_without=5e-324),  # a ratio past any float
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    imported = import_files(records_at(tmp_path / "records.sqlite"), [file])
    assert (imported.new, imported.skipped) == (3, 10)
    hostile = Hostile()
    with serving(hostile.app()) as upstream, proxy_on(upstream, tmp_path) as (_, url):
        listed = httpx.get(url + "/sessions")
        one = httpx.get(url + "/sessions/s")
        assert (listed.status_code, one.status_code) == (200, 200)
        assert finite(listed.json()) and finite(one.json())
        assert one.json()["requests"] == 2 and one.json()["billed"]["dollars"] == 1.0
        assert one.json()["models"] == {"m": 1, "m-\ufffd": 1}
        tiny = httpx.get(url + "/sessions/tiny")
        assert tiny.status_code == 200 and tiny.json()["ratio"] is None


def test_names_kept_are_bounded_in_length_and_count(tmp_path: Path) -> None:
    """An upstream echoing a new 100 KB model name in every answer (issue 36, item 5): the
    ledger keeps each name cut short, a few names per session, and ``/sessions`` stays
    small; the file's lines too."""
    hostile = Hostile()
    file = tmp_path / "ledger.jsonl"
    requests = 40
    with serving(hostile.app()) as upstream:
        with proxy_on(upstream, tmp_path, **{"ledger.file": str(file)}) as (proxy, url):
            for n in range(requests):
                hostile.queue(
                    {"input_tokens": 3, "output_tokens": 1}, model=f"{n:04d}" + "m" * 100_000
                )
                assert send(url, f"session-{n % 2}").status_code == 200
                assert wait_for(lambda n=n: proxy.ledger.total()["requests"] == n + 1)
            listed = httpx.get(url + "/sessions")
            assert listed.status_code == 200
            total = listed.json()["total"]
            sessions = [httpx.get(f"{url}/sessions/session-{n}").json() for n in range(2)]
            kept = [name for ledger in (total, *sessions) for name in ledger["models"]]
            assert all(len(name) <= sums.MAX_NAME_CHARS for name in kept)
            assert all(len(s["models"]) <= sums.MAX_MODELS for s in sessions)
            assert len(total["models"]) <= sums.MAX_MODELS_IN_TOTAL
            # Every answer is still counted, those past the names kept among "other".
            assert sum(total["models"].values()) == requests
            assert sum(sum(s["models"].values()) for s in sessions) == requests
            assert len(listed.content) < 40 * 1024
            # The price table remembers the entry of each name it met: cut short too.
            met = bind(proxy.catalog.default.policy, LedgerSettings).prices._found
            assert met and all(len(name) <= sums.MAX_NAME_CHARS for name in met)
        lines = file.read_bytes().splitlines()
        assert len(lines) == requests and max(len(line) for line in lines) < 4 * 1024
