"""ChatCLI's built-in tools declare their result caps ("TruncationAware").

Its ``read`` tool is the main surface for learning code, so a low cap blinds the model;
``search`` returns broad ``file:line:match`` lists; ``tree`` listings of monorepos easily
exceed the per-tool default. A policy's ``tools:`` section overrides any of these.
"""

from __future__ import annotations

from middleware.plugin.capabilities import ToolCap
from middleware.plugin.markers import hookimpl

CHATCLI_TOOL_CAPS: dict[str, int] = {
    "read": 80_000,
    "search": 60_000,
    "tree": 50_000,
    "docs-flatten": 50_000,
}


@hookimpl(trylast=True)
def tool_result_cap(tool_name: str) -> ToolCap | None:
    chars = CHATCLI_TOOL_CAPS.get(tool_name.removeprefix("@"))
    return None if chars is None else ToolCap(max_chars=chars)
