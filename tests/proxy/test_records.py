"""What the proxy records, where a team reads it (issue 44): a restart finds the ledger in
the embedded database, every answer carries who asked (a digest of the key, never the key)
and the request's tags, ``/sessions`` and ``chatcli-mw ledger`` sum by them, and ledger
files move into the database once however often they are imported."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxy_stack import serve_process
from servers import serving
from stand_in import Provider
from waiting import wait_for

from middleware.cli.app import main

HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}


def ask(url: str, session: str, key: str, tags: str | None = None) -> httpx.Response:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": f"hello from {session}"}],
    }
    headers = {**HEADERS, "x-api-key": key, "x-chatcli-session": session}
    if tags is not None:
        headers["x-chatcli-tags"] = tags
    return httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=30)


def sessions(url: str, **query: Any) -> dict[str, Any]:
    answer = httpx.get(url + "/sessions", params=query, timeout=30)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_a_restart_finds_the_ledger_in_the_state_folder(tmp_path: Path) -> None:
    """No configuration: the records go to records.sqlite in $XDG_STATE_HOME/chatcli-mw,
    and a proxy started again on the same machine shows what the first one billed."""
    stand_in = Provider()
    with serving(stand_in.app()) as upstream:
        with serve_process(upstream, {}) as url:
            for _ in range(3):
                assert ask(url, "kept", "sk-ant-1").status_code == 200
            assert wait_for(lambda: sessions(url)["total"]["requests"] == 3)
            first = httpx.get(url + "/sessions/kept").json()
        database = Path(os.environ["XDG_STATE_HOME"]) / "chatcli-mw" / "records.sqlite"
        assert database.is_file()
        with serve_process(upstream, {}) as url:
            again = httpx.get(url + "/sessions/kept")
            assert again.status_code == 200 and again.json() == first
            assert ask(url, "kept", "sk-ant-1").status_code == 200
            assert wait_for(lambda: httpx.get(url + "/sessions/kept").json()["requests"] == 4)


def test_answers_carry_who_asked_and_the_tags_and_sum_by_them(tmp_path: Path) -> None:
    stand_in = Provider()
    with serving(stand_in.app()) as upstream, serve_process(upstream, {}) as url:
        for key, session, tags in [
            ("sk-ant-alice", "a1", "team=infra, project=x"),
            ("sk-ant-alice", "a1", "team=infra"),
            ("sk-ant-bob", "b1", "team=web"),
            ("sk-ant-bob", "b2", None),
        ]:
            assert ask(url, session, key, tags).status_code == 200
        assert wait_for(lambda: sessions(url)["total"]["requests"] == 4)
        alice = hashlib.sha256(b"chatcli-caller\0sk-ant-alice").hexdigest()[:16]
        by_key = {g["key"]: g["requests"] for g in sessions(url, by="key")["groups"]}
        assert by_key[alice] == 2 and sum(by_key.values()) == 4
        assert not any("sk-ant" in str(name) for name in by_key)  # the key is never kept
        of_alice = sessions(url, key=alice)
        assert [s["session"] for s in of_alice["sessions"]] == ["a1"]
        assert of_alice["total"]["requests"] == 2
        infra = sessions(url, tag="team=infra")
        assert infra["total"]["requests"] == 2
        by_tag = {g["tag"]: g["requests"] for g in sessions(url, by="tag")["groups"]}
        assert by_tag == {"team=infra": 2, "project=x": 1, "team=web": 1}
        both = sessions(url, tag=["team=infra", "project=x"])
        assert both["total"]["requests"] == 1
        assert httpx.get(url + "/sessions", params={"by": "colour"}).status_code == 400
        assert httpx.get(url + "/sessions", params={"tag": "nonsense"}).status_code == 400

        # The console's list filters alike: each session billed by the answers selected.
        def console(**query: Any) -> dict[str, Any]:
            answer = httpx.get(url + "/ui/api/sessions", params=query, timeout=30)
            assert answer.status_code == 200, answer.text
            found: dict[str, Any] = answer.json()
            return found

        listed = console(key=alice)
        assert [(s["session"], s["caller"], s["agent"]) for s in listed["sessions"]] == [
            ("a1", alice, "SDK")
        ]
        assert listed["total"] == of_alice["total"] and listed["filters"]["key"] == alice
        tagged = console(tag=["team=infra", "project=x"])
        assert [s["session"] for s in tagged["sessions"]] == ["a1"]
        assert tagged["sessions"][0]["billed"]["input"] < listed["sessions"][0]["billed"]["input"]
        assert {s["session"] for s in console()["sessions"]} == {"a1", "b1", "b2"}
        refused = httpx.get(url + "/ui/api/sessions", params={"tag": "nonsense"}, timeout=30)
        assert refused.status_code == 400 and "name=value" in refused.text


def test_the_ledger_command_reads_the_database_by_who_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no proxy running: `chatcli-mw ledger` reads the state folder's database."""
    stand_in = Provider()
    with serving(stand_in.app()) as upstream, serve_process(upstream, {}) as url:
        for n in range(3):
            assert ask(url, f"s{n}", "sk-ant-1", f"team=t{n % 2}").status_code == 200
        assert wait_for(lambda: sessions(url)["total"]["requests"] == 3)
    capsys.readouterr()
    assert main(["ledger", "--by", "tag", "--json"]) == 0
    groups = {g["tag"]: g["requests"] for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups == {"team=t0": 2, "team=t1": 1}
    assert main(["ledger", "--tag", "team=t1", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [s["session"] for s in found["sessions"]] == ["s1"]
    assert main(["ledger", "--by", "day"]) == 0
    assert "total" in capsys.readouterr().out


def test_ledger_files_are_imported_once_however_often(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "ledger.jsonl"
    stand_in = Provider()
    with (
        serving(stand_in.app()) as upstream,
        serve_process(upstream, {"ledger.file": str(file), "ledger.url": None}) as url,
    ):
        for n in range(5):
            assert ask(url, f"s{n % 2}", "sk-ant-1").status_code == 200
        assert wait_for(lambda: sessions(url)["total"]["requests"] == 5)
    older = '{"time":1,"session":"old","format":"anthropic","billed":{"input":4},"without":{}}'
    with file.open("a", encoding="utf-8") as kept:
        kept.write(older + "\nnot an answer\n")  # a line of a release before keys, and junk
    database = tmp_path / "team.sqlite"
    url = f"sqlite:///{database}"
    capsys.readouterr()
    assert main(["ledger", "import", str(file), "--db", url]) == 0
    assert "6 answers read from 1 file(s): 6 imported" in capsys.readouterr().out
    assert main(["ledger", "import", str(file), "--db", url]) == 0  # again: nothing new
    said = capsys.readouterr().out
    assert "0 imported" in said and "6 there already" in said and "1 lines were no answer" in said
    with sqlite3.connect(database) as connection:
        (count,) = connection.execute("SELECT count(*) FROM chatcli_answers").fetchone()
    assert count == 6
    assert main(["ledger", "--db", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["requests"] == 6


def test_an_unpriced_model_shows_not_priced_never_free_nor_a_saving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 45, item 3: a model ledger.prices does not name is "not priced", with how to
    price it, in the ledger command and the console's JSON; never $0.0000."""
    stand_in = Provider()
    with serving(stand_in.app()) as upstream, serve_process(upstream, {}) as url:
        body = {
            "model": "mystery-model-1",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hello"}],
        }
        headers = {**HEADERS, "x-api-key": "sk-ant-1", "x-chatcli-session": "unpriced"}
        answer = httpx.post(url + "/v1/messages", json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        assert wait_for(lambda: sessions(url)["total"]["requests"] == 1)
        (row,) = httpx.get(url + "/ui/api/sessions", timeout=30).json()["sessions"]
        assert (row["priced"], row["unpriced"]) == (0, 1)
        capsys.readouterr()
        assert main(["ledger", "--url", url, "unpriced"]) == 0
        shown = capsys.readouterr().out
        assert main(["ledger", "--url", url]) == 0
        listed = capsys.readouterr().out
    for text in (shown, listed):
        assert "not priced" in text and "ledger.prices.MODEL" in text, text
        assert "$0.0000" not in text, text
