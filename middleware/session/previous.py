"""What one request leaves for the next request of its conversation.

:mod:`middleware.session.resume` decides whether a request continues its conversation's
previous one; what it keeps of it in memory, and how that is filled again from the next
request, is :mod:`middleware.session.remembered`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from middleware.cache import Identity
from middleware.report import Action
from middleware.view import Node


class Carry(Protocol):
    """What a step carries to the next request: it can be cut to the first messages."""

    def up_to(self, node: int) -> Carry:
        """What was carried for the messages before ``node`` alone."""
        ...


@dataclass(frozen=True)
class Previous:
    """What one request left for the next request of its conversation."""

    #: How the messages were read and decided: the policy, the wire format, and why user
    #: messages were read as tool output (:attr:`.Conversation.text_protocol`).
    reading: tuple[Identity, str, str | None]
    #: The mark of each message (:func:`.message_mark` of its exact copy).
    marks: tuple[int, ...]
    #: The conversation after the steps (before the loop guard, which runs on every
    #: request); once remembered, the messages the steps left as they came are
    #: :class:`.Hollow` (see :func:`.detached`).
    nodes: tuple[Node, ...]
    #: The steps' actions, by step name.
    actions: Mapping[str, tuple[Action, ...]]
    #: What each step left for the next request (:attr:`.Resume.carried`).
    carried: Mapping[str, Carry]
    #: Decisions in the pipeline's ledger: one admitted since changes an old result.
    decisions: int


def cut(previous: Previous, node: int) -> Previous:
    """``previous`` as if it had ended before ``node`` (where a turn opens)."""
    return Previous(
        previous.reading,
        previous.marks[:node],
        previous.nodes[:node],
        {
            step: tuple(
                a for a in actions if a.message_index is not None and a.message_index < node
            )
            for step, actions in previous.actions.items()
        },
        {step: carry.up_to(node) for step, carry in previous.carried.items()},
        previous.decisions,
    )
