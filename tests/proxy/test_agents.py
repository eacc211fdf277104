"""Claude Code, Codex CLI, opencode and Gemini CLI, the real CLIs, through ``chatcli-mw
serve`` (a process of its own) against the strict provider stand-in, set up as
docs/proxy.md says. For each agent:

* a tool's output over the cap is spilled, and the next scripted turn reads it back with
  the agent's own tool, following only the preview's words, and gets the original lines;
* a resumed session (``claude -c``, ``codex exec resume --last``, ``opencode run -c``,
  ``gemini --resume latest``) is the same proxy session and finds its earlier spill;
* two sessions run at once in one folder stay apart (sessions, files, ``DELETE``), opencode
  on the Responses API too (its other scenarios repeat Codex CLI's and opencode's);
* a tool call interrupted mid-run (the agent killed) is repaired on the next request;
* one Gemini CLI run, with its model router on, is one session in ``/sessions`` and the
  console (its router calls and its opening request with its conversation), two at once
  are two;
* every request the stand-in receives is one the provider would accept.

Codex CLI also compacts its own context through the proxy (remote compaction v2) and goes
on after it, its compaction item sent back exactly as the stand-in issued it.

`.ci/run` installs the pinned CLIs; an agent that is not installed skips, saying how.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from agent_events import events, results, without_results
from agent_runs import Run, base_env, wait_for_file
from agent_script import (
    CODEX_COMPACT_AT,
    FILL,
    GO_ON,
    LINES_SAID,
    READ_AGAIN,
    READ_FILE,
    RUN_BIG,
    SLEEP,
    big_output,
    routed,
    scripted,
)
from agent_setup import Setup, readbacks_counted, set_up
from agents import (
    AGENT_BY_NAME,
    AGENT_LIST,
    AGENTS,
    NPM_PACKAGES,
    PINNED,
    binary,
    documented_variables,
    gemini_routed_argv,
)
from locations import REPO
from stand_in import triggered
from waiting import wait_for

from middleware.ledger import Usage, read_usage
from middleware.spill.layout import session_folder_name

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow


@pytest.fixture(params=AGENT_LIST, ids=[agent.name for agent in AGENT_LIST])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    with set_up(request.param, tmp_path) as ready:
        yield ready


#: The scenarios where opencode on the Responses API would repeat what Codex CLI (the
#: Responses API) and opencode on Anthropic's API already cover: it runs only the one that
#: is its own, two sessions told apart by its ``session-id`` header (each opencode run
#: takes 3-4 s: the two left out took 20 s of the suite).
COVERED_ELSEWHERE = ("opencode-openai",)
NOT_COVERED_ELSEWHERE = [agent for agent in AGENT_LIST if agent.name not in COVERED_ELSEWHERE]


def each_agent_not_covered_elsewhere() -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "setup",
        NOT_COVERED_ELSEWHERE,
        indirect=True,
        ids=[agent.name for agent in NOT_COVERED_ELSEWHERE],
    )


def named_file(preview: str) -> Path:
    """The spill file a preview names."""
    saved = re.search(r"saved to:? (\S+?)\]?\n", preview)
    assert saved is not None, preview
    return Path(saved.group(1))


def check_read_back(preview: str, result: str) -> None:
    """``result`` holds exactly the lines ``preview`` said to read, of the output as the
    agent sent it (the file the preview names)."""
    said = LINES_SAID.search(preview)
    span = re.search(r"sed -n '(\d+),(\d+)p'|limit (\d+)", preview)
    assert said is not None and span is not None, preview
    first = int(said.group(1))
    count = int(span.group(3)) if span.group(3) else int(span.group(2)) - int(span.group(1)) + 1
    lines = named_file(preview).read_text("utf-8").splitlines(keepends=True)
    wanted = "".join(lines[first - 1 : first - 1 + count])
    assert wanted.rstrip("\n") in result, (preview[-800:], result[:800])  # agents may drop
    # the last line break


def read_back(setup: Setup, letter: str = "y", bodies: list[dict[str, Any]] | None = None) -> str:
    """The preview of the big output of ``letter`` that the provider saw, checked: the
    file it names holds the output whole, and the next result is what following its words
    read back."""
    for body in setup.bodies() if bodies is None else bodies:
        texts = results(setup.agent.fmt, body)
        for i, text in enumerate(texts[:-1]):
            if LINES_SAID.search(text) and big_output(letter)[:200] in text:
                assert big_output(letter).rstrip("\n") in named_file(text).read_text("utf-8")
                check_read_back(text, texts[i + 1])
                return text
    raise AssertionError(f"no preview of the big output was read back ({letter})")


def sessions(setup: Setup) -> set[str]:
    """The proxy's sessions of the requests that carry tool results."""
    return {line["session"] for line in setup.cleaned() if line.get("chars_before")}


def workspaces(setup: Setup) -> dict[Path, str]:
    """Each session folder of the spill store, and what its files hold."""
    folders = {f.parent.parent for f in setup.spill.glob("chatcli-agent-*/tool-results/*")}
    return {
        folder: "".join(p.read_text("utf-8") for p in sorted(folder.glob("tool-results/*")))
        for folder in folders
    }


@each_agent_not_covered_elsewhere()
def test_a_spilled_output_is_read_back_with_the_agents_own_tool_also_after_resume(
    setup: Setup,
) -> None:
    setup.run(RUN_BIG)
    preview = read_back(setup)
    assert len(sessions(setup)) == 1, sessions(setup)
    before = len(setup.bodies())
    # The proxy saw the agent go back for the spilled output: one read-back, its shell's.
    shell = setup.agent.tools.shell("").name
    assert readbacks_counted(setup) == {("spill_file", "budget", shell): 1}
    assert readbacks_shown(setup) == [("spill_file", "budget", shell)]

    setup.run(READ_AGAIN, resume=True)
    # The same proxy session: its old output is the same file, and reading it back again
    # by the preview's words works.
    assert len(sessions(setup)) == 1, sessions(setup)
    resumed = setup.bodies()[before:]
    assert resumed, "the resumed session sent nothing"
    old = [text for text in results(setup.agent.fmt, resumed[0]) if LINES_SAID.search(text)]
    assert old and named_file(old[0]) == named_file(preview)
    texts = results(setup.agent.fmt, resumed[-1])
    check_read_back(old[0], texts[-1])
    assert readbacks_counted(setup) == {("spill_file", "budget", shell): 2}
    # What a resumed session of the agent breaks, the proxy repaired (the stand-in, which
    # refuses what the provider refuses, accepted every request).
    broken_by_resume = RESUME_BREAKS.get(setup.agent.name)
    if broken_by_resume is not None:
        done = [line.get("actions", {}) for line in setup.cleaned()]
        assert any(broken_by_resume in actions for actions in done), done

    # The proxy's ledger holds every answer: what their usage said, to the token, and as
    # unread those that said none (a Chat Completions stream that did not ask for it).
    cache = setup.provider.cache
    assert cache is not None
    billed = sum((read_usage(fmt, usage) or Usage() for fmt, usage in cache.reported), Usage())
    unsaid = sum((read_usage("openai", usage) or Usage() for usage in cache.unsaid), Usage())
    said = {kind: count - unsaid.as_dict()[kind] for kind, count in billed.as_dict().items()}
    total = wait_until_billed(setup.url, len(cache.reported))
    assert total["unread"] == len(cache.unsaid) and billed.prompt > 0
    assert {kind: total["billed"][kind] for kind in said} == said


def readbacks_shown(setup: Setup) -> list[tuple[str, str, str]]:
    """The read-backs the console shows on the requests of the agent's sessions, each as
    (kind, step, tool), once every cleaned request has its record."""
    cleaned = setup.cleaned()
    shown: list[tuple[str, str, str]] = []

    def found() -> bool:
        shown.clear()
        records = 0
        for session in {line["session"] for line in cleaned}:
            page = httpx.get(f"{setup.url}/ui/api/sessions/{quote(session, safe='')}?limit=100")
            requests = page.json()["requests"] if page.status_code == 200 else []
            records += len(requests)
            shown.extend(
                (r["kind"], r["step"], r["tool"])
                for request in requests
                for r in request.get("readbacks", [])
            )
        return records >= len(cleaned)

    assert wait_for(found), "the console has not recorded every request"
    return shown


#: The agents whose file-reading tool reads the spill store's files (outside the project):
#: opencode's ``read`` asks first, and ``opencode run`` answers no ("The user rejected
#: permission to use this specific tool call"); Gemini CLI's ``read_file`` answers "Path
#: not in workspace". Both read them back with their shell (the test above).
READ_TOOL_AGENTS = [AGENT_BY_NAME["claude"]]


@pytest.mark.parametrize(
    "setup", READ_TOOL_AGENTS, indirect=True, ids=[a.name for a in READ_TOOL_AGENTS]
)
def test_a_spill_file_read_with_the_agents_file_tool_is_one_read_back(setup: Setup) -> None:
    """The agent reads the file a preview names with its own file-reading tool (Claude
    Code's Read): ``/metrics`` and the console count it once, by the tool and the step
    that spilled the output."""
    setup.run(READ_FILE)
    reader = setup.agent.tools.read
    assert reader is not None
    tool = reader("", 1, 1).name
    last = setup.bodies()[-1]
    made = [e.name for e in events(setup.agent.fmt, last) if e.kind == "call"]
    assert made[-1] == tool, made  # the agent made the call the model asked for
    preview, got = results(setup.agent.fmt, last)[-2:]
    said = LINES_SAID.search(preview)
    assert said is not None
    assert big_output("y").splitlines()[int(said.group(1)) - 1] in got  # it read the lines
    assert readbacks_counted(setup) == {("spill_file", "budget", tool): 1}
    # The ledger prices it: one read-back of the session, its tokens and dollars, taken
    # off the saving.
    (session,) = sessions(setup)
    assert wait_for(
        lambda: (
            httpx.get(f"{setup.url}/sessions/{quote(session, safe='')}")
            .json()
            .get("readbacks", {})
            .get("count")
            == 1
        )
    )
    ledger = httpx.get(f"{setup.url}/sessions/{quote(session, safe='')}").json()
    priced = ledger["readbacks"]
    assert priced["tokens"] > 0 and priced["dollars"] > 0, ledger
    assert ledger["effective_saved_dollars"] == pytest.approx(
        ledger["saved_dollars"] - priced["dollars"], abs=2e-6
    )
    assert readbacks_shown(setup) == [("spill_file", "budget", tool)]


#: What an agent's resumed session sends that its provider refuses, and the repair it
#: gets: Gemini CLI 0.61 sends every old tool response twice.
RESUME_BREAKS = {"gemini": "duplicate_result_dropped"}


def wait_until_billed(url: str, answers: int) -> dict[str, Any]:
    """The proxy's ledger total once it holds ``answers`` answers (or after 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        total: dict[str, Any] = httpx.get(url + "/sessions").json()["total"]
        if total["requests"] >= answers or time.monotonic() > deadline:
            return total
        time.sleep(0.05)


#: Where each agent's session id is found (middleware.conversations.keys).
SESSION_FROM = {
    "claude": "x-claude-code-session-id",
    "codex": "session-id",
    "opencode": "x-session-id",
    "opencode-openai": "session-id",
    "gemini": "call_ids",
}
#: Where a session is found for a request sent before the model's first reply, if
#: elsewhere: Gemini CLI's first request waits for the conversation that follows it.
BEFORE_REPLY = {"gemini": "joined"}


def test_two_sessions_at_once_in_one_folder_stay_apart(setup: Setup) -> None:
    """The same prompt in the same folder at the same time (what made two ``codex exec``
    runs one proxy session): two sessions, each known by the agent's own id, each with
    its own workspace, and ending one leaves the other's files."""
    stores = [setup.prepared(setup.project.parent / f"store-{n}") for n in (1, 2)]
    one, two = (setup.start(RUN_BIG, env=env) for env in stores)
    for run in (one, two):
        assert run.wait().returncode == 0, run.explain()
    assert len(sessions(setup)) == 2, sessions(setup)
    found = {line["session_from"] for line in setup.cleaned()}
    found.discard(BEFORE_REPLY.get(setup.agent.name, ""))
    assert found == {SESSION_FROM[setup.agent.name]}
    held = workspaces(setup)
    assert len(held) == 2  # one workspace each
    assert all(big_output("y").rstrip("\n") in text for text in held.values())
    previews = [read_back(setup, bodies=[body]) for body in last_bodies(setup)]
    assert len({named_file(p).parent.parent for p in previews}) == 2
    ending = sorted(sessions(setup))[0]
    ended = httpx.delete(f"{setup.url}/sessions/{quote(ending, safe='')}")
    assert ended.status_code == 200 and ended.json()["removed"] is True
    assert list(workspaces(setup)) == [
        setup.spill / session_folder_name(sorted(sessions(setup))[1])
    ]


#: The header each agent names its session in.
SESSION_HEADER = {**SESSION_FROM, "opencode": "x-session-id"}


def last_bodies(setup: Setup) -> list[dict[str, Any]]:
    """The last request of each session, as the provider received it, found by the
    session header the agent sent (which the proxy passes on); the proxy's sessions are
    those ids."""
    last: dict[str, dict[str, Any]] = {}
    header = SESSION_HEADER[setup.agent.name]
    for _, headers, body in setup.provider.accepted:
        if body.get("tools"):
            last[headers[header] if header != "call_ids" else first_call_id(body)] = body
    if header == "call_ids":  # known by its first reply's calls (not yet in the first request)
        last.pop("", None)
        assert len(last) == len(sessions(setup))
    else:
        assert set(last) == sessions(setup)
    return list(last.values())


def first_call_id(body: dict[str, Any]) -> str:
    """The id of a Gemini request's first call ("" before the model made one)."""
    parts = (p for c in body.get("contents", []) for p in c.get("parts", []))
    return next((p["functionCall"].get("id", "") for p in parts if "functionCall" in p), "")


#: How each agent answers, on resume, a tool call it was killed in the middle of (the
#: pinned versions all do: Claude Code and Gemini CLI drop the call from their record,
#: Codex CLI and opencode send a result saying it was cut short).
OWN_ANSWER = {
    "claude": None,
    "codex": "aborted",
    "opencode": "[Tool execution was interrupted]",
    "gemini": None,
}


@each_agent_not_covered_elsewhere()
def test_an_interrupted_tool_call_is_repaired_on_the_next_request(setup: Setup) -> None:
    """The agent is killed while its tool runs, then resumed. The request it sends next
    goes through: answered once (by the agent's own record, which the proxy leaves as it
    is) and never twice; and that request as an agent without such a record sends it (the
    agent's answer taken out) is repaired by the proxy, where the provider refuses it."""
    marker = setup.project / "started"
    run = setup.start(f"{SLEEP} Use marker {marker}")
    assert wait_for_file(marker), run.explain()
    run.kill()  # mid-tool: the call has no result in the agent's record
    before = len(setup.provider.accepted)
    setup.run(GO_ON, resume=True)
    resumed = [
        (path, headers, body)
        for path, headers, body in setup.provider.accepted[before:]
        if body.get("tools")
    ]
    assert resumed, "the resumed session sent nothing"
    assert all(line["repairs"] == 0 for line in setup.cleaned())  # nothing to repair
    path, headers, sent = resumed[0]
    own = OWN_ANSWER[setup.agent.name]
    seen = events(setup.agent.fmt, sent)
    calls = [e for e in seen if e.kind == "call"]
    answers = [e for e in seen if e.kind == "result"]
    if own is None:  # dropped from the record: no call, no result
        assert not calls and not answers
        # A request whose call has its result, as the agent sends it, to take it out of.
        setup.run(RUN_BIG)
        path, headers, sent = next(
            (path, headers, body)
            for path, headers, body in reversed(setup.provider.accepted)
            if body.get("tools") and results(setup.agent.fmt, body)
        )
    else:
        assert len(calls) == 1 and [a.text for a in answers] == [own]

    # The same request without the agent's own answer: what agents without one send.
    broken = without_results(setup.agent.fmt, sent)
    forwarded = {k: v for k, v in headers.items() if k not in ("host", "content-length")}
    direct = httpx.post(setup.upstream + path, json=broken, headers=forwarded)
    assert direct.status_code == 400  # the provider's own refusal
    setup.provider.refused.clear()
    repaired = httpx.post(setup.url + path, json=broken, headers=forwarded, timeout=60)
    assert repaired.status_code == 200, repaired.text
    fixed = setup.provider.accepted[-1][2]
    assert "Tool result missing" in json.dumps(fixed)
    logged = setup.cleaned(until=lambda lines: any(line["repairs"] for line in lines))
    unanswered = sum(1 for e in events(setup.agent.fmt, sent) if e.kind == "call")
    assert [line["repairs"] for line in logged if line["repairs"]] == [unanswered]


@pytest.mark.parametrize("setup", [AGENT_BY_NAME["codex"]], indirect=True, ids=["codex"])
def test_codex_compacts_its_context_through_the_proxy_and_goes_on(setup: Setup) -> None:
    """Codex CLI past its auto-compaction limit in the middle of a turn: its request with a
    ``compaction_trigger`` as its last item goes through, the stand-in answers it with one
    ``compaction`` item, and every later request (the rest of the turn, a resumed session)
    carries that item exactly as it was issued, which the stand-in checks as OpenAI checks
    its encrypted content; the session goes on calling tools after it."""
    config = Path(setup.env["HOME"]) / ".codex" / "config.toml"
    limit = f"model_auto_compact_token_limit = {CODEX_COMPACT_AT}\n"
    config.write_text(limit + config.read_text("utf-8"), "utf-8")  # a root key: before tables
    done = setup.run(FILL)
    assert "Went on after the compaction." in done.stdout, done.explain()
    sent = [body for path, _, body in setup.provider.accepted if path == "/v1/responses"]
    asks = [i for i, body in enumerate(sent) if triggered(body)]
    assert len(asks) == 1, [[item.get("type") for item in body["input"]] for body in sent]
    ask = sent[asks[0]]["input"]
    assert ask[-1] == {"type": "compaction_trigger"}  # last, and as Codex wrote it
    (issued,) = setup.provider.compactions.values()
    after = sent[asks[0] + 1 :]
    assert after and all(compaction_items(body) == [issued] for body in after)
    # Codex went on: a call after the compaction, answered, in the same turn.
    assert any(item.get("type") == "function_call_output" for item in after[-1]["input"])

    setup.run(GO_ON, resume=True)
    resumed = [body for path, _, body in setup.provider.accepted if path == "/v1/responses"]
    assert len(resumed) > len(sent) and compaction_items(resumed[-1]) == [issued]
    # The proxy cleaned every request (none went through untouched or failed) and
    # repaired nothing: there was nothing to repair.
    lines = setup.cleaned(until=lambda lines: len(lines) >= len(resumed))
    assert len(lines) == len(resumed)
    assert all(line["status"] == 200 and line["repairs"] == 0 for line in lines)
    assert not any("untouched" in line or "error" in line for line in lines)


def compaction_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``compaction`` items of a Responses request, as sent."""
    return [item for item in body["input"] if item.get("type") == "compaction"]


def test_ci_installs_the_pinned_version_of_each_agent() -> None:
    """`.ci/run` installs the versions the scenarios and tests/recorded/ were made with, and
    an agent installed here is that version."""
    script = (REPO / ".ci" / "run").read_text("utf-8")
    for name, version in PINNED.items():
        assert f"{NPM_PACKAGES[name]}@{version}" in script
        manifest = AGENTS / "node_modules" / NPM_PACKAGES[name] / "package.json"
        if manifest.exists() and binary(name) == AGENTS / "node_modules" / ".bin" / name:
            assert json.loads(manifest.read_text("utf-8"))["version"] == version


def test_gemini_cli_runs_with_the_documented_variables_alone(tmp_path: Path) -> None:
    """docs/proxy.md's Gemini CLI line sets what a headless run needs
    (``GEMINI_CLI_TRUST_WORKSPACE=true``: without it ``gemini -p`` exits 55, "not trusted
    directory"), and the scenarios above run the CLI with the variables it sets and none
    of their own but the key and a clean environment."""
    said = documented_variables("Gemini CLI", "gemini")
    assert said.get("GEMINI_CLI_TRUST_WORKSPACE") == "true"
    home, project = tmp_path / "home", tmp_path / "project"
    env = AGENT_BY_NAME["gemini"].configure(home, project, "http://127.0.0.1:1")
    assert set(env) - set(base_env(home)) == set(said)
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:1"


GEMINI = pytest.mark.parametrize("setup", [AGENT_BY_NAME["gemini"]], indirect=True, ids=["gemini"])


def routed_runs(setup: Setup, prompt: str, runs: int = 1, *, resume: bool = False) -> None:
    """``runs`` Gemini CLI runs of ``prompt`` at once on the CLI's default model, whose
    router the scripted model answers (a call without tools before each prompt)."""
    setup.provider.script = routed(scripted(setup.agent.tools, setup.agent.fmt))
    started = [
        Run(gemini_routed_argv(prompt, resume), setup.project, setup.env).start()
        for _ in range(runs)
    ]
    setup.started += started
    for run in started:
        assert run.wait().returncode == 0, run.explain()


def listed(setup: Setup) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The sessions ``/sessions`` and the console list, once every request the stand-in
    answered is billed."""
    wait_until_billed(setup.url, len(setup.provider.accepted))
    ledger = httpx.get(setup.url + "/sessions").json()["sessions"]
    return ledger, httpx.get(setup.url + "/ui/api/sessions").json()["sessions"]


@GEMINI
def test_one_gemini_cli_run_is_one_session_with_its_router_calls(setup: Setup) -> None:
    """Gemini CLI names no session: its router calls (no tools, a small model) and the
    request that opens its conversation (before the model's first reply) are filed under
    the conversation its next requests name, and so are the router calls of a resumed
    run (the conversation's history, for a prompt of its own)."""
    routed_runs(setup, RUN_BIG)
    routed_runs(setup, READ_AGAIN, resume=True)
    sent = [body for _, _, body in setup.provider.accepted]
    asked_router = [body for body in sent if not body.get("tools")]
    assert len(asked_router) == 2 and len(sent) == 7  # a router call for each prompt
    ledger, console = listed(setup)
    assert [(s["session"], s["requests"]) for s in ledger] == [(ledger[0]["session"], 7)]
    assert [(s["session"], s["requests"], s["agent"]) for s in console] == [
        (ledger[0]["session"], 7, "Gemini CLI")
    ]
    assert {line["session"] for line in setup.cleaned()} == {ledger[0]["session"]}


@GEMINI
def test_two_gemini_cli_runs_at_once_are_two_sessions(setup: Setup) -> None:
    """Two runs of one prompt in one folder at once send alike router calls and opening
    requests: each conversation takes one opening request (and the router calls before
    it), so each run is one session."""
    routed_runs(setup, RUN_BIG, runs=2)
    sent = setup.provider.accepted
    assert len(sent) == 8 and sum(1 for _, _, body in sent if not body.get("tools")) == 2
    ledger, console = listed(setup)
    assert len(ledger) == 2 and sum(s["requests"] for s in ledger) == 8
    assert all(s["requests"] >= 3 for s in ledger)  # an opening request and two more each
    assert {s["session"]: s["requests"] for s in console} == {
        s["session"]: s["requests"] for s in ledger
    }
