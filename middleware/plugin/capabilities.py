"""Values plugins hand to the host through the capability hooks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from middleware.plugin.commands import DIALECTS, shell_use
from middleware.plugin.commands.patch import patch_use
from middleware.plugin.file_use import NOTHING, FileUse, Part
from middleware.view import ToolCall


@dataclass(frozen=True)
class ToolCap:
    """A tool's declared result cap ("TruncationAware").

    ``max_chars=None`` opts the tool in with the policy's per-tool default;
    ``exempt=True`` means the tool's results are never cut.
    """

    max_chars: int | None = None
    exempt: bool = False

    def __post_init__(self) -> None:
        if self.max_chars is not None and (
            isinstance(self.max_chars, bool)
            or not isinstance(self.max_chars, int)
            or self.max_chars <= 0
        ):
            raise ValueError(
                f"ToolCap.max_chars must be a positive integer, got {self.max_chars!r}"
            )
        if self.exempt and self.max_chars is not None:
            raise ValueError("ToolCap cannot both be exempt and declare max_chars")


@dataclass(frozen=True)
class FileAccess:
    """What a tool does with files, by ``action``:

    * ``read``: it reads the file one of its ``path_arguments`` names (the first present
      as a string); ``range_arguments`` select a part of it (a read given any of them
      reads a part);
    * ``write``: it writes that file (replaces, creates or deletes it);
    * ``edit``: it changes a part of that file;
    * ``shell``: it runs the command line one of its ``command_arguments`` holds (a
      string, or an argument vector such as ``["bash", "-lc", "..."]``), in the
      ``dialect`` of its shell (``sh`` or ``powershell``), from the directory one of its
      ``workdir_arguments`` names when the call gives one: the files the line prints
      (``cat``, ``sed -n``, ``head``, ``grep`` of one file...) are read, those it writes
      (``> f``, ``tee f``) written, those it changes (``sed -i``) edited
      (:mod:`middleware.plugin.commands`);
    * ``patch``: it applies a patch in Codex's ``apply_patch`` format, held by one of its
      ``patch_arguments`` (or its whole input, when that is a text): the files it updates
      are edited, those it adds, deletes or moves written.

    A read of a file is what an agent acts on next (an edit quotes its lines), so
    microcompaction keeps it in the protected window until the file is read again or
    written (an edit leaves the rest of the read as it was: the next edit quotes it), and a
    cut or compacted read tells the model to read the file again with the tool (for a
    shell read: the command that read it) before acting on it. :meth:`use` says what one
    call does.
    """

    action: Literal["read", "write", "edit", "shell", "patch"]
    path_arguments: tuple[str, ...] = ()
    range_arguments: tuple[str, ...] = ()
    command_arguments: tuple[str, ...] = ()
    workdir_arguments: tuple[str, ...] = ()
    dialect: Literal["sh", "powershell"] = "sh"
    patch_arguments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.action not in ("read", "write", "edit", "shell", "patch"):
            raise ValueError(
                "FileAccess.action must be 'read', 'write', 'edit', 'shell' or 'patch', "
                f"got {self.action!r}"
            )
        for field_name in (
            "path_arguments",
            "range_arguments",
            "command_arguments",
            "workdir_arguments",
            "patch_arguments",
        ):
            names = getattr(self, field_name)
            if not isinstance(names, tuple) or not all(
                isinstance(name, str) and name for name in names
            ):
                raise ValueError(f"FileAccess.{field_name} must be a tuple of argument names")
        if self.action in ("read", "write", "edit") and not self.path_arguments:
            raise ValueError("FileAccess.path_arguments must name at least one argument")
        if self.action == "shell" and not self.command_arguments:
            raise ValueError(
                "FileAccess.command_arguments must name at least one argument for a shell tool"
            )
        if self.dialect not in DIALECTS:
            raise ValueError(
                f"FileAccess.dialect must be one of {', '.join(DIALECTS)}, got {self.dialect!r}"
            )

    def use(self, arguments: Any) -> FileUse:
        """What a call with ``arguments`` (its input: a mapping, or the text of a tool
        whose input is not JSON) reads and writes."""
        if self.action == "patch":
            text = arguments if isinstance(arguments, str) else None
            text = text or _first(arguments, self.patch_arguments)
            return NOTHING if text is None else patch_use(text)
        if not isinstance(arguments, Mapping):
            return NOTHING
        if self.action == "shell":
            command = next(
                (arguments[name] for name in self.command_arguments if arguments.get(name)), None
            )
            workdir = _first(arguments, self.workdir_arguments)
            return NOTHING if command is None else shell_use(command, self.dialect, workdir)
        file = self.path(arguments)
        if file is None:
            return NOTHING
        if self.action == "write":
            return FileUse(writes=(file,))
        if self.action == "edit":
            return FileUse(edits=(file,))
        return FileUse(reads=((file, self.part(arguments)),))

    def path(self, arguments: Any) -> str | None:
        """The file a call with ``arguments`` (its input) reads or writes, if it names one
        (a list of paths, as a tool reading several files takes, joined by ``, ``); for a
        shell or patch tool, the files it reads, else those it writes, joined alike."""
        if self.action in ("shell", "patch"):
            use = self.use(arguments)
            files = use.files_read or use.writes + use.edits
            return ", ".join(files) if files else None
        if not isinstance(arguments, Mapping):
            return None
        for name in self.path_arguments:
            value = arguments.get(name)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = ", ".join(value)
            if isinstance(value, str) and value:
                return value
        return None

    def part(self, arguments: Any) -> Part:
        """The part of the file a call reads (its range arguments and their values, in
        JSON), empty for the whole file."""
        if not isinstance(arguments, Mapping):
            return ()
        return tuple(
            (name, repr(arguments[name]))
            for name in self.range_arguments
            if arguments.get(name) is not None
        )

    @property
    def said_arguments(self) -> tuple[str, ...]:
        """The arguments a sentence telling the model to make a read again names: the
        range arguments of a read tool, the command and directory of a shell tool."""
        if self.action == "shell":
            return self.command_arguments + self.workdir_arguments
        return self.range_arguments


def call_arguments(call: ToolCall) -> Any:
    """A call's input as :meth:`FileAccess.use` takes it: its arguments read from JSON,
    or the text itself of a tool whose input is no JSON (Codex's ``apply_patch``)."""
    decoded = call.decoded_arguments
    if decoded is None and isinstance(call.arguments, str):
        return call.arguments
    return decoded


def _first(arguments: Any, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that ``arguments`` gives as a non-empty string."""
    if not isinstance(arguments, Mapping):
        return None
    for name in names:
        value = arguments.get(name)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass(frozen=True)
class DeclaredCap:
    """A :class:`ToolCap` together with the plugin that declared it."""

    cap: ToolCap
    plugin: str


@runtime_checkable
class SpillStore(Protocol):
    """Keeps the full text of results cut from the context, so nothing is lost."""

    def save(self, key: str, content: str, *, suffix: str = ".txt") -> str:
        """Store ``content`` under a name derived from ``key`` and return the location the
        preview shows the model. Saving the same key and content again returns the same
        location without rewriting."""
        ...

    def load(self, location: str) -> str | None:
        """The content saved at ``location`` by this store, or ``None`` if it holds
        nothing there (never read anything the store did not write)."""
        ...

    def close(self) -> None:
        """Release the store (for example remove a temporary workspace)."""
        ...
