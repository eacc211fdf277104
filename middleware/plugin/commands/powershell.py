"""A PowerShell command line split into the same pipelines as a POSIX one (:mod:`.syntax`):
quotes (``'...'``, ``"..."``, the backquote escape) removed, comments dropped, ``;``,
``|``, ``&&``, ``||`` and the redirections (``>``, ``2>``, ``*>``, ``2>&1``) read. A word
holding a variable, a script block, a sub-expression or an array is not certain
(``literal=False``); what its cmdlets do is :mod:`.cmdlets`'s.
"""

from __future__ import annotations

from middleware.plugin.commands.syntax import (
    MAX_CHARS,
    Op,
    Script,
    Unreadable,
    Word,
    WordReader,
    parse_tokens,
)

_OPERATORS = ("&&", "||", ";", "|", "&")


def split(command: str) -> Script:
    """The pipelines of a PowerShell ``command`` (raises :class:`.Unreadable`)."""
    if len(command) > MAX_CHARS:
        raise Unreadable("too long")
    return parse_tokens(_Lexer(command).run())


class _Lexer(WordReader):
    def run(self) -> list[Word | Op]:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t\r":
                self.flush()
                self.i += 1
            elif c == "\n":
                self.flush()
                self.out.append(Op(";"))
                self.i += 1
            elif c == "#" and not self.started:
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif text.startswith("<#", self.i) and not self.started:
                end = text.find("#>", self.i + 2)
                self.i = len(text) if end < 0 else end + 2
            elif c == "`":
                self.add(text[self.i + 1 : self.i + 2].replace("\n", ""))
                self.i += 2
            elif c == "'":
                self.single_quoted()
            elif c == '"':
                self.double_quoted()
            elif c in "$@" and text[self.i + 1 : self.i + 2] in ("(", "{"):
                self.i = _group_end(text, self.i + 1)
                self.add("", literal=False)
            elif c == "$" and text[self.i + 1 : self.i + 2].strip():
                self.add(c, literal=False)
                self.i += 1
            elif c in "({":
                self.i = _group_end(text, self.i)
                self.add("", literal=False)
            elif c == ">" or (
                c in "*123456" and text.startswith(">", self.i + 1) and not self.started
            ):
                self.redirect()
            elif any(text.startswith(op, self.i) for op in _OPERATORS):
                self.flush()
                op = next(op for op in _OPERATORS if text.startswith(op, self.i))
                self.out.append(Op(op))
                self.i += len(op)
            else:
                self.add(c, literal=c not in "*?[,)}")
                self.i += 1
        self.flush()
        return self.out

    def single_quoted(self) -> None:
        text, i, out = self.text, self.i + 1, []
        while True:
            end = text.find("'", i)
            if end < 0:
                raise Unreadable("unbalanced single quote")
            out.append(text[i:end])
            if not text.startswith("''", end):
                break
            out.append("'")
            i = end + 2
        self.add("".join(out))
        self.i = end + 1

    def double_quoted(self) -> None:
        text, i, out, literal = self.text, self.i + 1, [], True
        while i < len(text):
            c = text[i]
            if c == '"' and text.startswith('""', i):
                out.append('"')
                i += 2
            elif c == '"':
                self.add("".join(out), literal)
                self.i = i + 1
                return
            elif c == "`":
                out.append(text[i + 1 : i + 2])
                i += 2
            elif c == "$" and text[i + 1 : i + 2] not in ("", " ", '"'):
                literal = False
                out.append(c)
                i += 1
            else:
                out.append(c)
                i += 1
        raise Unreadable("unbalanced double quote")

    def redirect(self) -> None:
        text = self.text
        self.flush()
        fd = "" if text[self.i] == ">" else text[self.i]
        self.i += len(fd)
        op = ">>" if text.startswith(">>", self.i) else ">"
        self.i += len(op)
        if text.startswith("&", self.i) and text[self.i + 1 : self.i + 2].isdigit():
            self.out += [Op(">&", fd), Word(text[self.i + 1])]
            self.i += 2
            return
        self.out.append(Op("&>" if fd == "*" else op, "" if fd == "*" else fd))


def _group_end(text: str, i: int) -> int:
    """The end of the bracketed group opening at ``i`` (quotes within skipped)."""
    opening = text[i]
    closing = ")" if opening == "(" else "}"
    level = 0
    while i < len(text):
        c = text[i]
        if c in "({":
            level += c == opening
        elif c in ")}":
            level -= c == closing
            if level == 0:
                return i + 1
        elif c in "'\"":
            end = text.find(c, i + 1)
            if end < 0:
                raise Unreadable("unbalanced quote")
            i = end
        elif c == "`":
            i += 1
        i += 1
    raise Unreadable("unbalanced bracket")
