"""Read-backs: the moments an agent went back for what a step hid, seen live in the
request that follows (the live counterpart of ``simulate``'s forced re-reads).

Three kinds, each counted once, by the call that made it, and attributed to the step that
hid the text (``budget`` for a spilled output, ``microcompact`` for a compacted one) and
to the tool that read it back:

* ``spill_file``: a call whose arguments name a file a step saved (a ``Read`` of it, a
  ``sed -n``, ``cat``, ``head`` or ``tail`` of it in a shell tool, Gemini CLI's
  ``read_file``...). A spill file's name carries a digest of its text: only the preview
  could have told it, so naming it is going back for it;
* ``recall``: the same through the proxy's ``/recall`` URL, ``chatcli-mw recall`` or an
  integration's recall tool;
* ``reread``: a read of a file (a call of a file-reading tool, or a shell command that
  prints the file, as the plugins declare them: :class:`~middleware.FileAccess`) whose last
  earlier read the model saw cut or compacted; a write or an edit of the file in between
  (``Write``, ``Edit``, ``sed -i``, ``apply_patch``...) makes the next read a fresh one.
  Two paths name the same file as :mod:`middleware.plugin.file_paths` says.

Only the request's new part is looked at: the turns after the last one already looked at,
found from the end of the history by the ids of its calls and results. A conversation seen
for the first time (a new proxy, a state forgotten) has only its latest turn looked at, so
a restart does not count an old read-back again; the reads before it are looked for only
when a file is read again. What a step hid is searched in the last requests' actions only
when a call names a spill file or reads a file read before: a request with no new call
costs a walk over its new nodes.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from middleware.plugin.capabilities import FileAccess, call_arguments
from middleware.plugin.file_paths import file_key, same_file
from middleware.plugin.file_use import NOTHING, FileUse
from middleware.report import Action, ActionKind
from middleware.spill.layout import is_result_name
from middleware.view import Node, ToolCall, ToolResult

#: What each kind of action that hides a text saves (all keep it at ``detail["path"]``).
SAVING = frozenset(
    {ActionKind.SPILLED, ActionKind.TRUNCATED, ActionKind.SUMMARIZED, ActionKind.INPUT_CLEARED}
)
#: Those that hide a result's text (a later read of the same file is a read-back).
HIDING = frozenset({ActionKind.SPILLED, ActionKind.TRUNCATED, ActionKind.SUMMARIZED})
#: The recall tool the integrations offer (:mod:`middleware.integrations.recall`).
RECALL_TOOL = "recall"
_RECALLING = re.compile(r"/recall/|chatcli-mw\s+recall")
#: The digest in a spill file's name (:func:`.spill_file_name`), as a call names it: one
#: scan of its arguments, however long.
_DIGEST = re.compile(r"-([0-9a-f]{16})\.[a-z0-9]")
#: Entries a conversation remembers of each kind at most (the most recent).
MAX_FILES = 4096
MAX_SEEN = 512
#: Calls a conversation seen first mid-way looks back through for a file's last read.
MAX_LOOKBACK = 2000
#: Requests whose actions are kept (the last of a few conversations sharing the session).
MAX_RECENT = 4
#: Bytes an entry of each is counted for (its key, its value, the dict's share), and a
#: recent action (those the conversation's other parts do not hold any more).
ENTRY_BYTES = 200
ACTION_BYTES = 64


@dataclass(frozen=True)
class ReadBack:
    """One call that went back for hidden text: its ``kind`` (``recall``, ``spill_file``,
    ``reread``), its ``tool``, the ``step`` that hid the text, its ``call_id``, the file
    (the spill file, or the file read again) and the characters of its result as the
    request carries it (what the agent paid to bring it back)."""

    kind: str
    tool: str
    step: str
    call_id: str
    path: str | None
    result_chars: int


class ReadBackWatch:
    """What one conversation remembers to tell its read-backs: the files its steps saved
    (by name: the step, the location), the calls whose results the model saw hidden, the
    last read of each file, and the calls already looked at. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: The step that saved each file and where, by the digest its name carries.
        self._files: OrderedDict[str, tuple[str, str]] = OrderedDict()
        #: The step that hid each call's result, as the model saw it.
        self._hidden: OrderedDict[str, str] = OrderedDict()
        #: The last call that read each file, by the file's normal form (:func:`file_key`).
        self._reads: OrderedDict[str, str] = OrderedDict()
        self._seen: OrderedDict[str, None] = OrderedDict()
        #: The actions of the last requests (most recent last), searched only when a call
        #: names a spill file or reads a file read before: what the model saw hidden.
        self._recent: list[Sequence[Action]] = []
        #: The calls whose results each of them hid, and the step that did, made when
        #: first asked.
        self._recent_hidden: list[dict[str, str] | None] = []
        self._fresh = True
        #: The nodes of the first request seen that came before its new part: the reads
        #: there are looked for when a file is read again, not learnt beforehand.
        self._unread = 0

    def observe(
        self,
        nodes: Sequence[Node],
        actions: Sequence[Action],
        access: Callable[[str], FileAccess | None],
    ) -> tuple[ReadBack, ...]:
        """The read-backs newly seen in a request: ``nodes``, its history as it came
        (parsed), whose steps took ``actions``; ``access``: what a tool does with files."""
        known: dict[str, FileAccess | None] = {}

        def told(tool: str) -> FileAccess | None:
            if tool not in known:
                known[tool] = access(tool)
            return known[tool]

        with self._lock:
            start = self._new_part(nodes)
            if self._fresh:  # what came before is taken as looked at
                self._mark_seen(nodes, start)
                self._unread = start
                self._fresh = False
            new = [call for i in range(start, len(nodes)) for call in nodes[i].calls]
            found = self._detect(nodes, start, new, actions, told) if new else ()
            for call in new:
                _remember(self._seen, call.id, None, MAX_SEEN)
            # What this request hid counts for the calls made after the model saw it.
            self._recent = [*self._recent[-(MAX_RECENT - 1) :], actions]
            self._recent_hidden = [*self._recent_hidden[-(MAX_RECENT - 1) :], None]
            return found

    def spilled_by(self, name: str) -> str | None:
        """The step that saved the spill file ``name``, if this conversation saw it."""
        digest = _digest(name)
        if digest is None:
            return None
        with self._lock:
            saved = self._saved(digest, ())
        return saved[0] if saved is not None else None

    @property
    def bytes(self) -> int:
        """Memory held (an estimate), which the session pool budgets."""
        sizes = (len(self._files), len(self._hidden), len(self._reads), len(self._seen))
        return ENTRY_BYTES * sum(sizes) + ACTION_BYTES * sum(map(len, self._recent))

    def clear(self) -> None:
        """Forget everything: the next request is looked at as a new conversation's."""
        with self._lock:
            for kept in (self._files, self._hidden, self._reads, self._seen):
                kept.clear()
            self._recent, self._recent_hidden = [], []
            self._fresh, self._unread = True, 0

    # -- with the lock held ----------------------------------------------------------------

    def _new_part(self, nodes: Sequence[Node]) -> int:
        """Where the nodes not looked at yet start: after the last one holding a call or
        result already looked at; for a conversation seen for the first time, its latest
        turn (the last run of assistant nodes, and what follows)."""
        seen = self._seen
        start = len(nodes)
        while start > 0:
            node = nodes[start - 1]
            if node.calls and any(call.id in seen for call in node.calls):
                break
            if node.results and any(result.call_id in seen for result in node.results):
                break
            if (
                self._fresh
                and node.role == "assistant"
                and (start == 1 or nodes[start - 2].role != "assistant")
            ):
                return start - 1
            start -= 1
        return start

    def _mark_seen(self, nodes: Sequence[Node], start: int) -> None:
        """Take the calls of the last node before ``start`` that has any as looked at."""
        for node in reversed(nodes[:start]):
            ids = [call.id for call in node.calls] + [result.call_id for result in node.results]
            if any(ids):
                for found in ids:
                    _remember(self._seen, found, None, MAX_SEEN)
                return

    def _saved(self, digest: str, actions: Sequence[Action]) -> tuple[str, str] | None:
        """The step that saved the file of ``digest`` and where, from the recent requests'
        actions and ``actions`` (the first to save a file is the step that hid it)."""
        found = self._files.get(digest)
        if found is not None:
            return found
        for done in (*self._recent, actions):
            for action in done:
                path = action.detail.get("path") if action.kind in SAVING else None
                if isinstance(path, str) and digest in path:
                    found = (action.step, path)
                    _remember(self._files, digest, found, MAX_FILES)
                    return found
        return None

    def _hider(self, call_id: str) -> str | None:
        """The step that hid the result of ``call_id`` in a recent request (the model
        saw it so), if one did."""
        found = self._hidden.get(call_id)
        if found is not None:
            return found
        for i, done in enumerate(self._recent):
            hidden = self._recent_hidden[i]
            if hidden is None:
                hidden = self._recent_hidden[i] = {}
                for action in done:
                    if action.kind in HIDING:
                        hidden.setdefault(action.tool_call_id, action.step)
            found = hidden.get(call_id)
            if found is not None:
                _remember(self._hidden, call_id, found, MAX_FILES)
                return found
        return None

    def _last_read(
        self, key: str, nodes: Sequence[Node], access: Callable[[str], FileAccess | None]
    ) -> str | None:
        """The call that last read the file of normal form ``key``: the one this
        conversation saw, else one of the nodes it did not look at (the latest
        :data:`MAX_LOOKBACK` calls before its first request's new part; only calls whose
        arguments hold the file's name are read)."""
        found = self._reads.get(key)
        if found is None:
            found = next((self._reads[k] for k in reversed(self._reads) if same_file(key, k)), None)
        if found is not None or not self._unread:
            return found
        name = key.rsplit("/", 1)[-1]
        looked = 0
        for node in reversed(nodes[: min(self._unread, len(nodes))]):
            for call in reversed(node.calls):
                looked += 1
                if name in call.canonical_arguments and any(
                    same_file(key, file_key(file)) for file in _use(call, access).files_read
                ):
                    return call.id
            if looked >= MAX_LOOKBACK:
                break
        return None

    def _detect(
        self,
        nodes: Sequence[Node],
        start: int,
        new: list[ToolCall],
        actions: Sequence[Action],
        access: Callable[[str], FileAccess | None],
    ) -> tuple[ReadBack, ...]:
        results: dict[str, ToolResult] = {}
        for i in range(start, len(nodes)):
            for result in nodes[i].results:
                results.setdefault(result.call_id, result)
        answered = {call.id for call in new if call.id in results}
        sent = {a.tool_call_id: a.chars_after for a in actions
                if a.tool_call_id in answered and a.kind in HIDING}  # fmt: skip
        found = []
        for call in new:
            answer = results.get(call.id)
            if answer is None or call.id in self._seen:
                continue
            read_back = self._read_back(
                call, sent.get(call.id, answer.chars), nodes, actions, access
            )
            if read_back is not None:
                found.append(read_back)
        return tuple(found)

    def _read_back(
        self,
        call: ToolCall,
        chars: int,
        nodes: Sequence[Node],
        actions: Sequence[Action],
        access: Callable[[str], FileAccess | None],
    ) -> ReadBack | None:
        """What ``call`` (whose result is ``chars`` long, in a request whose steps took
        ``actions``) went back for, if it did; the files it reads or writes are
        remembered."""
        told = access(call.name)
        use = NOTHING if told is None else told.use(call_arguments(call))
        for written in use.writes + use.edits:
            key = file_key(written)
            for other in [k for k in self._reads if same_file(key, k)]:
                del self._reads[other]
        if told is not None and told.action in ("write", "edit", "patch"):
            return None
        named = self._named(call, actions)
        if named is not None:
            step, location = named
            recall = call.name == RECALL_TOOL or _RECALLING.search(call.canonical_arguments)
            kind = "recall" if recall else "spill_file"
            return ReadBack(kind, call.name, step, call.id, location, chars)
        found = None
        for path in use.files_read:
            key = file_key(path)
            last = self._last_read(key, nodes, access)
            hider = self._hider(last) if last is not None else None
            if hider is not None and found is None:
                found = ReadBack("reread", call.name, hider, call.id, path, chars)
            _remember(self._reads, key, call.id, MAX_FILES)
        return found

    def _named(self, call: ToolCall, actions: Sequence[Action]) -> tuple[str, str] | None:
        """The step and location of a spill file ``call``'s arguments name, if any."""
        for digest in _DIGEST.findall(call.canonical_arguments):
            found = self._saved(digest, actions)
            if found is not None:
                return found
        return None


def _use(call: ToolCall, access: Callable[[str], FileAccess | None]) -> FileUse:
    """What ``call`` reads and writes, as its tool's declaration says."""
    told = access(call.name)
    return NOTHING if told is None else told.use(call_arguments(call))


def _digest(name: str) -> str | None:
    """The digest a spill file's ``name`` carries (``None``: no store of this package
    gave it)."""
    return name.rsplit("-", 1)[1][:16] if is_result_name(name) else None


def _remember(kept: OrderedDict[str, Any], key: str, value: Any, most: int) -> None:
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > most:
        kept.popitem(last=False)
