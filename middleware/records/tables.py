"""The tables the proxy records into, as SQLAlchemy Core declares them: one declaration for
SQLite and PostgreSQL alike (the dialect writes the SQL).

* ``answers``: one row per billed answer, keyed by the provider's response id (or a digest
  of the exchange where it gives none), so writing it twice counts it once.
* ``answer_tags``: the ``x-chatcli-tags`` pairs of an answer's request.
* ``sessions``: each session's running sums, moved in the same transaction as the answers
  that add to them (only those newly written), so ``/sessions`` reads one row a session.
* ``days``: the same sums per day (UTC) and model, which retention never removes.
* ``requests``: the console's record of each cleaned request, in the order they were
  written (``seq``), which a session's page reads a page at a time.
* ``meta``: the schema's version (:mod:`.migrations`).

Version 2 added what proves a saving on the user's own traffic (:func:`added_in_2`): an
answer to a request forwarded as it came in observe mode, with what its cleaned request
would have been billed; the provider's refusal a repair spared a request; the read-backs
of what the proxy hid (:func:`added_in_2`).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

#: The kinds of tokens, as the ledger counts them (:class:`middleware.ledger.usage.Usage`).
TOKEN_KINDS = ("input", "cache_read", "cache_write_5m", "cache_write_1h", "output")
#: Characters of a name column (a session, a model, a key): the ledger cuts names to 256.
NAME = 256
#: Characters of an answer's key: a provider's response id, or a digest.
KEY = 200
#: Characters kept of the refusal a repair spared a request (the provider's 400 text).
REFUSAL = 400

metadata = sa.MetaData()

#: An integer that counts up by itself in both databases (SQLite's rowid is 64-bit).
_SERIAL = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _tokens(prefix: str) -> list[sa.Column[int]]:
    return [
        sa.Column(f"{prefix}_{kind}", sa.BigInteger, nullable=False, server_default="0")
        for kind in TOKEN_KINDS
    ]


def _answers_2() -> list[sa.Column[Any]]:
    """An answer's columns of version 2."""
    return [
        # Forwarded as it came (observe mode): billed is what the request as it came cost,
        # and projected what its cleaned request would have (``dollars_projected``: ``None``
        # where it was not projected, or not priced).
        sa.Column("observed", sa.Boolean, nullable=False, server_default=sa.false()),
        *_tokens("projected"),
        sa.Column("dollars_projected", sa.Float),
        # The provider's 400 the request as it came would have met (a repair spared it).
        sa.Column("refused", sa.String(REFUSAL)),
        # What the agent went back for in the request (what the proxy hid, read back), and
        # the tokens and dollars that cost.
        sa.Column("readbacks", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("readback_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("dollars_readback", sa.Float),
    ]


def _sums_2() -> list[sa.Column[Any]]:
    """A row of running sums' columns of version 2 (what :func:`_answers_2` adds up to)."""
    counts = ("observed", "projected", "refused", "readbacks", "readback_tokens")
    return [
        *(sa.Column(n, sa.BigInteger, nullable=False, server_default="0") for n in counts),
        *(
            sa.Column(n, sa.Float, nullable=False, server_default="0")
            for n in ("dollars_observed", "dollars_projected", "dollars_readback")
        ),
    ]


META = sa.Table(
    "chatcli_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

ANSWERS = sa.Table(
    "chatcli_answers",
    metadata,
    sa.Column("key", sa.String(KEY), primary_key=True),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("session", sa.String(NAME)),
    sa.Column("request", sa.String(KEY)),
    sa.Column("replica", sa.String(NAME), nullable=False),
    sa.Column("agent", sa.String(64)),
    sa.Column("caller", sa.String(64)),
    sa.Column("format", sa.String(32), nullable=False),
    sa.Column("model", sa.String(NAME)),
    sa.Column("priced_as", sa.String(NAME)),
    sa.Column("unread", sa.Boolean, nullable=False),
    *_tokens("billed"),
    *_tokens("without"),
    sa.Column("dollars", sa.Float),
    sa.Column("dollars_without", sa.Float),
    sa.Column("expected_read", sa.BigInteger),
    *_answers_2(),
    sa.Index("chatcli_answers_session", "session", "time"),
    sa.Index("chatcli_answers_time", "time"),
    sa.Index("chatcli_answers_caller", "caller", "time"),
    sa.Index("chatcli_answers_request", "request"),
)

ANSWER_TAGS = sa.Table(
    "chatcli_answer_tags",
    metadata,
    sa.Column("answer", sa.String(KEY), primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(128), nullable=False),
    sa.Index("chatcli_answer_tags_pair", "name", "value"),
)


#: The running sums version 2 added (what observe mode, repairs and read-backs add up to).
SUMS_ADDED_IN_2 = tuple(column.name for column in _sums_2())
#: The running sums of a session's row and a day's (what each answer adds to them).
SUMS = (
    "answers",
    "unread",
    "unpriced",
    "dollars",
    "dollars_without",
    "expected_read",
    "read_when_expected",
    *(f"billed_{k}" for k in TOKEN_KINDS),
    *(f"without_{k}" for k in TOKEN_KINDS),
    *SUMS_ADDED_IN_2,
)


def _sums() -> list[sa.Column[object]]:
    """The columns a row of running sums has (a session's, a day's)."""
    return [
        sa.Column("answers", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("unread", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("unpriced", sa.BigInteger, nullable=False, server_default="0"),
        *_tokens("billed"),
        *_tokens("without"),
        sa.Column("dollars", sa.Float, nullable=False, server_default="0"),
        sa.Column("dollars_without", sa.Float, nullable=False, server_default="0"),
        sa.Column("expected_read", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("read_when_expected", sa.BigInteger, nullable=False, server_default="0"),
        *_sums_2(),
    ]


SESSIONS = sa.Table(
    "chatcli_sessions",
    metadata,
    sa.Column("session", sa.String(NAME), primary_key=True),
    sa.Column("first", sa.Float, nullable=False),
    sa.Column("last", sa.Float, nullable=False),
    sa.Column("agent", sa.String(64)),
    sa.Column("source", sa.String(32)),
    sa.Column("format", sa.String(32)),
    sa.Column("caller", sa.String(64)),
    # What the console counts of the session's cleaned requests.
    sa.Column("requests", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("repairs", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("spills", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("compactions", sa.BigInteger, nullable=False, server_default="0"),
    *_sums(),
    sa.Index("chatcli_sessions_last", "last"),
)

SESSION_MODELS = sa.Table(
    "chatcli_session_models",
    metadata,
    sa.Column("session", sa.String(NAME), primary_key=True),
    sa.Column("model", sa.String(NAME), primary_key=True),
    sa.Column("answers", sa.BigInteger, nullable=False, server_default="0"),
)

DAYS = sa.Table(
    "chatcli_days",
    metadata,
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("model", sa.String(NAME), primary_key=True),
    *_sums(),
)


def added_in_2() -> dict[str, list[sa.Column[Any]]]:
    """The columns version 2 added, by table, new ones each call (:mod:`.migrations` adds
    those a database lacks)."""
    return {ANSWERS.name: _answers_2(), SESSIONS.name: _sums_2(), DAYS.name: _sums_2()}


REQUESTS = sa.Table(
    "chatcli_requests",
    metadata,
    sa.Column("seq", _SERIAL, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(KEY), nullable=False, unique=True),
    sa.Column("session", sa.String(NAME), nullable=False),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("replica", sa.String(NAME), nullable=False),
    sa.Column("record", sa.LargeBinary, nullable=False),
    sa.Column("bytes", sa.Integer, nullable=False),
    sa.Index("chatcli_requests_session", "session", "seq"),
    sa.Index("chatcli_requests_time", "time"),
)
