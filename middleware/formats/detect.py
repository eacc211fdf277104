"""Tell the wire formats apart from the shape of the messages themselves: each format
says what belongs to it alone (:meth:`.Codec.signals`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from middleware.errors import FormatError, HistoryError
from middleware.formats.registry import CODECS

#: Format assumed for histories every format reads the same way (plain role/content).
AMBIGUOUS_DEFAULT = next(name for name, codec in CODECS.items() if codec.reads_plain_history)


@dataclass(frozen=True)
class Detection:
    """The detected format, and the first message that gave it away (``None`` when the
    history reads the same in every format and :data:`AMBIGUOUS_DEFAULT` was chosen)."""

    format: str
    evidence: str | None


def detect_format(messages: Sequence[Any]) -> Detection:
    """Detect the wire format of ``messages``.

    Raises :class:`FormatError` when messages of different formats are mixed, naming one
    message of each.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise HistoryError(f"expected a list of messages, got {type(messages).__name__}")
    found: dict[str, str] = {}
    strong: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        for name, codec in CODECS.items():
            for why, is_strong in codec.signals(message):
                found.setdefault(name, f"message {i}: {why}")
                if is_strong:
                    strong.add(name)
    if strong:  # weak evidence (a role two formats share) gives way to strong evidence
        found = {name: why for name, why in found.items() if name in strong}
    if not found:
        return Detection(AMBIGUOUS_DEFAULT, None)
    if len(found) > 1:
        details = "; ".join(f"{fmt} ({why})" for fmt, why in sorted(found.items()))
        raise FormatError(
            f"messages of several wire formats are mixed: {details}; "
            "pass format= explicitly or fix the history"
        )
    ((fmt, why),) = found.items()
    return Detection(fmt, why)
