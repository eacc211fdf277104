"""Check a history against its provider's tool-pairing rules, without changing it.

:func:`check_history` first parses the history with the format's codec, as ``process()``
does (one structural validation: the same input raises the same error in both). The
format's own rules (:meth:`.Codec.violations`) then read the wire messages directly: they
share no code with the pairing repair, so they can serve as the repair's oracle, and
return one :class:`Violation` per broken rule, with a reason modelled on the provider's
own 400 error text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from middleware.formats import get_codec, resolve_format
from middleware.formats.declarations import Violation

__all__ = ["Violation", "check_history"]


def check_history(messages: Sequence[Any], format: str = "auto") -> list[Violation]:
    """The pairing-rule violations of ``messages`` (empty when the history is valid).

    The history is first read by the format's codec, exactly as ``Pipeline.process`` reads
    it, so what is not a conversation in that format raises the same error there and here.

    :param format: ``"auto"`` (detect) or a format's name.
    :raises HistoryError: a malformed history (the message says which message and what).
    :raises FormatError: unknown format, or messages of several formats mixed.
    """
    codec = get_codec(resolve_format(messages, format))
    codec.parse(messages)  # the structural validation, shared with process()
    return codec.violations(messages)
