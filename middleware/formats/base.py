"""What every wire-format codec provides, and the text-protocol rule they share (the
fields a codec reads are checked by :mod:`.fields`; what it reads leniently is
:mod:`.values`)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Literal

from middleware.cache.messages import MessageMemo
from middleware.errors import HistoryError
from middleware.formats.declarations import (
    AnswerCall,
    Provider,
    ResultPlacement,
    Route,
    ToolSpec,
    UsageCounts,
    Violation,
)
from middleware.formats.openings import message_opening
from middleware.formats.structure import TooDeep, check_message, cut_deep
from middleware.formats.text_protocol import AutoTextProtocol, TextProtocol, TextProtocolRule
from middleware.formats.values import content_text
from middleware.view import Block, Conversation, Node, Opaque, ToolCall, ToolResult


class Codec(ABC):
    """Reads one wire format into a :class:`Conversation` and writes it back.

    ``render`` reuses the original object of every node no step changed, so an untouched
    message is returned as it came in.
    """

    #: Format name used by ``process(format=...)`` and in reports.
    name: ClassVar[str]
    #: The provider whose API speaks it: which upstream the proxy sends it to, and the
    #: shape of the errors the proxy answers in its place.
    provider: ClassVar[Provider]
    #: The request body's field holding the history (``messages``, ``input``).
    history_key: ClassVar[str] = "messages"
    #: Body fields that say the provider holds earlier turns the body does not repeat
    #: (Responses' ``previous_response_id``).
    stored_state_keys: ClassVar[tuple[str, ...]] = ()
    #: Whether a history of plain role/content messages, which every format reads
    #: alike, is taken as this format's (Chat Completions).
    reads_plain_history: ClassVar[bool] = False
    #: The proxy's paths for it, and the path endings of the requests an SDK client
    #: makes in it (its cloud variants too).
    proxy_routes: ClassVar[tuple[Route, ...]] = ()
    client_routes: ClassVar[tuple[Route, ...]] = ()
    #: Whether all results answering one assistant turn live as blocks of one message
    #: (Anthropic), rather than one node per result (OpenAI, Responses).
    results_share_message: ClassVar[bool] = False
    #: Whether tool-call ids must be unique across the whole request (Anthropic).
    unique_call_ids: ClassVar[bool] = False
    #: Whether an empty tool result needs text (Anthropic: a bare result reads to the
    #: model as the end of the turn, and an empty string was refused as a missing
    #: result); elsewhere an empty output is an ordinary answer, sent as it is.
    empty_result_needs_text: ClassVar[bool] = False
    #: Whether results carry an error flag on the wire (Anthropic's ``is_error``).
    has_error_flag: ClassVar[bool] = False
    #: Where the results answering a turn go (:class:`ResultPlacement`).
    result_placement: ClassVar[ResultPlacement] = ResultPlacement.AFTER_CALL
    #: Where a repeated call id is a duplicate: within one assistant message, or within
    #: one model turn of several items (Responses).
    duplicate_ids_within: ClassVar[Literal["message", "turn"]] = "message"
    #: Whether a reasoning item must come right before the item it reasoned for, so one
    #: left stranded by a repair is dropped (Responses); such a history is always laid
    #: out again in full, and never continued from the previous request.
    reasoning_items: ClassVar[bool] = False
    #: What a call id must look like (``None``: anything); an id that does not is renamed
    #: when ``pairing.sanitize_ids`` is on (Anthropic: ``^[a-zA-Z0-9_-]+$``), the report
    #: giving ``call_id_rule`` as the reason.
    call_id_pattern: ClassVar[re.Pattern[str] | None] = None
    call_id_rule: ClassVar[str] = ""
    #: Whether each call is an item of its own rather than a block of an assistant
    #: message (Responses): dropping it leaves no message behind to report.
    calls_are_items: ClassVar[bool] = False
    #: How ids this product gives to calls without one begin.
    generated_id_prefix: ClassVar[str] = "call_mw_"

    #: Whether the provider bills writing a prefix to its cache apart (Anthropic: its
    #: usage names the tokens written); otherwise a write costs as plain input.
    cache_writes_billed: ClassVar[bool] = False

    def signals(self, message: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """What in ``message`` belongs to this format only (a block type, a role, a
        field), in the order met, and whether each is strong: a weak one (a role another
        format shares) counts only when no other format has a strong one."""
        return []

    def opening(self, body: Mapping[str, Any]) -> Any | None:
        """What every request of one conversation in this format repeats (its opening, or
        its first reply's call ids), as the session key of a client that names no session
        digests it (:mod:`middleware.conversations.keys`), made normal once
        (:func:`.openings.normal`): a mapping with the one key :data:`.openings.CALL_IDS`
        for a conversation known by those ids alone (its requests are then logged as keyed
        by ``call_ids``, not ``opening``); ``None``: nothing to know it by in this format
        (the shared reading is then digested). By default the reading the formats of
        role-message histories share (:func:`.openings.message_opening`)."""
        return message_opening(body, self.name)

    def said(self, body: Mapping[str, Any]) -> tuple[tuple[str, ...], int] | None:
        """What a request's history says, in order (the user's and the model's texts,
        the model's call ids), and how many times the model has replied in it: what a call
        an agent makes beside its conversation repeats of it
        (:mod:`middleware.conversations.joining`); ``None``: not read in this format."""
        return None

    def usage_counts(self, usage: Mapping[str, Any]) -> UsageCounts | None:
        """The tokens a provider's ``usage`` object in this format reports, or ``None``
        if it is not one."""
        return None

    def answer_usage(self, answer: Mapping[str, Any]) -> tuple[Any, Any]:
        """Where a whole (not streamed) answer reports its usage and its model."""
        return answer.get("usage"), answer.get("model")

    def event_usage(self, event: Mapping[str, Any]) -> tuple[Any, Any] | None:
        """The usage and model a streamed event reports (a later one's fields replace
        an earlier one's), or ``None`` for an event that reports none."""
        return None

    def answer_id(self, answer: Mapping[str, Any]) -> Any:
        """The provider's id of a whole answer (what the ledger keys its record by, so a
        record written twice counts once)."""
        return answer.get("id")

    def event_id(self, event: Mapping[str, Any]) -> Any:
        """The answer's id in a streamed event that reports its usage (``None``: none)."""
        return None

    def accepts_call_id(self, call_id: str) -> bool:
        """Whether the provider takes ``call_id`` as it is (:attr:`call_id_pattern`)."""
        pattern = self.call_id_pattern
        return pattern is None or bool(pattern.match(call_id))

    def parse(
        self,
        messages: Sequence[Any],
        rule: TextProtocol | None = None,
        memo: MessageMemo | None = None,
    ) -> Conversation:
        """Build the view, raising :class:`HistoryError` for malformed messages (each is
        first checked to be plain JSON of bounded depth, :mod:`.structure`). With a
        ``memo``, a message parsed before is not checked or parsed again. ``rule`` reads
        plain user messages as tool output; in auto mode, only once the whole history is
        recognised as a text agent's."""
        if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            raise HistoryError(f"expected a list of messages, got {type(messages).__name__}")
        nodes: list[Node] = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise HistoryError(f"expected a JSON object, got {type(message).__name__}", index=i)
            if memo is None:
                nodes.append(self.read_message(message, i))
            else:
                nodes.append(memo.parse(self.name, message, i, self.read_message))
        why: str | None = "policy rule"
        if isinstance(rule, AutoTextProtocol):
            agent = rule.recognise(nodes, lambda i: content_text(self.message_content(messages[i])))
            if agent is None:
                return Conversation(self.name, nodes, messages)
            rule, why = agent.rule, f"recognised {agent.name} ({agent.shape})"
        if rule is None:
            return Conversation(self.name, nodes, messages)
        for i, node in enumerate(nodes):
            if node.role == "user" and not node.results:
                previous = nodes[i - 1].role if i else None
                marked = None
                if memo is not None:  # read as tool output once per message and session
                    marked = memo.variant(
                        self.name, (rule, previous), messages[i], i,
                        lambda private, parsed: self._mark_text_protocol(
                            parsed, private, rule, previous  # noqa: B023 (called at once)
                        ),
                    )  # fmt: skip
                if marked is None:
                    marked = self._mark_text_protocol(node, messages[i], rule, previous)
                nodes[i] = marked
        return Conversation(self.name, nodes, messages, text_protocol=why)

    def read_message(self, message: dict[str, Any], index: int) -> Node:
        """Check ``message`` (:func:`.structure.check_message`) and parse it. A message
        nested too deep is read from a cut copy: the tool calls and results whose values
        were cut are sealed (written as they came), and the rest reads as usual."""
        try:
            check_message(message, index)
        except TooDeep:
            cut, originals = cut_deep(message)
            check_message(cut, index)  # anything else wrong is refused all the same
            node = self.parse_message(cut, index)
            blocks = tuple(_sealed(block, originals) for block in node.blocks)
            return Node(node.role, blocks, raw=message, origin=node.origin, meta=node.meta)
        return self.parse_message(message, index)

    def render(self, conversation: Conversation) -> list[Any]:
        """Write the conversation back in this format (a new list)."""
        out: list[Any] = []
        for node in conversation.nodes:
            if not node.changed and node.raw is not None:
                out.append(node.raw)
            else:
                out.append(self.render_node(node))
        return out

    def _mark_text_protocol(
        self, node: Node, message: dict[str, Any], rule: TextProtocolRule, previous: str | None
    ) -> Node:
        content = self.message_content(message)
        if content is None:
            return node
        result = ToolResult(
            call_id="",
            content=content if isinstance(content, str) else tuple(content),
            raw=None,
            text_protocol=True,
            tool_name=rule.tool_name,
        )
        if not rule.matches(result.text, previous):
            return node
        return Node(
            node.role,
            (result,),
            raw=node.raw,
            origin=node.origin,
            meta=node.meta,
            raw_chars=node.raw_chars,
        )

    # -- per-format parts --------------------------------------------------------------

    @abstractmethod
    def parse_message(self, message: dict[str, Any], index: int) -> Node:
        """Turn one wire message into a node (``message`` is known to be a dict)."""

    @abstractmethod
    def render_node(self, node: Node) -> Any:
        """Write one changed or created node."""

    @abstractmethod
    def message_content(self, message: dict[str, Any]) -> str | list[Any] | None:
        """The content of a user message, as the text-protocol rule reads it."""

    @abstractmethod
    def result_node(self, results: Sequence[ToolResult]) -> Node:
        """A new node carrying ``results`` (one result unless ``results_share_message``)."""

    @abstractmethod
    def user_message(self, text: str) -> dict[str, Any]:
        """A plain user message (Responses: item) saying ``text``."""

    @abstractmethod
    def violations(self, messages: Sequence[dict[str, Any]]) -> list[Violation]:
        """The provider's tool-pairing rules ``messages`` break, read from the wire
        messages themselves (no code shared with the repair, which they check), each
        with a reason modelled on the provider's own 400 text. ``messages`` has been
        parsed by this codec already."""

    # -- a model's answer, for an integration that answers some of its calls itself ----

    @abstractmethod
    def tool_definition(self, tool: ToolSpec) -> dict[str, Any]:
        """``tool`` as a request in this format declares it."""

    def declared_tool_names(self, tool: Mapping[str, Any]) -> list[Any]:
        """The names of the tools one entry of a request's ``tools`` declares."""
        function = tool.get("function")
        return [function.get("name") if isinstance(function, Mapping) else tool.get("name")]

    @abstractmethod
    def answer_calls(self, answer: Mapping[str, Any]) -> list[AnswerCall]:
        """The tool calls of a model's (not streamed) answer."""

    @abstractmethod
    def answer_without_calls(self, answer: Mapping[str, Any], name: str) -> dict[str, Any]:
        """``answer`` without its calls of the tool ``name``."""

    @abstractmethod
    def continued(
        self, body: Mapping[str, Any], answer: Mapping[str, Any], results: list[tuple[str, str]]
    ) -> dict[str, Any]:
        """The request ``body`` continued with the model's ``answer`` and the results
        (call id, text) of some of its calls: the request that asks the model again."""

    def user_node(self, text: str) -> Node:
        """A created node for :meth:`user_message` (written as it is)."""
        return replace(self.parse_message(self.user_message(text), 0), origin=None)

    def answers(self, result: ToolResult, call: ToolCall) -> bool:
        """Whether ``result`` is of a kind that can answer ``call`` (Responses: the output
        item type must match the call item type); ids are compared by the caller."""
        return True

    def is_empty(self, node: Node) -> bool:
        """Whether an assistant node left without tool calls carries nothing else a
        provider would accept as a message (it is then removed rather than sent empty)."""
        return not node.blocks

    def synthetic_result(self, call: ToolCall, text: str) -> ToolResult:
        """The error result that stands in for a missing answer to ``call``."""
        return ToolResult(call_id=call.id, content=text, is_error=True)


def _sealed(block: Block, originals: dict[int, Any]) -> Block:
    """``block`` of a cut copy, bound to its original wire object when the cut reached
    into it (a call or result is then sealed)."""
    raw = originals.get(id(block.raw))
    if raw is None:
        return block
    if isinstance(block, Opaque):
        return Opaque(raw)
    return replace(block, raw=raw, sealed=True)
