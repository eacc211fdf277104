"""What a policy hid in one session, and what that costs: the references and quotes of each
request whose result the policy removed, counted and attributed to the action that hid
them (:class:`Causes`), and each hidden result charged a read-back once per session (the
model that read it back has it again)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from middleware.replay import quotes as quoted
from middleware.replay.costs import Pricing, TokenCounter, readback_cost
from middleware.replay.references import ReferenceIndex, is_hidden
from middleware.replay.summaries import PolicySummary, SessionFigures
from middleware.report import Action
from middleware.view import Conversation

#: The cause of a hidden result no action of the request names.
OTHER = "other"


class Causes:
    """What hid a result in one processed request, for hidden references and hidden
    quotes alike: ``step:kind`` of the last action of the request's report on the result
    (by its call id, or by its message for a text-protocol output), :data:`OTHER` when
    none names it. Indexed once per request: a request can hide hundreds of quotes."""

    def __init__(self, full: Conversation, actions: Sequence[Action]) -> None:
        self._full = full
        self._by_call: dict[str, str] = {}
        self._by_message: dict[int, str] = {}
        for action in actions:  # the last action on a result wins
            cause = f"{action.step}:{action.kind}"
            self._by_call[action.tool_call_id] = cause
            if action.message_index is not None:
                self._by_message[action.message_index] = cause

    def of(self, where: tuple[int, int]) -> str:
        """What hid the result at ``where``, (message, block) of the full conversation."""
        call_id = getattr(self._full.nodes[where[0]].blocks[where[1]], "call_id", "")
        if call_id:
            return self._by_call.get(call_id, OTHER)
        return self._by_message.get(where[0], OTHER)


class HiddenResults:
    """The results one policy hid in one session (``full``: the session's whole
    conversation), counted into its ``summary`` and ``figures``; each result is charged
    reading back the first time a reference or quote of it is hidden, ``factor`` times
    :func:`~middleware.replay.costs.readback_cost`."""

    def __init__(
        self,
        summary: PolicySummary,
        figures: SessionFigures,
        full: Conversation,
        refs_index: ReferenceIndex,
        *,
        pricing: Pricing,
        count_tokens: TokenCounter,
        factor: float,
    ) -> None:
        self.summary = summary
        self.figures = figures
        self.full = full
        self.refs_index = refs_index
        self.pricing = pricing
        self.count_tokens = count_tokens
        self.factor = factor
        #: The results already read back, (message, block) of the full conversation.
        self.read_back: set[tuple[int, int]] = set()

    def references(self, refs: Collection[str], text: str, causes: Causes) -> float:
        """Count the request's references (``text``: the request as sent) and those it
        hid, attribute each hidden one to what hid its result, and charge reading the result
        back the first time one of its references is hidden in the session; returns what
        this request charged."""
        summary, figures = self.summary, self.figures
        hidden = [token for token in sorted(refs) if is_hidden(token, text)]
        summary.references += len(refs)
        summary.hidden += len(hidden)
        figures.references += len(refs)
        figures.hidden += len(hidden)
        charged = 0.0
        for token in hidden:
            where = self.refs_index.source.get(token)
            if where is None:
                continue
            cause = causes.of(where)
            summary.hidden_by[cause] = summary.hidden_by.get(cause, 0) + 1
            if where in self.read_back:
                continue
            self.read_back.add(where)
            charged += self._charge(where, text)
        return charged

    def quotes(self, quotes: Sequence[quoted.Quote], text: str, causes: Causes) -> float:
        """Count the request's quotes the policy hid (by what hid their result and the
        tool that gave the text) and the edits they force to read again, and charge reading
        each result back once, as for hidden references; returns what this request
        charged."""
        summary, figures = self.summary, self.figures
        hidden = [quote for quote in quotes if quoted.is_hidden(quote, text)]
        summary.quotes += len(quotes)
        summary.quotes_hidden += len(hidden)
        figures.quotes += len(quotes)
        figures.quotes_hidden += len(hidden)
        for quote in hidden:
            cause = causes.of(quote.source)
            for table in (summary.quotes_hidden_by, figures.quotes_hidden_by):
                tools = table.setdefault(cause, {})
                tools[quote.source_tool] = tools.get(quote.source_tool, 0) + 1
        forced = {(q.call_id, q.source_tool) for q in hidden if q.in_edit}
        for _, tool in forced:
            summary.rereads[tool] = summary.rereads.get(tool, 0) + 1
        figures.rereads += len(forced)
        charged = 0.0
        for quote in hidden:
            if quote.source not in self.read_back:
                self.read_back.add(quote.source)
                charged += self._charge(quote.source, text)
        return charged

    def _charge(self, where: tuple[int, int], text: str) -> float:
        """Charge what reading the result at ``where`` back costs (once per session: the
        callers keep count); returns the charge."""
        block = self.full.nodes[where[0]].blocks[where[1]]
        size = self.count_tokens(getattr(block, "text", ""))
        charge = self.factor * readback_cost(self.pricing, self.count_tokens(text), size)
        self.summary.readback_cost += charge
        self.figures.readback_cost += charge
        return charge
