"""chatcli-middleware: clean an LLM agent's conversation history before each model call.

::

    import middleware
    pipe = middleware.Pipeline.from_policy(None)   # the embedded default policy
    result = pipe.process(messages, format="auto")
    result.messages                                # a new list in the same wire format
    result.report                                  # what each step did (JSON-serialisable)
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, TypeVar

from middleware.__about__ import __version__
from middleware.errors import (
    FormatError,
    HistoryError,
    InputError,
    LoopGuardError,
    MiddlewareError,
    MissingExtraError,
    PluginError,
    PolicyError,
)
from middleware.formats import detect_format
from middleware.formats.check import Violation, check_history
from middleware.pipeline import Pipeline, ProcessResult
from middleware.plugin.admission import Admission, Cap, ToolOutput
from middleware.plugin.capabilities import DeclaredCap, FileAccess, SpillStore, ToolCap
from middleware.plugin.context import StepContext
from middleware.plugin.file_use import FileUse
from middleware.plugin.host import PluginHost
from middleware.plugin.markers import hookimpl
from middleware.policy import Policy, load_policy, validate_policy_file
from middleware.policy.resources import preset_names
from middleware.report import (
    Action,
    ActionKind,
    LoopAlert,
    ProblemReport,
    Report,
    SealedBlock,
    Step,
)
from middleware.session.decisions import Decision, DecisionLedger
from middleware.spill import SpillError
from middleware.view import Conversation, ConversationIndex, Node, Opaque, ToolCall, ToolResult

if TYPE_CHECKING:
    from middleware.integrations.sdk import Cleaner

ClientT = TypeVar("ClientT")

__all__ = [
    "Action",
    "ActionKind",
    "Admission",
    "Cap",
    "Conversation",
    "ConversationIndex",
    "Decision",
    "DecisionLedger",
    "DeclaredCap",
    "FileAccess",
    "FileUse",
    "FormatError",
    "HistoryError",
    "InputError",
    "LoopAlert",
    "LoopGuardError",
    "MiddlewareError",
    "MissingExtraError",
    "Node",
    "Opaque",
    "Pipeline",
    "PluginError",
    "PluginHost",
    "Policy",
    "PolicyError",
    "ProblemReport",
    "ProcessResult",
    "Report",
    "SealedBlock",
    "SpillError",
    "SpillStore",
    "Step",
    "StepContext",
    "ToolCall",
    "ToolCap",
    "ToolOutput",
    "ToolResult",
    "Violation",
    "__version__",
    "check_history",
    "cleaner_of",
    "detect_format",
    "hookimpl",
    "load_policy",
    "preset_names",
    "validate_policy_file",
    "wrap",
]


def wrap(
    client: ClientT,
    policy: Any = None,
    session_id: str | None = None,
    *,
    recall_tool: bool = False,
    watch: bool = False,
) -> ClientT:
    """A copy of an ``anthropic``, ``openai`` or ``google-genai`` SDK client whose model
    requests have their history cleaned first, offering the model a ``recall`` tool if
    asked, its policy file watched if asked (see :func:`middleware.integrations.sdk.wrap`)."""
    from middleware.integrations.sdk import wrap as wrap_client  # noqa: PLC0415 - needs httpx

    return wrap_client(client, policy, session_id, recall_tool=recall_tool, watch=watch)


def cleaner_of(client: Any) -> Cleaner:
    """What a client :func:`wrap` returned cleans with: its ledger, its last request's
    report, its conversations (see :func:`middleware.integrations.sdk.cleaner_of`)."""
    from middleware.integrations.sdk import cleaner_of as of  # noqa: PLC0415 - as wrap()

    return of(client)


def __getattr__(name: str) -> Any:
    """Deprecated names, kept for one release."""
    if name == "validate":
        warnings.warn(
            "middleware.validate() is renamed middleware.check_history() (it checks a "
            "history's tool-call pairing; `chatcli-mw validate` checks policy files); "
            "the old name goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return check_history
    raise AttributeError(f"module 'middleware' has no attribute {name!r}")
