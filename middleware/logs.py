"""How the process's log lines are written, and lines that may repeat many times a second.

Library code only logs (through :mod:`logging`); a command configures: :func:`configure`
writes every record on stderr as text, or as one JSON object a line (:class:`JsonFormatter`)
so that a log pipeline reads the whole stream. A message made of named fields
(:class:`Fields`, the proxy's access log) is JSON in either.

A hostile client or an exhausted limit can make the same line come thousands of times a
second: a thousand connections that send nothing, or ``accept()`` failing for want of
files, once wrote 61,000 lines (27.5 MB) in 20 s and kept the event loop busy writing them.
Such a line is logged the first time, then at most once per interval (:class:`IntervalLog`),
saying how many came meanwhile.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, TextIO

#: The text format: when, the level, the logger, the message (a traceback on lines of its own).
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The fields every JSON line starts with; a field of the record's own of one of these names
#: is written as ``extra_NAME``.
STANDARD_FIELDS = ("time", "level", "logger", "message")
#: What every log record has (anything else on one is an extra its caller gave).
_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}
#: Extras left out: uvicorn's copy of its message with terminal colours.
_LEFT_OUT = frozenset({"color_message"})
#: The name of the handler :func:`configure` installs (replaced when it is called again).
HANDLER_NAME = "chatcli-mw"


class Fields(dict[str, Any]):
    """A log message made of named fields (one access log line). Its text is their JSON
    object on one line, for any handler or formatter; :class:`JsonFormatter` writes the
    fields beside the standard ones, with ``summary`` as the message."""

    def __init__(self, fields: Mapping[str, Any], summary: str) -> None:
        super().__init__(fields)
        self.summary = summary

    def __str__(self) -> str:
        return one_line(self)


class TextFormatter(logging.Formatter):
    """The lines as they have always been (:data:`TEXT_FORMAT`); a :class:`Fields`
    message alone, as its JSON object."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.msg, Fields):
            return str(record.msg)
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """Each record as one JSON object on one line: ``time`` (ISO 8601, UTC), ``level``
    (lower case, as ``proxy.log.level`` names them), ``logger``, ``message`` (formatted),
    the record's extras (a :class:`Fields` message's fields), ``traceback`` and ``stack``
    when it has them. A value JSON cannot hold is written as its ``repr``: a log line is
    never what fails."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {}
        if isinstance(record.msg, Fields):
            fields.update(record.msg)
            message = record.msg.summary
        else:
            message = _message(record)
        fields.update(extras(record))
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": message,
        }
        for name, value in fields.items():
            key = name
            while key in line:  # a field named like a standard one (or twice)
                key = f"extra_{key}"
            line[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["traceback"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return one_line(line)


def extras(record: logging.LogRecord) -> dict[str, Any]:
    """What the caller added to ``record`` (``logger.info(..., extra={...})``)."""
    return {
        key: value
        for key, value in record.__dict__.items()
        if key not in _RECORD_ATTRIBUTES and key not in _LEFT_OUT
    }


def one_line(fields: Mapping[Any, Any]) -> str:
    """``fields`` as a JSON object on one line that encodes to UTF-8 (non-ASCII text as
    it is, unless a lone surrogate needs escapes); a value JSON cannot hold (an object, a
    NaN, a cycle) as its ``repr``."""
    try:
        text = json.dumps(fields, ensure_ascii=False, allow_nan=False, default=_shown)
    except (TypeError, ValueError, RecursionError):
        fields = {str(key): _held(value) for key, value in fields.items()}
        text = json.dumps(fields, ensure_ascii=False, allow_nan=False, default=_shown)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(fields, allow_nan=False, default=_shown)
    return text


def _held(value: Any) -> Any:
    """``value`` if JSON holds it, else its ``repr``."""
    try:
        json.dumps(value, allow_nan=False, default=_shown)
    except (TypeError, ValueError, RecursionError):
        return _shown(value)
    return value


def _shown(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # a repr that fails (or an integer past the digits str() allows)
        return f"<{type(value).__name__} that cannot be shown>"


def _message(record: logging.LogRecord) -> str:
    """The record's message, or what it was made of when its arguments do not fit."""
    try:
        return record.getMessage()
    except Exception:
        return f"{_shown(record.msg)} % {_shown(record.args)}"


def configure(
    style: str, level: str, *, quiet: Iterable[str] = (), stream: TextIO | None = None
) -> None:
    """Write every log record of the process on ``stream`` (stderr) in ``style`` (``text``
    or ``json``), from ``level`` up (see :func:`set_level` for ``quiet``), by one
    handler on the root logger (replacing the one an earlier call installed). Python's
    warnings and the exceptions nothing caught are log records too."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.name == HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.name = HANDLER_NAME
    handler.setFormatter(JsonFormatter() if style == "json" else TextFormatter())
    root.addHandler(handler)
    set_level(level, quiet)
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def set_level(level: str, quiet: Iterable[str] = ()) -> None:
    """Log from ``level`` up (``debug``, ``info``, ``warning``, ``error``); the ``quiet``
    loggers (and those below them) from ``warning`` up at least."""
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"no log level {level!r}: debug, info, warning or error")
    logging.getLogger().setLevel(number)
    for name in quiet:
        logging.getLogger(name).setLevel(max(number, logging.WARNING))


def _log_uncaught(
    kind: type[BaseException], exc: BaseException, trace: TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, trace)
        return
    logging.getLogger(__name__).critical("uncaught %s", kind.__name__, exc_info=(kind, exc, trace))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    logging.getLogger(__name__).error(
        "uncaught %s in thread %s",
        args.exc_type.__name__,
        args.thread.name if args.thread is not None else "?",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


#: Seconds between two lines of the same kind.
LOG_INTERVAL_SECONDS = 60.0


class IntervalLog:
    """A logger's lines, each kind (a fixed key) logged once per ``interval`` at most;
    thread-safe (the event loop and the threads that write records and spills share one)."""

    def __init__(
        self,
        log: logging.Logger,
        interval: float = LOG_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.interval = interval
        self.clock = clock
        #: When each kind was last logged, and how many came since (keys are fixed in the
        #: code, so this holds a handful of entries).
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, level: int, kind: str, message: str, *args: object) -> bool:
        """Log ``message % args`` unless a line of ``kind`` was logged within the
        interval (then count it); whether it was logged."""
        now = self.clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval:
                self._since[kind] += 1
                return False
            more = self._since.get(kind, 0)
            self._last[kind] = now
            self._since[kind] = 0
        if more and last is not None:
            message += " (and %d more like it in the last %.0f s)"
            args = (*args, more, now - last)
        self.log.log(level, message, *args)
        return True
