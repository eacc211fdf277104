"""Hook specifications: the contract between the host and every plugin, built-in or not.

The three *step* hooks are called by the host in a fixed order, whatever order plugins were
registered in: each declares its place (:func:`~middleware.plugin.places.step`), so
:func:`repair_pairing` runs first, :func:`enforce_budget` after repair and
:func:`microcompact` last; :func:`admit_outputs` runs at dispatch, outside a request. The
other hooks are *capabilities* the steps ask for (a tool's result cap, content types, the
spill store, what compaction promises the budget step) and notifications; those whose
third-party implementations decide what old turns become say so
(:func:`~middleware.plugin.places.decides_old_turns`). The built-in steps are plugins like
any other: they reach each other only through these hooks, so blocking one
(``CHATCLI_BLOCK_PLUGINS``) leaves the others keeping their own guarantees.

Implement a hook with the :data:`middleware.hookimpl` marker, in a module or class that you
register through the ``chatcli_middleware`` entry-point group::

    from middleware import ToolCap, hookimpl

    @hookimpl
    def tool_result_cap(tool_name):
        if tool_name == "sql_query":
            return ToolCap(max_chars=40_000)
        return None

Every implementation runs isolated: if it raises (``sys.exit()`` included), returns a wrong
type, leaves edits that cannot be written back, or takes longer than the policy's
``plugins.time_limit_seconds``, the host logs a :class:`~middleware.errors.PluginError`
naming the plugin and the hook, reports it, and goes on with the default behaviour; the
request is still processed (docs/plugins.md, "How the host calls plugins").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

from middleware.plugin.places import Place, decides_old_turns, step
from middleware.report import Step

if TYPE_CHECKING:
    from middleware.plugin.admission import Cap
    from middleware.plugin.capabilities import FileAccess, SpillStore, ToolCap
    from middleware.plugin.context import StepContext
    from middleware.policy import Policy
    from middleware.report import LoopAlert
    from middleware.view import Conversation, ConversationIndex

PROJECT_NAME = "chatcli_middleware"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)


# -- the three steps, in the order the host calls them, and admission ------------------


@hookspec
@step(Step.PAIRING, Place.FIRST)
def repair_pairing(conversation: Conversation, context: StepContext) -> None:
    """Step 1: make every tool call answered by exactly one result.

    Called first on every ``process()``. Edit ``conversation`` in place through its edit
    methods and record what was done with ``context.record(...)``.

    :param conversation: the mutable view of the history being processed.
    :param context: the policy snapshot of this call, the codec of the wire format, the
        capability hooks and the report recorder.
    """


@hookspec
@step(Step.BUDGET, Place.AFTER_REPAIR)
@decides_old_turns
def enforce_budget(conversation: Conversation, context: StepContext) -> None:
    """Step 2: bound the size of tool results (per tool, per result, per turn).

    Called after every ``repair_pairing`` implementation, so results are paired.

    :param conversation: the mutable view, after pairing repair.
    :param context: as for :func:`repair_pairing`.
    """


@hookspec
@step(Step.MICROCOMPACT, Place.LAST)
@decides_old_turns
def microcompact(conversation: Conversation, context: StepContext) -> None:
    """Step 3: shrink old tool results by age.

    Called last, after every ``enforce_budget`` implementation.

    :param conversation: the mutable view, after budget enforcement.
    :param context: as for :func:`repair_pairing`.
    """


@hookspec
@step(Step.BUDGET, Place.DISPATCH)
def admit_outputs(
    conversation: Conversation, parallel_calls: int, context_chars: int | None, context: StepContext
) -> None:
    """Bound tool outputs at dispatch time, before they enter the history, as
    :func:`enforce_budget` would bound them in a request (``Pipeline.admit`` and
    ``admit_batch``).

    ``conversation`` holds one assistant message making the calls dispatched together and
    one message answering them, the outputs as results: edit it in place. What is left is
    each call's admitted result, frozen for its id (when the result comes back in a
    request, the budget step leaves it as admitted). The built-in budget step implements
    it; with that step blocked, nothing bounds the outputs.

    :param parallel_calls: the calls dispatched together (the even share of the turn budget).
    :param context_chars: characters of history before them (``None``: unknown, and the
        context-aware ceilings do not apply).
    :param context: as for :func:`repair_pairing`; no wire format is known yet, so
        ``context.codec`` is that of ``conversation`` (Anthropic's, whose rules, such as
        an empty result needing text, every format accepts).
    """


# -- capabilities ---------------------------------------------------------------------


@hookspec(firstresult=True)
@decides_old_turns
def tool_result_cap(tool_name: str) -> ToolCap | None:
    """Declare the result cap of a tool ("TruncationAware").

    Return a :class:`~middleware.ToolCap`: ``ToolCap(max_chars=N)`` for a cap of its own,
    ``ToolCap()`` to opt in with the per-tool default, ``ToolCap(exempt=True)`` to be never
    cut (a tool that reads spilled files, which would otherwise loop). Return ``None`` for
    tools the plugin does not know. The first non-``None`` answer wins (plugins registered
    later are asked first); the policy's per-tool settings win over every plugin.

    :param tool_name: the tool's name as it appears in the tool call.
    """


@hookspec(firstresult=True)
@decides_old_turns
def tool_file_access(tool_name: str) -> FileAccess | None:
    """Declare that a tool reads, writes or edits files, and which argument names the file
    (or holds the shell command line, or the patch, that does).

    Return a :class:`~middleware.FileAccess`: ``FileAccess("read", ("file_path",),
    ("offset", "limit"))`` for a tool whose results are a file's text,
    ``FileAccess("shell", command_arguments=("cmd",), workdir_arguments=("workdir",))``
    for a shell tool (a command that prints a file is a read of it). Microcompaction
    keeps a read whole in its protected window (``microcompact.reads``) until the same
    file (or part) is read again or the file is written, and a cut or compacted read tells
    the model to read the file again with the tool (a shell read: the command) before
    acting on it. Return ``None`` for tools the plugin does not know; the first
    non-``None`` answer wins (plugins registered later are asked first). The built-in
    ``agent_tools`` plugin declares Claude Code's, Codex CLI's, opencode's and Gemini
    CLI's tools, and the text-protocol agents' commands.

    :param tool_name: the tool's name as it appears in the tool call.
    """


@hookspec(firstresult=True)
def result_cap(
    tool_name: str, parallel_calls: int, context_chars: int | None, context: StepContext
) -> Cap | None:
    """The cap one result of ``tool_name`` keeps when ``parallel_calls`` calls run together
    after ``context_chars`` characters of history (``None``: unknown), and where it comes
    from: what ``Pipeline.result_budget`` tells a tool so it can trim at a meaningful
    boundary itself. The budget step answers; with it blocked nothing bounds results, and
    the pipeline says so. The first non-``None`` answer wins.

    :param context: the policy snapshot (``context.policy``) and the capability hooks.
    """


@hookspec
def loop_alerts(conversation: Conversation, policy: Policy) -> list[LoopAlert]:
    """Alerts for tool calls the model keeps repeating in its current turn, after the
    three steps. An implementation may add a notice to the history (each alert says
    whether it did) or raise :class:`~middleware.errors.LoopGuardError` to end the turn,
    as its policy says; any other failure is reported and its edits rolled back. The
    built-in loop guard (``loop_guard`` in the policy) answers.
    """
    raise NotImplementedError  # a specification: the implementations answer


@hookspec(firstresult=True)
@decides_old_turns
def detect_content_type(text: str, tool_name: str | None) -> str | None:
    """Name the kind of content of a tool result (``"JSON"``, ``"diff"``, ...) for
    one-line summaries of old results. Return ``None`` to let other plugins decide.

    :param text: the full text of the result.
    :param tool_name: the tool that produced it, when known.
    """


@hookspec(firstresult=True)
@decides_old_turns
def summarize_result(text: str, tool_name: str | None, content_type: str, path: str) -> str | None:
    """Write the short text that replaces an old tool result when microcompaction
    summarises it. Return ``None`` to use the policy's ``summary_template``.

    If the returned text does not name ``path``, the host appends
    ``\nFull output: <path>`` so the full text stays reachable.

    :param text: the full text of the result.
    :param tool_name: the tool that produced it, when known.
    :param content_type: what ``detect_content_type`` (or the built-in rules) called it.
    :param path: where the full text is saved.
    """


@hookspec(firstresult=True)
@decides_old_turns
def compact_before_spill(
    index: ConversationIndex, before_turn: int, context: StepContext
) -> int | None:
    """Promise to compact, later in this ``process()`` call, the old results of turns
    before ``before_turn``, and return how many characters that will take off the history.

    The budget step asks when the context is tight (``budget.context_aware`` with
    ``compact_before_spill``) and a result of a later turn would be cut: it counts the
    history as that much smaller, so the new result keeps more of its text (Hermes). It
    relies on the promise, so keep it in your ``microcompact`` implementation: hand it
    the work in ``context.shared``, under a key of your own (the same dictionary is
    given to every step of the call). Return ``None`` to promise nothing. When no plugin
    answers (the microcompaction step blocked), the budget step counts the history as it
    is and its caps hold on their own. The first answer that is not ``None`` wins.

    :param index: ``conversation.index()`` of the history the budget step works on.
    :param before_turn: results of earlier turns may be compacted (those of the turns
        from ``before_turn`` on are kept as they are).
    :param context: the budget step's context (the policy snapshot, the spill store, the
        call's shared state).
    :returns: the characters the compaction will remove (an ``int`` of at least 0).
    """


@hookspec(firstresult=True)
def spill_store(policy: Policy, session_id: str) -> SpillStore | None:
    """Provide the store that keeps the full text of results cut from the context.

    Called once per pipeline. Return ``None`` to use the default per-session folder.

    :param policy: the policy in effect when the pipeline was created.
    :param session_id: the pipeline's session id (names the workspace).
    """


@hookspec(firstresult=True)
def count_tokens(text: str) -> int | None:
    """Count the tokens of ``text`` with a real tokenizer, for ``chatcli-mw simulate`` and
    the cost benchmarks. Return ``None`` to fall back to characters / 4. An implementation
    that fails is reported once per plugin; characters / 4 count for the texts it fails on.

    :param text: a serialised request, or a prefix of one.
    """


@hookspec
def policy_reloaded(old: Policy, new: Policy) -> None:
    """Called after a hot reload swapped the policy snapshot (not for rejected edits).

    :param old: the snapshot that was in effect.
    :param new: the snapshot now in effect.
    """
