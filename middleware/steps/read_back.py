"""How a preview tells the agent to read back what it left out, in words it can act on.

A preview that only names a file leaves the agent to guess how to read it, and a local
path is useless to an agent that does not share the proxy's disk. The ``{recall}`` field
of a preview (or summary) template is one sentence in the form ``recall.form`` picks:
``path``, a shell command printing a line range of the file, for an agent on the machine
that holds it; ``url``, the proxy's ``GET /recall/...`` for an agent elsewhere;
``command``, ``chatcli-mw recall`` for one with the package; ``tool``, the recall tool an
integration offers the model. ``auto`` takes ``path`` for a local store, else ``url`` when
``recall.url`` names the proxy, else ``command``.

The sentence names the lines the preview does not show and a first part of them that
fits in ``recall.read_chars``, so what the agent reads back fits under the cap instead of
being cut again. When that part is not all of them, its ``{rest}`` field (:data:`REST`)
says so, and how to read the rest: a command that shows lines 27-87 must not read as the
way to see lines 27-695. A result of a tool that reads a file (:class:`FileRead`) gets
``file_template`` instead, whatever the form: the file is what an edit must match, so the
model is told to read it again with its own tool before acting on it. The sentence
depends only on the text, the location, the session and the call: the same result gets
the same words on every request and every replica.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple
from urllib.parse import quote

from middleware.policy.quoting import json_string, prose
from middleware.policy.settings import section
from middleware.policy.templates import fill
from middleware.spill.layout import RESULTS, is_result_name
from middleware.spill.stores import is_local

#: The ``{rest}`` field of a sentence whose suggested range is not all the hidden lines;
#: empty when it is.
REST = (
    " for lines {first}-{last}, then lines {next}-{hidden_last} the same way,"
    " {count} lines at a time,"
)


class FileRead(NamedTuple):
    """The call a result of a file-reading tool answers: the tool, the file, and the part
    of it the call read, in the tool's own words (`` (offset: 100, limit: 50)``; empty
    for the whole file; a value other than a number escaped as a sentence shows a name)."""

    tool: str
    file: str
    arguments: str

    @classmethod
    def of(cls, tool: str, file: str, arguments: Any, names: tuple[str, ...]) -> FileRead:
        """The read of ``file`` by ``tool`` with ``arguments``, naming those of the range
        arguments ``names`` the call gave."""
        given = arguments if isinstance(arguments, dict) else {}
        said = ", ".join(
            f"{name}: {_value(given[name])}" for name in names if given.get(name) is not None
        )
        return cls(tool, file, f" ({said})" if said else "")


@section("recall")
@dataclass(frozen=True)
class ReadBack:
    form: Literal["auto", "path", "url", "command", "tool"]
    #: The proxy's address as the agent reaches it (``http://host:8787``), for ``url``.
    url: str | None
    #: Characters a suggested line range holds at most (one line at least).
    read_chars: int
    path_template: str
    url_template: str
    command_template: str
    tool_template: str
    file_template: str | None

    def instruction(
        self,
        text: str,
        location: str,
        head_end: int,
        tail_start: int,
        *,
        session: str,
        total_lines: int,
        file: FileRead | None = None,
    ) -> str:
        """The sentence for ``text`` saved at ``location``, of which the preview shows
        ``text[:head_end]`` and ``text[tail_start:]`` (``total_lines`` lines in all): the
        read of ``file`` again, for a result of a file-reading tool."""
        hidden_first = text.count("\n", 0, head_end) + 1
        hidden_last = total_lines - _whole_lines(text, tail_start)
        hidden_last = max(hidden_last, hidden_first)
        count = _lines_within(text, text.rfind("\n", 0, head_end) + 1, self.read_chars)
        last = min(hidden_first + count - 1, hidden_last)
        name = location.rsplit("/", 1)[-1]
        ours = is_result_name(name) and location.rsplit("/", 2)[-2:-1] == [RESULTS]
        names = {"path": location, "key": f"{session}/{name}"}
        values: dict[str, object] = {
            "url": f"{(self.url or '').rstrip('/')}/recall/{_segment(session)}/{name}",
            "first": hidden_first,
            "last": last,
            "count": last - hidden_first + 1,
            "hidden_first": hidden_first,
            "hidden_last": hidden_last,
            "lines": total_lines,
            "next": last + 1,
        }
        values["rest"] = fill(REST, values, {}) if last < hidden_last else ""
        if file is not None and self.file_template is not None:
            values["arguments"] = file.arguments
            names.update(file=file.file, tool=file.tool)
            return fill(self.file_template, values, names)
        return fill(self._template(location, ours), values, names)

    def _template(self, location: str, ours: bool) -> str:
        """The template of the form in effect (``path`` for a location not laid out by a
        spill store of this package: only its path is known)."""
        form = self.form
        if form == "auto":
            form = "path" if is_local(location) else "url" if self.url else "command"
        if form == "url" and self.url and ours:
            return self.url_template
        if form == "command" and ours:
            return self.command_template
        if form == "tool":
            return self.tool_template
        return self.path_template


def _segment(session: str) -> str:
    """``session`` as one segment of a URL path (a lone surrogate as the session folder's
    name reads it, :func:`middleware.spill.layout.session_folder_name`)."""
    return quote(session, safe="", errors="surrogatepass")


def _value(value: Any) -> str:
    """An argument's value as the read-it-again sentence shows it: a number as it is, text
    as a JSON string, anything else as its JSON, escaped like a name (:func:`prose`)."""
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    return prose(json.dumps(value, ensure_ascii=False))


def _whole_lines(text: str, start: int) -> int:
    """Lines of ``text`` that lie wholly in ``text[start:]``."""
    if start >= len(text):
        return 0
    tail = text[start:]
    lines = tail.count("\n") + (0 if tail.endswith("\n") else 1)
    starts_a_line = start == 0 or text[start - 1] == "\n"
    return lines if starts_a_line else lines - 1


def _lines_within(text: str, start: int, budget: int) -> int:
    """How many lines from ``start`` fit in ``budget`` characters (one at least); reads
    no further than the budget."""
    count, used, position = 0, 0, start
    while position < len(text):
        end = text.find("\n", position, position + budget - used + 1)
        size = (len(text) if end == -1 else end + 1) - position
        if count and used + size > budget:
            break
        count += 1
        used += size
        if end == -1 or used >= budget:
            break
        position = end + 1
    return max(count, 1)
