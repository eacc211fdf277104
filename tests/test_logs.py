"""The log formats (issue 44, item 6): a JSON line is one strict JSON object on one line that
encodes to UTF-8, whatever the message holds (line breaks, lone surrogates, a ``%`` with no
arguments, arguments that do not fit) and whatever the caller added (objects JSON cannot
hold are written as their ``repr``, never a failure to log); the text format is as it was."""

from __future__ import annotations

import io
import json
import logging
import math
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware.logs import (
    HANDLER_NAME,
    STANDARD_FIELDS,
    Fields,
    JsonFormatter,
    TextFormatter,
    configure,
    extras,
    set_level,
)

#: Any text, with more than their share of line breaks, lone surrogates (what a file name
#: that is not UTF-8 decodes to), non-ASCII characters and ``%``.
TEXTS = st.text(
    st.characters(codec=None, categories=None, exclude_categories=())
    | st.sampled_from(["\n", "\r", "\u2028", "\udcff", "\ud83d", "é", "%", '"', "\\"]),
    max_size=40,
)


class Unshowable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def cyclic() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


#: Values a caller may put on a record: JSON's, and what JSON cannot hold.
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8,
) | st.sampled_from(
    [
        object(),
        {1, 2},
        b"\xff\xfe",
        1j,
        10**5000,
        Unshowable(),
        cyclic(),
        {(1, 2): "tuple key"},
        math.nan,
    ]
)
#: Names a caller may give its extras (logging refuses those of a record's attributes).
NAMES = st.sampled_from(["request_id", "upstream", "time", "level", "peer", "détail", "n"])


def refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def record_of(
    message: str, args: tuple[Any, ...], extra: dict[str, Any], error: str | None
) -> logging.LogRecord:
    exc_info = None
    if error is not None:
        try:
            raise ValueError(error)
        except ValueError:
            exc_info = sys.exc_info()
    logger = logging.getLogger("tests.logs")
    return logger.makeRecord(
        logger.name, logging.WARNING, __file__, 1, message, args, exc_info, extra=extra
    )


def as_json(value: Any) -> Any:
    """``value`` as a strict JSON round trip gives it back, or ``None`` if it cannot."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return None


@given(
    TEXTS,
    st.sampled_from([(), ("%s",), ("%d",), (1, 2)]),
    st.dictionaries(NAMES, VALUES, max_size=4),
    st.none() | TEXTS,
)
def test_a_json_line_is_one_object_whatever_the_record_holds(
    message: str, args: tuple[Any, ...], extra: dict[str, Any], error: str | None
) -> None:
    record = record_of(message, args, extra, error)
    line = JsonFormatter().format(record)
    assert "\n" not in line and "\r" not in line
    line.encode("utf-8")  # strict: no lone surrogate left raw
    parsed = json.loads(line, parse_constant=refuse)
    assert list(parsed)[:4] == list(STANDARD_FIELDS)
    assert (parsed["level"], parsed["logger"]) == ("warning", "tests.logs")
    assert parsed["time"].endswith("Z")
    try:
        assert parsed["message"] == record.getMessage()
    except (TypeError, ValueError, KeyError):  # arguments that do not fit: what it was made of
        assert parsed["message"] == f"{message!r} % {args!r}"
    for name, value in extra.items():
        written = parsed["extra_" + name if name in STANDARD_FIELDS else name]
        held = as_json(value)
        if held is not None or value is None:
            assert written == held
        else:
            assert isinstance(written, str)  # its repr, or what says it has none
    if error is not None:
        assert record.exc_info is not None  # the traceback as logging writes it
        assert parsed["traceback"] == logging.Formatter().formatException(record.exc_info)
        assert parsed["traceback"].startswith("Traceback (most recent call last):\n")
    else:
        assert "traceback" not in parsed


@given(
    st.dictionaries(TEXTS.filter(lambda k: not k.startswith("extra_")), VALUES, max_size=4), TEXTS
)
def test_fields_are_one_json_object_in_either_format(fields: dict[str, Any], summary: str) -> None:
    record = record_of("", (), {}, None)
    record.msg = Fields(fields, summary)
    text = TextFormatter().format(record)
    assert "\n" not in text and set(json.loads(text, parse_constant=refuse)) == set(fields)
    written = json.loads(JsonFormatter().format(record), parse_constant=refuse)
    assert written["message"] == summary
    assert set(written) == set(STANDARD_FIELDS) | {
        f"extra_{k}" if k in STANDARD_FIELDS else k for k in fields
    }


def test_the_text_format_is_as_it_was() -> None:
    record = record_of("refused %s", ("evil.example",), {"peer": "1.2.3.4"}, "boom")
    text = TextFormatter().format(record)
    head, *rest = text.split("\n")
    assert head.endswith(" WARNING tests.logs: refused evil.example")
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"
    line = Fields({"method": "POST", "path": "/v1/messages", "status": 200}, "POST /v1/messages")
    assert str(line) == '{"method": "POST", "path": "/v1/messages", "status": 200}'
    assert extras(record) == {"peer": "1.2.3.4"}


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    """The process's logging configured in JSON on a buffer, put back as it was after."""
    root = logging.getLogger()
    quiet = logging.getLogger("tests.quiet")
    saved = (root.level, quiet.level, sys.excepthook, threading.excepthook)
    stream = io.StringIO()
    configure("json", "info", quiet=["tests.quiet"], stream=stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            if handler.name == HANDLER_NAME:
                root.removeHandler(handler)
        logging.captureWarnings(False)
        root.setLevel(saved[0])
        quiet.setLevel(saved[1])
        sys.excepthook, threading.excepthook = saved[2], saved[3]


def test_configure_writes_every_record_and_follows_the_level(configured: io.StringIO) -> None:
    said, quiet = logging.getLogger("tests.said"), logging.getLogger("tests.quiet.child")
    said.debug("not at info")
    said.info("at info")
    quiet.info("quiet below warning")
    quiet.warning("quiet at warning")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("a warning of Python's", UserWarning, stacklevel=1)
    thread = threading.Thread(target=lambda: 1 / 0, name="failing")
    thread.start()
    thread.join()
    set_level("debug", ["tests.quiet"])
    said.debug("at debug")
    quiet.info("still quiet")
    lines = [json.loads(line) for line in configured.getvalue().splitlines()]
    assert [(r["logger"], r["message"]) for r in lines[:3]] == [
        ("tests.said", "at info"),
        ("tests.quiet.child", "quiet at warning"),
        ("py.warnings", lines[2]["message"]),
    ]
    assert "UserWarning: a warning of Python's" in lines[2]["message"]
    assert lines[3]["message"] == "uncaught ZeroDivisionError in thread failing"
    assert lines[3]["traceback"].endswith("ZeroDivisionError: division by zero")
    assert [r["message"] for r in lines[4:]] == ["at debug"]
    with pytest.raises(ValueError, match="no log level 'verbose'"):
        set_level("verbose")
