"""The real agent CLIs through ``chatcli-mw serve``: where each is installed, how it is
pointed at the proxy (exactly as docs/proxy.md says), started and resumed, and which tools
the scripted model (:mod:`agent_script`) calls in each. A run of one is :mod:`agent_runs`;
what its requests say, :mod:`agent_events`.

`.ci/run` installs the pinned npm packages into .cache/agents; a test of an agent that is
not installed skips and says how to install it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_runs import base_env
from agent_script import Tools
from locations import REPO
from stand_in import Call

#: Where `.ci/run` installs the agents (npm --prefix).
AGENTS = REPO / ".cache" / "agents"
#: The pinned versions `.ci/run` installs (the recorded requests in tests/recorded/ are
#: theirs).
PINNED = {"claude": "2.1.197", "codex": "0.171.0", "opencode": "1.18.33", "gemini": "0.61.0"}
NPM_PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "opencode": "opencode-ai",
    "gemini": "@google/gemini-cli",
}


def binary(name: str) -> Path:
    """The installed CLI ``name`` (``claude``, ``codex``, ``opencode``); the environment
    variable ``CHATCLI_TEST_<NAME>`` names another binary."""
    return Path(
        os.environ.get(f"CHATCLI_TEST_{name.upper()}", AGENTS / "node_modules" / ".bin" / name)
    )


def missing(name: str) -> str | None:
    """Why the agent ``name`` cannot run here, or ``None``."""
    path = binary(name)
    if not path.exists():
        return (
            f"{name} is not installed at {path}: npm install --prefix .cache/agents "
            f"{NPM_PACKAGES[name]}@{PINNED[name]} (.ci/run does)"
        )
    return None


# -- the agents, set up as docs/proxy.md says ----------------------------------------------


@dataclass(frozen=True)
class Agent:
    """One agent CLI: the wire format it speaks, its tools, how it is pointed at the proxy
    and how it is started and resumed."""

    #: The scenario's name: the CLI, and the provider when it can talk to several.
    name: str
    #: The CLI (``claude``, ``codex``, ``opencode``).
    cli: str
    fmt: str
    tools: Tools
    configure: Callable[[Path, Path, str], dict[str, str]]
    argv: Callable[[str, bool], list[str]]
    #: A command that sets up the agent's own state once (a user's first run does), so
    #: that two sessions started at once do not race to create it.
    prepare: tuple[str, ...] = ()
    #: The variable that moves the agent's own session store, for an agent whose store
    #: two runs at once cannot share: opencode's SQLite database fails the second writer
    #: with "database is locked" (anomalyco/opencode#33320, #47566), and the workaround
    #: its users run is a store per run.
    store_env: str | None = None

    @property
    def version(self) -> str:
        return PINNED[self.cli]


def _claude_env(home: Path, project: Path, url: str) -> dict[str, str]:
    """Claude Code's environment as docs/proxy.md sets it (``ANTHROPIC_BASE_URL``)."""
    said = re.search(r"ANTHROPIC_BASE_URL=(\S+) claude", documented("Claude Code", "sh"))
    assert said is not None, "docs/proxy.md no longer says how to point Claude Code"
    return {
        **base_env(home),
        "ANTHROPIC_BASE_URL": said.group(1).replace(DOCUMENTED_URL, url),
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "IS_SANDBOX": "1",  # root may skip permission prompts in a sandbox
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def _claude_argv(prompt: str, resume: bool) -> list[str]:
    return [
        str(binary("claude")),
        *(["-c"] if resume else []),
        "-p",
        prompt,
        "--dangerously-skip-permissions",
        "--model",
        "claude-stand-in",
        "--output-format",
        "text",
    ]


#: Where the setups the tests run are written for users.
PROXY_DOCS = REPO / "docs" / "proxy.md"
#: The address the setups in docs/proxy.md name (the default of ``chatcli-mw serve``).
DOCUMENTED_URL = "http://127.0.0.1:8787"


def documented(heading: str, language: str) -> str:
    """The first ``language`` code block after ``### heading`` in docs/proxy.md: the
    tests configure each agent with exactly what users are told to write."""
    text = PROXY_DOCS.read_text("utf-8")
    section = text.split(f"\n### {heading}\n", 1)[1]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def _codex_env(home: Path, project: Path, url: str) -> dict[str, str]:
    """``~/.codex/config.toml`` with the proxy as a model provider, as docs/proxy.md says
    (Codex CLI 0.171 ignores ``OPENAI_BASE_URL`` for its built-in provider)."""
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    config = documented("Codex CLI", "toml").replace(DOCUMENTED_URL, url)
    (home / ".codex" / "config.toml").write_text(config, "utf-8")
    return {**base_env(home), "OPENAI_API_KEY": "sk-test"}


def codex_read(command: str, workdir: str) -> dict[str, Any]:
    """The arguments of an ``exec_command`` reading a file as Codex CLI's model gives them
    (gpt-5.5 in the rollouts of ../shared/data/trajectories/codex: 1,771 of their 2,076
    ``exec_command`` calls give these four)."""
    return {"cmd": command, "workdir": workdir, "yield_time_ms": 10000, "max_output_tokens": 40000}


def _codex_argv(prompt: str, resume: bool) -> list[str]:
    return [
        str(binary("codex")),
        "exec",
        *(["resume", "--last"] if resume else []),
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ]


def _opencode(provider: str, model: str, key: str) -> Callable[[Path, Path, str], dict[str, str]]:
    """``opencode.json`` in the project as docs/proxy.md says, using ``model`` of
    ``provider``."""

    def configure(home: Path, project: Path, url: str) -> dict[str, str]:
        config = json.loads(documented("opencode", "json").replace(DOCUMENTED_URL, url))
        config.update({"model": f"{provider}/{model}", "autoupdate": False, "share": "disabled"})
        (project / "opencode.json").write_text(json.dumps(config, indent=2), "utf-8")
        return {**base_env(home), key: "sk-test"}

    return configure


def _opencode_argv(prompt: str, resume: bool) -> list[str]:
    return [str(binary("opencode")), "run", *(["-c"] if resume else []), prompt]


def _gemini_env(home: Path, project: Path, url: str) -> dict[str, str]:
    """``~/.gemini/settings.json`` as docs/proxy.md says, with what keeps the CLI offline
    (no usage statistics to play.googleapis.com, no update checks, no IDE), and
    ``GOOGLE_GEMINI_BASE_URL``."""
    settings = json.loads(documented("Gemini CLI", "json"))
    settings.update(
        {
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "ide": {"enabled": False},
        }
    )
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings), "utf-8")
    said = documented_variables("Gemini CLI", "gemini")
    assert "GOOGLE_GEMINI_BASE_URL" in said, "docs/proxy.md no longer says how to point Gemini CLI"
    said = {name: value.replace(DOCUMENTED_URL, url) for name, value in said.items()}
    return {**base_env(home), **said, "GEMINI_API_KEY": "test-key"}


def documented_variables(heading: str, command: str) -> dict[str, str]:
    """The variables the line that runs ``command`` sets, in the first ``sh`` block after
    ``### heading`` in docs/proxy.md (a value of ``...`` is the user's to fill in)."""
    for line in documented(heading, "sh").splitlines():
        words = line.split("#", 1)[0].split()
        if command in words:
            assigned = words[: words.index(command)]
            return dict(word.split("=", 1) for word in assigned if "=" in word)
    raise AssertionError(f"docs/proxy.md's {heading} setup no longer runs {command}")


def _gemini_argv(prompt: str, resume: bool) -> list[str]:
    return [*gemini_routed_argv(prompt, resume), "-m", "gemini-2.5-pro"]


def gemini_routed_argv(prompt: str, resume: bool = False) -> list[str]:
    """Gemini CLI as a user runs it, with no ``-m``: on its default model (``auto``) it
    asks a small model first, without tools, which model each prompt needs (its model
    router), then sends the prompt to the one chosen."""
    return [
        str(binary("gemini")),
        *(["--resume", "latest"] if resume else []),
        "-p",
        prompt,
        "--yolo",
        "-o",
        "json",
    ]


GEMINI_TOOLS = Tools(
    shell=lambda command: Call("run_shell_command", {"command": command, "description": "run"}),
    read=lambda path, offset, limit: Call(
        "read_file", {"file_path": path, "start_line": offset, "end_line": offset + limit - 1}
    ),
)
OPENCODE_TOOLS = Tools(
    shell=lambda command: Call("bash", {"command": command, "description": "run"}),
    read=lambda path, offset, limit: Call(
        "read", {"filePath": path, "offset": offset, "limit": limit}
    ),
)

AGENT_LIST = (
    Agent(
        "claude",
        "claude",
        "anthropic",
        Tools(
            shell=lambda command: Call("Bash", {"command": command, "description": "run"}),
            read=lambda path, offset, limit: Call(
                "Read", {"file_path": path, "offset": offset, "limit": limit}
            ),
        ),
        _claude_env,
        _claude_argv,
    ),
    Agent(
        "codex",
        "codex",
        "responses",
        Tools(
            shell=lambda command: Call("exec_command", {"cmd": command}),
            shell_in=lambda command, workdir: Call("exec_command", codex_read(command, workdir)),
        ),
        _codex_env,
        _codex_argv,
    ),
    Agent(
        "opencode",
        "opencode",
        "anthropic",
        OPENCODE_TOOLS,
        _opencode("anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        _opencode_argv,
        prepare=("session", "list"),  # creates its database
        store_env="XDG_DATA_HOME",
    ),
    Agent(
        "opencode-openai",
        "opencode",
        "responses",
        OPENCODE_TOOLS,
        _opencode("openai", "gpt-5", "OPENAI_API_KEY"),
        _opencode_argv,
        prepare=("session", "list"),
        store_env="XDG_DATA_HOME",
    ),
    Agent(
        "gemini",
        "gemini",
        "gemini",
        GEMINI_TOOLS,
        _gemini_env,
        _gemini_argv,
    ),
)
AGENT_BY_NAME = {agent.name: agent for agent in AGENT_LIST}
