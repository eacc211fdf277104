"""What the tools of a request do with files, as the plugins declare it
(:class:`~middleware.FileAccess`): which results are a file's text, and which read each
answers, for the steps that keep reads whole and tell the model to read a file again."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from middleware.plugin.capabilities import FileAccess
from middleware.steps.read_back import FileRead
from middleware.view import ResultSite


class FileTools:
    """What each tool does with files, asked of the plugins once per tool and request."""

    def __init__(self, ask: Callable[[str], FileAccess | None]) -> None:
        self._ask = ask
        self._known: dict[str, FileAccess | None] = {}

    def access(self, tool_name: str | None) -> FileAccess | None:
        if tool_name is None:
            return None
        if tool_name not in self._known:
            self._known[tool_name] = self._ask(tool_name)
        return self._known[tool_name]

    def reads(self, tool_name: str | None) -> bool:
        access = self.access(tool_name)
        return access is not None and access.action == "read"

    def read_of(self, site: ResultSite) -> FileRead | None:
        """The file read ``site`` answers, when its tool reads a file and the call names it."""
        if site.call is None:
            return None
        call = site.call.call
        access = self.access(call.name)
        if access is None or access.action != "read":
            return None
        arguments = call.decoded_arguments
        file = access.path(arguments)
        if file is None:
            return None
        return FileRead.of(call.name, file, arguments, access.range_arguments)


def read_outputs(
    results: Sequence[ResultSite], count: int, start: int, tools: FileTools
) -> list[int]:
    """Characters of file reads in each of ``count`` messages from ``start``: what the
    protected window counts (the results as they came: a request carries them so)."""
    out = [0] * count
    for site in results:
        if tools.reads(site.tool_name):
            out[site.node - start] += site.result.chars
    return out
