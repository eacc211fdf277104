"""Error types. Each message tells the user what is wrong and what to change."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, distribution
from typing import Any
from urllib.parse import unquote, urlparse

#: The distribution's name on PyPI.
DISTRIBUTION = "chatcli-middleware"


class MiddlewareError(Exception):
    """Base class of every error this package raises on purpose."""


class HistoryError(MiddlewareError, ValueError):
    """A message history that cannot be read in the requested wire format.

    ``index`` is the position of the offending message (``None`` when the problem is the
    history as a whole) and ``reason`` says what is wrong with it.
    """

    def __init__(self, reason: str, index: int | None = None) -> None:
        self.index = index
        self.reason = reason
        where = "history" if index is None else f"message {index}"
        super().__init__(f"{where}: {reason}")


class TranscriptError(HistoryError):
    """A file that is no recorded session the replay reads, or one with nothing to replay;
    ``source`` names the file (or folder), and the message starts with it."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(reason)
        self.source = source
        self.args = (f"{source}: {reason}",)


class InputError(MiddlewareError):
    """An input that cannot be read as what it should hold (a history, a request body, a
    decisions file). ``source`` names the file at fault when it is not the command's own
    input."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(message)
        self.source = source


class FormatError(HistoryError):
    """The wire format could not be detected, or an unknown format name was given."""


class PolicyError(MiddlewareError, ValueError):
    """A policy file, environment value or explicit override that is not valid.

    The message has the gcc-like shape ``file:line:col: $.json.path: message`` when the
    location is known, so editors and CI annotators can jump to it.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        column: int | None = None,
        path: str | None = None,
    ) -> None:
        self.source = source
        self.line = line
        self.column = column
        self.path = path
        self.detail = message
        location = ""
        if source is not None:
            location = source
            if line is not None:
                location += f":{line}"
                if column is not None:
                    location += f":{column}"
            location += ": "
        json_path = f"{path}: " if path else ""
        super().__init__(f"{location}{json_path}{message}")


class PluginError(MiddlewareError):
    """A plugin that failed to load, raised inside a hook, or returned a wrong type."""

    def __init__(self, plugin: str, hook: str, message: str) -> None:
        self.plugin = plugin
        self.hook = hook
        self.detail = message
        super().__init__(f"plugin {plugin!r}, hook {hook!r}: {message}")


class LoopGuardError(MiddlewareError):
    """The policy's loop guard tripped with ``action: raise``: end the agent's turn.

    ``alerts`` lists the guards that tripped (:class:`middleware.report.LoopAlert`).
    """

    def __init__(self, message: str, alerts: Sequence[Any]) -> None:
        super().__init__(f"tool loop detected: {message}")
        self.alerts = tuple(alerts)


class MissingExtraError(MiddlewareError, ImportError):
    """An optional feature whose packages are not installed; the message names the command
    that installs them for the way this copy was installed (from a folder, editable from a
    source checkout, from a wheel file, or by name from an index)."""

    def __init__(self, extra: str, requirement: str, feature: str) -> None:
        self.extra = extra
        package = re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0]
        super().__init__(
            f"{feature} needs {package}, which is not installed: run "
            f"{_install_command(extra)} (or python -m pip install '{requirement}')"
        )


def _install_command(extra: str) -> str:
    """``pip install`` of this distribution with ``extra``, as it was installed (PEP 610)."""
    try:
        recorded = distribution(DISTRIBUTION).read_text("direct_url.json")
    except PackageNotFoundError:
        recorded = None
    origin = json.loads(recorded) if recorded else {}
    url = urlparse(str(origin.get("url", "")))
    if url.scheme == "file" and "dir_info" in origin:
        folder = unquote(url.path)
        editable = "-e " if origin["dir_info"].get("editable") else ""
        return f"python -m pip install {editable}'{folder}[{extra}]'"
    if url.scheme == "file" and "archive_info" in origin:  # a wheel built from a checkout
        return f"python -m pip install '{unquote(url.path)}[{extra}]'"
    return f"python -m pip install '{DISTRIBUTION}[{extra}]'"
