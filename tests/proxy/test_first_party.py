"""What the agents turn off when their model requests go to a base URL of the user's own (the
proxy), and the setups in docs/proxy.md that keep it, read from the requests the real CLIs
send through ``chatcli-mw serve`` to the stand-in:

* Claude Code 2.1.197 behind any base URL but api.anthropic.com turns tool search off (the
  definition of every MCP tool goes up front, in every request) and gives a model whose
  window is 1M natively 200K. docs/proxy.md's line for an upstream that is Anthropic's API
  (``_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL=1``) keeps both, and the proxy passes what
  that turns on (the tool-search beta, deferred tools, ``tool_reference`` blocks) as it
  came, also in the requests it rewrites.
* Codex CLI 0.171 compacts with OpenAI's remote compaction only under a provider named
  ``OpenAI``; under another name it compacts locally, asking the model for a summary in a
  turn of its own.

Each test runs both setups and checks that they differ as documented, so a setup that
sends the downgraded requests fails it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_stand_in
import pytest
from agent_events import CODEX_SUMMARY, events
from agent_runs import Run, base_env
from agent_script import CODEX_COMPACT_AT, FILL, scripted
from agents import AGENT_BY_NAME, DOCUMENTED_URL, binary, documented, documented_variables, missing
from prompt_cache import PromptCache
from proxy_stack import serve_process
from servers import serving
from stand_in import Call, Provider, Reply, Script, triggered

#: Slow (seconds each): `-m "not slow"` leaves it out of a quick run.
pytestmark = pytest.mark.slow

#: The beta header Claude Code sends when tool search is on.
TOOL_SEARCH_BETA = "advanced-tool-use-2025-11-20"
#: The MCP tool the scripted model uses; the server's others are never needed.
MCP_TOOL = f"mcp__{mcp_stand_in.NAME}__lookup_03"
MCP_TOOLS = {f"mcp__{mcp_stand_in.NAME}__lookup_{n:02d}" for n in range(mcp_stand_in.TOOLS)}
#: An output over the default policy's cap: the proxy rewrites the requests that hold it.
BIG = "python3 -c \"print(('x' * 99 + '\\n') * 250, end='')\""
FINISHED = "Looked it up."
#: Claude Code's alias for its newest Opus, whose window is 1M natively (no beta header).
MODEL = "opus"
#: Where docs/proxy.md sets Claude Code up for an upstream that is Anthropic's API.
FIRST_PARTY = "Claude Code and Anthropic's API"


@dataclass
class Session:
    """One run of an agent through a ``chatcli-mw serve`` in front of the stand-in."""

    run: Run
    provider: Provider

    def requests(self, path: str) -> list[tuple[dict[str, str], dict[str, Any]]]:
        """The headers and body of each request on ``path`` the provider accepted."""
        return [(headers, body) for at, headers, body in self.provider.accepted if at == path]


@contextmanager
def through_the_proxy(
    tmp_path: Path, script: Script, overrides: dict[str, Any] | None = None
) -> Iterator[tuple[Provider, str]]:
    provider = Provider(script=script, cache=PromptCache())  # usage as billed: Codex compacts
    spill = {"spill.root": str(tmp_path / "spill"), **(overrides or {})}
    with serving(provider.app()) as upstream, serve_process(upstream, spill) as url:
        yield provider, url
    assert not provider.refused, [reason for _, reason, _ in provider.refused]


# -- Claude Code --------------------------------------------------------------------------


def claude_script(_: str, body: dict[str, Any]) -> Reply:
    """Waits for the MCP server (tool search waits for it by itself), calls :data:`MCP_TOOL`
    (searching for it first when it is deferred), runs :data:`BIG`, and answers."""
    if not body.get("tools"):
        return Reply(text="Scripted session")
    seen = events("anthropic", body)
    called = [e.name for e in seen if e.kind == "call"]
    sent = {tool.get("name") for tool in body["tools"]}
    if MCP_TOOL in called:
        if not any(e.arguments.get("command") == BIG for e in seen):
            return Reply(calls=(Call("Bash", {"command": BIG, "description": "run"}),))
        return Reply(text=FINISHED)
    if MCP_TOOL in sent:
        return Reply(calls=(Call(MCP_TOOL, {"query": "bolts"}),))
    if "ToolSearch" in sent:
        if "ToolSearch" in called:
            return Reply(text="The searched tool was never sent.")
        return Reply(calls=(Call("ToolSearch", {"query": f"select:{MCP_TOOL}", "max_results": 5}),))
    if called.count("Bash") < 100:  # the MCP server is still starting
        return Reply(calls=(Call("Bash", {"command": "sleep 0.2", "description": "wait"}),))
    return Reply(text="The MCP server never connected.")


def run_claude(tmp_path: Path, extra: dict[str, str]) -> Session:
    """Claude Code set up as docs/proxy.md says (``ANTHROPIC_BASE_URL``), with ``extra``
    variables, an MCP server and :data:`MODEL`, through the proxy (compacting on every
    turn, so that it rewrites the requests it forwards)."""
    claude = AGENT_BY_NAME["claude"]
    compacting = {
        "microcompact.schedule.rewrite_cost": 0,
        "microcompact.schedule.expected_turns_min": 0,
        "microcompact.summarize_turns": 2,
    }
    with through_the_proxy(tmp_path, claude_script, compacting) as (provider, url):
        home, project = tmp_path / "home", tmp_path / "project"
        for folder in (home, project):
            folder.mkdir(parents=True)
        servers = tmp_path / "mcp.json"
        servers.write_text(json.dumps(mcp_stand_in.config()), "utf-8")
        said = {name: value.replace(DOCUMENTED_URL, url) for name, value in extra.items()}
        env = {**claude.configure(home, project, url), **said}
        argv = [str(binary("claude")), "-p", "Look up bolts.", "--dangerously-skip-permissions",
                "--model", MODEL, "--output-format", "json", "--mcp-config", str(servers),
                "--strict-mcp-config"]  # fmt: skip
        run = Run(argv, project, env).start().wait()
    assert run.returncode == 0, run.explain()
    assert json.loads(run.stdout)["result"] == FINISHED, run.explain()
    return Session(run, provider)


def context_window(session: Session) -> int:
    """The window Claude Code says it gave the session's model (its JSON result)."""
    (_, body), *_ = session.requests("/v1/messages")
    usage: dict[str, Any] = json.loads(session.run.stdout)["modelUsage"]
    return int(usage[body["model"]]["contextWindow"])


def mcp_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in body["tools"] if tool.get("name") in MCP_TOOLS}


def tool_results(body: dict[str, Any], name: str) -> list[Any]:
    """The content of each result of a call to ``name`` in ``body``, as sent."""
    ids = {
        block["id"]
        for message in body["messages"]
        for block in blocks(message)
        if block.get("type") == "tool_use" and block.get("name") == name
    }
    return [
        block.get("content")
        for message in body["messages"]
        for block in blocks(message)
        if block.get("type") == "tool_result" and block.get("tool_use_id") in ids
    ]


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def rewritten(body: dict[str, Any]) -> bool:
    """Whether the proxy cut an output of ``body`` (it wrote the request anew)."""
    return "full output saved to" in json.dumps(body["messages"])


def test_claude_code_keeps_tool_search_and_its_1m_window_only_as_documented(
    tmp_path: Path,
) -> None:
    """With docs/proxy.md's setup for Anthropic's API, every request carries the
    tool-search beta, the MCP tools stay deferred but for the one searched (its definition
    marked ``defer_loading``, the search's result a ``tool_reference`` block that reaches the
    provider as Claude Code wrote it, in the requests the proxy rewrote too), and the model
    keeps its 1M window. With the plain setup the same session sends every MCP tool's
    definition in every request and gets a 200K window."""
    why = missing("claude")
    if why is not None:
        pytest.skip(why)
    extra = documented_variables(FIRST_PARTY, "claude")
    assert "ANTHROPIC_BASE_URL" in extra, "docs/proxy.md no longer points Claude Code at the proxy"
    kept = run_claude(tmp_path / "first-party", extra)
    plain = run_claude(tmp_path / "plain", {})

    sent = kept.requests("/v1/messages")
    assert all(TOOL_SEARCH_BETA in headers["anthropic-beta"] for headers, _ in sent)
    assert all("ToolSearch" in {tool["name"] for tool in body["tools"]} for _, body in sent)
    searched = [body for _, body in sent if tool_results(body, "ToolSearch")]
    assert searched and any(rewritten(body) for body in searched)
    reference = [{"type": "tool_reference", "tool_name": MCP_TOOL}]
    assert all(tool_results(body, "ToolSearch") == [reference] for body in searched)
    for _, body in sent:  # deferred: only the searched tool, once it was searched
        loaded = mcp_tools(body)
        assert set(loaded) == ({MCP_TOOL} if body in searched else set())
        assert all(tool.get("defer_loading") is True for tool in loaded.values())
    assert tool_results(searched[-1], MCP_TOOL)  # the deferred tool was called and answered
    assert context_window(kept) == 1_000_000

    downgraded = plain.requests("/v1/messages")
    assert not any(TOOL_SEARCH_BETA in headers["anthropic-beta"] for headers, _ in downgraded)
    bodies = [body for _, body in downgraded]
    assert not any(
        tool.get("defer_loading") or tool["name"] == "ToolSearch"
        for body in bodies
        for tool in body["tools"]
    )
    connected = [body for body in bodies if mcp_tools(body)]
    assert connected and all(set(mcp_tools(body)) == MCP_TOOLS for body in connected)
    assert any(rewritten(body) for body in connected)
    assert context_window(plain) == 200_000
    # What tool search saves: the tools' definitions in the last request of each session.
    assert len(json.dumps(sent[-1][1]["tools"])) < len(json.dumps(bodies[-1]["tools"]))


# -- Codex CLI ----------------------------------------------------------------------------

#: The start of the prompt with which Codex asks the model for a summary of the history it
#: compacts locally (a request of its own, with no tools).
LOCAL_COMPACTION = "You are performing a CONTEXT CHECKPOINT COMPACTION."


def run_codex(tmp_path: Path, provider_name: str | None = None) -> Session:
    """Codex CLI with docs/proxy.md's ``config.toml`` (its provider renamed to
    ``provider_name``) past its compaction limit and on after it."""
    codex = AGENT_BY_NAME["codex"]
    with through_the_proxy(tmp_path, scripted(codex.tools, codex.fmt)) as (provider, url):
        home, project = tmp_path / "home", tmp_path / "project"
        for folder in (home / ".codex", project):
            folder.mkdir(parents=True)
        config = documented("Codex CLI", "toml").replace(DOCUMENTED_URL, url)
        if provider_name is not None:
            config, renamed = re.subn(r'(?m)^name = "OpenAI"$', f'name = "{provider_name}"', config)
            assert renamed == 1, config
        limit = f"model_auto_compact_token_limit = {CODEX_COMPACT_AT}\n"  # a root key: first
        (home / ".codex" / "config.toml").write_text(limit + config, "utf-8")
        env = {**base_env(home), "OPENAI_API_KEY": "sk-test"}
        run = Run(codex.argv(FILL, False), project, env).start().wait()
    assert run.returncode == 0, run.explain()
    assert "Went on after the compaction." in run.stdout, run.explain()
    return Session(run, provider)


def local_compactions(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests asking the model for a summary of the history (Codex's own
    compaction), by their last input item."""
    return [
        body
        for body in bodies
        if isinstance(body.get("input"), list) and LOCAL_COMPACTION in json.dumps(body["input"][-1])
    ]


def test_codex_compacts_remotely_only_under_the_documented_provider_name(
    tmp_path: Path,
) -> None:
    """Under docs/proxy.md's provider (named ``OpenAI``) Codex compacts with OpenAI's remote
    compaction: one request ends with a ``compaction_trigger``, the later ones carry the
    ``compaction`` item, and no request asks the model for a summary. Renamed, the same
    session compacts locally: no trigger and no item, a request of its own asks the model
    for a summary and the history goes on as that summary in a user message."""
    why = missing("codex")
    if why is not None:
        pytest.skip(why)
    remote = [body for _, body in run_codex(tmp_path / "documented").requests("/v1/responses")]
    asks = [i for i, body in enumerate(remote) if triggered(body)]
    assert len(asks) == 1 and not local_compactions(remote)
    assert all(
        any(item.get("type") == "compaction" for item in body["input"])
        for body in remote[asks[0] + 1 :]
    )

    renamed = run_codex(tmp_path / "renamed", provider_name="chatcli")
    local = [body for _, body in renamed.requests("/v1/responses")]
    assert not any(triggered(body) for body in local)
    assert not any(item.get("type") == "compaction" for body in local for item in body["input"])
    (summary_request,) = local_compactions(local)
    assert not summary_request.get("tools")
    after = local[local.index(summary_request) + 1 :]
    assert after and all(CODEX_SUMMARY in json.dumps(body["input"]) for body in after)
