"""A command's words read as options and operands, the way GNU ``getopt`` reads them
(options anywhere before ``--``, short ones grouped, a value attached or in the next
word); an option this table does not know makes the command unknown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from middleware.plugin.commands.syntax import Word


class Options(NamedTuple):
    #: Each option given (``n``, ``lines``) with its value (``""`` for a flag), in order.
    given: tuple[tuple[str, str], ...]
    operands: tuple[Word, ...]

    def has(self, *names: str) -> bool:
        return any(name == option for option, _ in self.given for name in names)

    def values(self, *names: str) -> list[str]:
        return [value for option, value in self.given if option in names]


class Table(NamedTuple):
    """The options of one program: short flags, short options taking a value, long flags,
    long options taking a value (``None`` for the short flags: any letter is one)."""

    flags: str | None
    valued: str = ""
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()


def read_options(words: Sequence[Word], table: Table) -> Options | None:
    """``words`` (a command's arguments) as options and operands, or ``None`` when one is
    unknown or expanded by the shell."""
    given: list[tuple[str, str]] = []
    operands: list[Word] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        text = word.text
        if text == "--":
            operands += words[i:]
            break
        if not text.startswith("-") or text == "-":
            operands.append(word)
            continue
        if not word.literal:
            return None
        if text.startswith("--"):
            name, equals, value = text[2:].partition("=")
            if name in table.long_valued:
                if not equals:
                    if i >= len(words) or not words[i].literal:
                        return None
                    value = words[i].text
                    i += 1
                given.append((name, value))
            elif name in table.long_flags:
                given.append((name, value))
            else:
                return None
            continue
        for k, letter in enumerate(text[1:], 1):
            if letter in table.valued:
                value = text[k + 1 :]
                if not value:
                    if i >= len(words) or not words[i].literal:
                        return None
                    value = words[i].text
                    i += 1
                given.append((letter, value))
                break
            if table.flags is not None and letter not in table.flags:
                return None
            given.append((letter, ""))
    return Options(tuple(given), tuple(operands))
