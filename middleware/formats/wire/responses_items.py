"""OpenAI Responses items: which ones the client answers, and with what.

The one table of the Responses API's tool-call pairs (:data:`PAIRS`), read by the codec (what
becomes a tool call or a tool result in the view), by the pairing repair (which output
answers which call, and the output item written for a missing one) and by
``check_history`` (which outputs each call needs). Items the server executes itself
(``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
``image_generation_call``, ``mcp_call``, ``program``, a server-side ``tool_search_call``)
have no client output and are never paired.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: A 1x1 transparent PNG: the only thing a ``computer_call_output`` can carry is a
#: screenshot, so this stands in for the one a missing output would have had.
BLANK_SCREENSHOT = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@dataclass(frozen=True)
class CallItem:
    """A call item the client executes."""

    #: Key of the tool name, or ``None`` when the item type names the tool (``tool``).
    name_key: str | None
    tool: str
    #: Key of the arguments as the view's ``ToolCall.arguments`` carries them.
    arguments_key: str


@dataclass(frozen=True)
class OutputItem:
    """An output item the client sends back for a call."""

    #: Keys that may hold the call id, the first present wins (``local_shell_call_output``
    #: names its call in ``id``).
    id_keys: tuple[str, ...]
    #: Key of text content steps may rewrite (a string or content parts), or ``None`` when
    #: the output is structured data no step looks into (shell chunks, a screenshot, tools).
    text_key: str | None
    #: The item that stands in for a missing output: ``(call_id, text) -> item``.
    synthetic: Callable[[str, str], dict[str, Any]]
    #: ``(key, value)`` an item's field must have to count as a failure (``is_error``).
    failed: tuple[str, str] | None = None


CALLS: dict[str, CallItem] = {
    "function_call": CallItem("name", "function", "arguments"),
    "custom_tool_call": CallItem("name", "custom", "input"),
    "local_shell_call": CallItem(None, "local_shell", "action"),
    "shell_call": CallItem(None, "shell", "action"),
    "apply_patch_call": CallItem(None, "apply_patch", "operation"),
    "computer_call": CallItem(None, "computer", "action"),
    "tool_search_call": CallItem(None, "tool_search", "arguments"),
}

OUTPUTS: dict[str, OutputItem] = {
    "function_call_output": OutputItem(
        ("call_id",),
        "output",
        lambda call_id, text: {"type": "function_call_output", "call_id": call_id, "output": text},
    ),
    "custom_tool_call_output": OutputItem(
        ("call_id",),
        "output",
        lambda call_id, text: {
            "type": "custom_tool_call_output",
            "call_id": call_id,
            "output": text,
        },
    ),
    "local_shell_call_output": OutputItem(
        ("call_id", "id"),
        "output",
        lambda call_id, text: {"type": "local_shell_call_output", "id": call_id, "output": text},
    ),
    "shell_call_output": OutputItem(
        ("call_id",),
        None,
        lambda call_id, text: {
            "type": "shell_call_output",
            "call_id": call_id,
            "output": [{"stdout": "", "stderr": text, "outcome": {"type": "exit", "exit_code": 1}}],
        },
    ),
    "apply_patch_call_output": OutputItem(
        ("call_id",),
        "output",
        lambda call_id, text: {
            "type": "apply_patch_call_output",
            "call_id": call_id,
            "status": "failed",
            "output": text,
        },
        failed=("status", "failed"),
    ),
    "computer_call_output": OutputItem(
        ("call_id",),
        None,
        lambda call_id, text: {
            "type": "computer_call_output",
            "call_id": call_id,
            "output": {"type": "computer_screenshot", "image_url": BLANK_SCREENSHOT},
        },
    ),
    "tool_search_output": OutputItem(
        ("call_id",),
        None,
        lambda call_id, text: {
            "type": "tool_search_output",
            "call_id": call_id,
            "execution": "client",
            "status": "completed",
            "tools": [],
        },
    ),
}

#: Which output answers which call: one row per pair. The first row of a call type names
#: the output written for a missing one. Codex CLI answers a ``local_shell_call`` with a
#: ``function_call_output``; that pair is accepted too.
PAIRS: tuple[tuple[str, str], ...] = (
    ("function_call", "function_call_output"),
    ("custom_tool_call", "custom_tool_call_output"),
    ("local_shell_call", "local_shell_call_output"),
    ("local_shell_call", "function_call_output"),
    ("shell_call", "shell_call_output"),
    ("apply_patch_call", "apply_patch_call_output"),
    ("computer_call", "computer_call_output"),
    ("tool_search_call", "tool_search_output"),
)

#: Items with these types and field values run on the server: neither calls nor outputs.
_SERVER_SIDE = {
    "tool_search_call": ("execution", "client"),
    "tool_search_output": ("execution", "client"),
}

#: Items the model produces besides calls and assistant messages (one model turn while
#: consecutive). Unknown types ending in ``_call`` count as model items too.
MODEL_ITEMS = frozenset(
    {
        "reasoning",
        "compaction",
        "mcp_list_tools",
        "mcp_approval_request",
        "program",
        "program_output",
    }
)

_ANSWERS: dict[str, frozenset[str]] = {
    output: frozenset(call for call, out in PAIRS if out == output) for _, output in PAIRS
}
_SYNTHETIC: dict[str, str] = {}
for _call, _output in PAIRS:
    _SYNTHETIC.setdefault(_call, _output)


def _client(item: dict[str, Any], kind: str) -> bool:
    rule = _SERVER_SIDE.get(kind)
    return rule is None or item.get(rule[0]) == rule[1]


def item_type(item: dict[str, Any]) -> str:
    """The item's type (``message`` for an item with a role and no type)."""
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    return "message" if "role" in item else ""


def call_item(item: dict[str, Any]) -> CallItem | None:
    """The call spec of a client-executed call item, else ``None``."""
    kind = item_type(item)
    spec = CALLS.get(kind)
    return spec if spec is not None and _client(item, kind) else None


def output_item(item: dict[str, Any]) -> OutputItem | None:
    """The output spec of a client output item, else ``None``."""
    kind = item_type(item)
    spec = OUTPUTS.get(kind)
    return spec if spec is not None and _client(item, kind) else None


def output_call_id(item: dict[str, Any], spec: OutputItem) -> Any:
    """The call id an output item carries (``None`` when it has none)."""
    return next((item[key] for key in spec.id_keys if key in item), None)


def answers(output_type: str, call_type: str) -> bool:
    """Whether an output item of ``output_type`` answers a call item of ``call_type``."""
    return call_type in _ANSWERS.get(output_type, ())


def synthetic_output(call_type: str) -> str:
    """The output item type written for a missing output of ``call_type``."""
    return _SYNTHETIC[call_type]


def is_model_item(item: dict[str, Any]) -> bool:
    """Items the model produced: consecutive ones form one model turn."""
    kind = item_type(item)
    if kind == "message":
        return item.get("role") == "assistant"
    if kind in OUTPUTS:
        return not _client(item, kind)  # a server-side tool search's output
    return kind in MODEL_ITEMS or kind.endswith("_call")


def words(kind: str) -> str:
    """``function call output`` for ``function_call_output``, as the API's errors say it."""
    return kind.replace("_", " ")
