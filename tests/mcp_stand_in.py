"""A tiny MCP server over stdio (newline-delimited JSON-RPC, no SDK): ``TOOLS`` tools with
descriptions of about a kilobyte each, as an inventory server a user might add to an agent.
Every call answers "no rows". Run as ``python mcp_stand_in.py``; :func:`config` is an
agent's MCP configuration that starts it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: The server's name: its tools reach the model as ``mcp__inventory__<tool>``.
NAME = "inventory"
TOOLS = 30
#: What every call answers.
ANSWER = "no rows"


def tool(n: int) -> dict[str, Any]:
    return {
        "name": f"lookup_{n:02d}",
        "description": f"Looks up records of kind {n} in the inventory. "
        + "It returns the matching rows as JSON. " * 20,
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what to look up"}},
            "required": ["query"],
        },
    }


def config() -> dict[str, Any]:
    """``--mcp-config`` (Claude Code) starting this server with this Python."""
    command = {"type": "stdio", "command": sys.executable, "args": [str(Path(__file__))]}
    return {"mcpServers": {NAME: command}}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    if method == "initialize":
        return {
            "protocolVersion": request.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": NAME, "version": "1.0"},
        }
    if method == "tools/list":
        return {"tools": [tool(n) for n in range(TOOLS)]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": ANSWER}]}
    return {}


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" in request:  # a notification gets no answer
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
