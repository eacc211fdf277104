"""chatcli-middleware: clean an LLM agent's conversation history before each model call.

::

    import middleware
    pipe = middleware.Pipeline.from_policy(None)   # the embedded default policy
    result = pipe.process(messages, format="auto")
    result.messages                                # a new list in the same wire format
    result.report                                  # what each step did (JSON-serialisable)
"""

from __future__ import annotations

from .__about__ import __version__
from .admission import Admission, ToolOutput
from .capabilities import DeclaredCap, SpillStore, ToolCap
from .decisions import Decision, DecisionLedger
from .errors import (
    FormatError,
    HistoryError,
    LoopGuardError,
    MiddlewareError,
    PluginError,
    PolicyError,
)
from .formats import detect_format
from .loop_guard import LoopAlert
from .markers import hookimpl
from .pipeline import Pipeline, ProcessResult
from .policy import Policy, load_policy, validate_policy_file
from .report import Action, ProblemReport, Report
from .resources import preset_names
from .validate import Violation, validate

__all__ = [
    "Action",
    "Admission",
    "Decision",
    "DecisionLedger",
    "DeclaredCap",
    "FormatError",
    "HistoryError",
    "LoopAlert",
    "LoopGuardError",
    "MiddlewareError",
    "Pipeline",
    "PluginError",
    "Policy",
    "PolicyError",
    "ProblemReport",
    "ProcessResult",
    "Report",
    "SpillStore",
    "ToolCap",
    "ToolOutput",
    "Violation",
    "__version__",
    "detect_format",
    "hookimpl",
    "load_policy",
    "preset_names",
    "validate",
    "validate_policy_file",
]
