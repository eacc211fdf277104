"""An example tool plugin: the agent's SQL tools declare their result caps
("TruncationAware"), and query results get a content type of their own for the one-line
summaries of old results."""

from __future__ import annotations

from middleware import ToolCap, hookimpl

#: sql_query returns result tables the model needs to see whole up to a point;
#: sql_schema is small and structural; sql_explain plans are never cut.
CAPS = {
    "sql_query": ToolCap(max_chars=40_000),
    "sql_schema": ToolCap(),  # opt in with the per-tool default
    "sql_explain": ToolCap(exempt=True),
}


@hookimpl
def tool_result_cap(tool_name: str) -> ToolCap | None:
    return CAPS.get(tool_name)


@hookimpl
def detect_content_type(text: str, tool_name: str | None) -> str | None:
    if tool_name == "sql_query" and text.lstrip().startswith("|"):
        return "SQL result table"
    return None
