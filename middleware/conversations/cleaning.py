"""One request body from the wire, cleaned: bytes in, bytes out, never the reason the
request fails (or a history a host holds as objects, cleaned the same way: objects in,
objects out).

A body that is not JSON, or not a conversation, is left as it was; one the pipeline cannot
process is left as it was too, with the error kept for the caller to count or refuse. A
body no step changed is returned byte for byte.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from middleware.conversations import engine
from middleware.conversations.engine import ProcessResult
from middleware.conversations.keys import (
    DIGESTED,
    RunPart,
    SessionKey,
    named_session,
    run_part,
    session_of,
)
from middleware.conversations.readbacks import ReadBack
from middleware.conversations.sessions import SessionPool
from middleware.conversations.state import ConversationState
from middleware.errors import FormatError, HistoryError, InputError
from middleware.formats import jsonio
from middleware.formats.base import Codec
from middleware.formats.bodies import RequestBody, body_in
from middleware.formats.requests import wire_request
from middleware.ledger import Footprint, footprint
from middleware.policy import Policy
from middleware.records.tables import REFUSAL
from middleware.report import Report

logger = logging.getLogger(__name__)


@dataclass
class Cleaned:
    """What became of one request body."""

    #: The body to send (empty for a history a host holds as objects: its
    #: :attr:`messages` go, or, when they are ``None``, the history as it came).
    body: bytes
    session: SessionKey | None = None
    report: Report | None = None
    #: Why the body was left as it was without being processed, if it was.
    untouched: str | None = None
    #: What the pipeline raised, if it could not process the body (which is then as it was).
    error: BaseException | None = None
    #: Seconds the pipeline took.
    seconds: float = 0.0
    #: Whether the pipeline worked on the request's new part only (it continued the
    #: previous request of its conversation).
    continued: bool = False
    #: The history as it came and as it goes, for the ledger's estimate of what the
    #: request would have cost unprocessed (``None``: it goes as it came).
    footprints: tuple[Footprint, Footprint] | None = None
    #: The conversation that cleaned it, which its answer is told to
    #: (:meth:`.Conversations.answer`); ``None``: no pipeline processed it.
    conversation: ConversationState | None = None
    #: The history as the body sends it (``None``: no pipeline processed it), for what
    #: the console shows the model saw without reading the body again.
    messages: list[Any] | None = None
    #: The model the request names, for an answer that names none (a compaction's).
    model: str | None = None
    #: A call beside the conversation's history (an embedding, a completion of a
    #: prompt, Gemini CLI's model router): billed to its session, it leaves the request
    #: the next one is compared with as it was.
    beside: bool = False
    #: The provider's refusal the request as it came would have met (its status and
    #: reason), which a repair spared it: the first footprint is then the repaired
    #: request's, so that the repair is never counted as a saving.
    refused: str | None = None
    #: Observe mode: the request went as it came (``body``), and what the steps made of it
    #: (``report``, ``footprints``) is what they would have sent.
    observed: bool = False
    #: The calls of its new part that went back for what a step hid before
    #: (:mod:`.readbacks`), and what telling them raised, if it failed (they are then
    #: left out: never the reason a request fails).
    readbacks: tuple[ReadBack, ...] = ()
    readback_error: BaseException | None = None
    #: What a Gemini CLI request is in its run (``None``: another client's, or one that
    #: names its session): filed once its conversation shows itself, if it waits.
    part: RunPart | None = None

    @property
    def waits(self) -> bool:
        """Whether it is filed once its conversation shows itself (:mod:`.joining`)."""
        return self.part is not None and self.part.waits and self.session is not None


def clean_body(
    raw: bytes,
    codec: Codec,
    headers: Mapping[str, str],
    pool: SessionPool,
    policy: tuple[str, Policy],
    *,
    session: str | None = None,
    now: float | None = None,
) -> Cleaned:
    """Run the pipeline of the body's conversation on ``raw``, a request body in
    ``codec``'s wire format (its route's), read once: the codec keys, parses and checks
    it, and no format is looked up by its name.

    :param headers: the request's headers, names in lower case (they may name the session).
    :param policy: the policy's key in ``pool`` and its current snapshot.
    :param session: the conversation, if the caller knows it (else found from the request).
    :param now: when the request is sent, by the clock the ledger bills by (``None``: no
        time, so the request never finds its session idle).
    """
    if headers.get("content-encoding", "identity").lower() != "identity":
        return Cleaned(raw, untouched="compressed body")
    try:
        body = body_in(jsonio.loads(raw), codec)
    except (InputError, FormatError):
        return Cleaned(raw, untouched="not JSON")
    if body is None:
        return Cleaned(raw, untouched="not a conversation")
    return _clean(body, raw, codec, headers, pool, policy, session, now)


def clean_history(
    history: list[Any],
    codec: Codec,
    pool: SessionPool,
    policy: tuple[str, Policy],
    *,
    session: str | None = None,
    now: float | None = None,
) -> Cleaned:
    """A history in ``codec``'s wire format that a host holds as objects, not bytes
    (LangChain's messages read as Chat Completions ones, LiteLLM's ``messages`` or
    ``input``), cleaned as :func:`clean_body` cleans a body's (its parameters are the
    same; the host looked its codec up once): what goes is the result's
    :attr:`~Cleaned.messages` (``None``: the history as it came), and its
    :attr:`~Cleaned.body` is empty."""
    key = codec.history_key
    body = RequestBody({key: history}, key, history, codec.name)
    return _clean(body, None, codec, {}, pool, policy, session, now)


def _clean(  # noqa: PLR0917 (one request's parts, as the two callers name them)
    body: RequestBody,
    raw: bytes | None,
    codec: Codec,
    headers: Mapping[str, str],
    pool: SessionPool,
    policy: tuple[str, Policy],
    session: str | None,
    now: float | None,
) -> Cleaned:
    """Run the pipeline of ``body``'s conversation on it with ``codec``: :func:`clean_body`
    with the body read (``raw``: its bytes, plain JSON, sent as they came unless a step
    changed the history; ``None``: a history held as objects, which the engine reads as
    SDK objects may be, and whose result is its messages)."""
    came = raw if raw is not None else b""
    key = SessionKey(session, "given") if session else session_of(headers, body.document, codec)
    if not isinstance(body.history, list):  # a Responses request of one plain text
        return Cleaned(came, key, untouched="no message list")
    part = run_part(headers, body.document, codec) if key.source in DIGESTED else None
    side = part is not None and part.side
    started = time.perf_counter()
    try:
        state = pool.conversation(policy[0], policy[1], key.session)
        given = wire_request(body, codec) if raw is not None else body.document
        result = engine.process(state, given, codec, now=now)
    except (HistoryError, FormatError) as exc:
        # Not a conversation the pipeline can read: the provider will say what is wrong.
        logger.info("leaving this %s body as it was: %s", codec.name, exc)
        return Cleaned(came, key, untouched="not a conversation", beside=side, part=part)
    except Exception as exc:  # a bug or a broken plugin: never the reason a request fails
        logger.exception("could not process this %s request of session %s", codec.name, key.session)
        return Cleaned(came, key, error=exc, seconds=time.perf_counter() - started,
                       beside=side, part=part)  # fmt: skip
    seconds = time.perf_counter() - started
    body_out = came
    if result.changed and raw is not None:
        body_out = jsonio.wire(result.output)
    refused = _refusal(codec, body.history, result)
    footprints = _footprints(body.history, result, refused is not None)
    readbacks: tuple[ReadBack, ...] = ()
    readback_error = None
    try:
        readbacks = state.read_backs(result.parsed, result.report.actions)
    except Exception as exc:  # never the reason a request fails
        logger.exception("could not tell the read-backs of a request of session %s", key.session)
        readback_error = exc
    return Cleaned(
        body_out,
        key,
        result.report,
        seconds=seconds,
        continued=result.continued,
        footprints=footprints,
        conversation=state,
        messages=result.messages,
        refused=refused,
        readbacks=readbacks,
        readback_error=readback_error,
        beside=side,
        part=part,
    )


def as_it_came(
    raw: bytes, codec: Codec, headers: Mapping[str, str], *, session: str | None = None
) -> Cleaned:
    """``raw``, a body of a route that is billed but not cleaned (:attr:`.Route.cleaned`),
    as it came, with what its bill needs: its session, the model it names, and, for a
    history in ``codec``'s wire format (a compaction's), its footprint, the same as sent and
    as it came (its estimate without the middleware then differs from its bill only by
    what the cleaned requests before it changed of the prompt cache it reads). A body
    with no history is filed under the session its request names, if it names one."""
    try:
        document = jsonio.loads(raw)
    except (InputError, FormatError):
        return Cleaned(raw)
    if not isinstance(document, dict):
        return Cleaned(raw)
    model = document.get("model")
    model = model if isinstance(model, str) and model else None
    body = body_in(document, codec)
    if body is None:  # no history: an embedding, a completion of a prompt
        key = SessionKey(session, "given") if session else named_session(headers, document)
        return Cleaned(raw, key, model=model, beside=True)
    key = SessionKey(session, "given") if session else session_of(headers, document, codec)
    footprints = None
    if isinstance(body.history, list):
        try:
            came = footprint(body.history)
            footprints = came, came
        except Exception:  # never the reason a request fails: billed as sent, said so
            logger.exception("could not take the footprint of a request for the ledger")
    return Cleaned(raw, key, footprints=footprints, model=model)


def _refusal(codec: Codec, history: list[Any], result: ProcessResult) -> str | None:
    """The provider's 400 the request as it came would have met, which its repairs spared
    it (``None``: none did, or it would have gone through: its first broken rule)."""
    if result.repaired is None:
        return None
    try:
        broken = codec.violations(history)
    except Exception:  # never the reason a request fails: counted as not refused
        logger.exception("could not check a repaired request against its provider's rules")
        return None
    if not broken:
        return None
    said = f"400 {broken[0].reason}"
    return said if len(said) <= REFUSAL else said[: REFUSAL - 1] + "\N{HORIZONTAL ELLIPSIS}"


def _footprints(
    history: list[Any], result: ProcessResult, refused: bool
) -> tuple[Footprint, Footprint] | None:
    """The request's footprints as it came (as its repairs left it, if it would have been
    ``refused`` as it came) and as it goes, for the ledger (``None`` if they cannot be
    taken: the ledger then bills the request as sent, and says so)."""
    try:
        came = footprint(history, marks=result.input_marks)
        if not result.changed:
            return came, came
        goes = footprint(result.messages, like=(history, came))
        if refused and result.repaired is not None:
            return footprint(result.repaired, like=(history, came)), goes
        return came, goes
    except Exception:  # never the reason a request fails
        logger.exception("could not take the footprint of a request for the ledger")
        return None
