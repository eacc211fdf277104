"""A POSIX shell command line split as the shell would split it, never run.

What comes out is a :data:`Script`: the pipelines of the line in order, each a tuple of
:class:`Simple` commands (their words, quotes removed, and their redirections), with the
markers that change how their output reads: ``(`` and ``)`` around a subshell, ``&``
after a pipeline sent to the background, and ``?`` where the line holds what this module
does not follow (a loop, a condition, a function). A word that the shell would expand
(``$x``, ``$(...)``, a backquote, an unquoted ``*``, ``?`` or ``[``) is kept with
``literal=False``: what it names is not certain. A here-document's text is the target of
its ``<<`` redirection. A line this module cannot split (an unbalanced quote, a
substitution left open) raises :class:`Unreadable`.
"""

from __future__ import annotations

from typing import NamedTuple

#: Characters of a command line read at most.
MAX_CHARS = 100_000
#: Substitutions within substitutions followed at most.
MAX_DEPTH = 16

_OPERATORS = (
    "&>>", "<<<", "<<-", "&&", "||", ";;", "|&", "<<", ">>", ">&", "<&", "&>", ">|", "<>",
    "|", "&", ";", "(", ")", "<", ">",
)  # fmt: skip
#: Operators that redirect: a word (or a here-document's text) follows each.
REDIRECTIONS = frozenset({"<<<", "<<-", "<<", ">>", ">&", "<&", "&>", "&>>", ">|", "<>", "<", ">"})
#: Words that open or continue what this module does not follow.
KEYWORDS = frozenset({
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
    "esac", "select", "function", "{", "}", "!", "[[", "]]", "time", "coproc",
})  # fmt: skip


class Unreadable(ValueError):
    """The command line cannot be split (an unbalanced quote, a substitution left open)."""


class Word(NamedTuple):
    text: str
    #: Whether ``text`` is what the shell passes: nothing in it is expanded.
    literal: bool = True


class Redirect(NamedTuple):
    #: The operator (``>``, ``>>``, ``<``, ``<<``...) and the descriptor before it, if any.
    op: str
    fd: str
    #: The file, the descriptor (``2>&1``: ``1``), or a here-document's text.
    target: Word


class Simple(NamedTuple):
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]


Pipeline = tuple[Simple, ...]
#: A command line: its pipelines, and the markers ``(``, ``)``, ``&`` and ``?``.
Script = tuple["Pipeline | str", ...]


class Op(NamedTuple):
    """An operator of a command line: one that separates commands, or a redirection
    (with the descriptor before it, and a here-document's text once read)."""

    op: str
    fd: str = ""
    body: str | None = None


def parse(command: str) -> Script:
    """The pipelines of ``command`` (see the module's docstring)."""
    if len(command) > MAX_CHARS:
        raise Unreadable("too long")
    return parse_tokens(_Lexer(command).run())


def parse_tokens(tokens: list[Word | Op]) -> Script:
    """The pipelines of a command line split into ``tokens`` (in any shell's syntax)."""
    items: list[Pipeline | str] = []
    pipeline: list[Simple] = []
    words: list[Word] = []
    redirects: list[Redirect] = []
    i = 0

    def end_simple() -> None:
        if words or redirects:
            pipeline.append(Simple(tuple(words), tuple(redirects)))
        words.clear()
        redirects.clear()

    def end_pipeline() -> None:
        end_simple()
        if pipeline:
            items.append(tuple(pipeline))
        pipeline.clear()

    while i < len(tokens):
        token = tokens[i]
        i += 1
        if isinstance(token, Word):
            words.append(token)
        elif token.op in REDIRECTIONS:
            if token.body is not None:
                redirects.append(Redirect(token.op, token.fd, Word(token.body, literal=False)))
                i += 1  # the delimiter
            elif i < len(tokens) and isinstance(tokens[i], Word):
                target = tokens[i]
                assert isinstance(target, Word)
                redirects.append(Redirect(token.op, token.fd, target))
                i += 1
            else:
                raise Unreadable(f"{token.op} without a target")
        elif token.op in ("|", "|&"):
            end_simple()
        else:
            end_pipeline()
            if token.op in ("(", ")", "&"):
                items.append(token.op)
            elif token.op == ";;":
                items.append("?")
    end_pipeline()
    return tuple(items)


class WordReader:
    """What a lexer of either dialect keeps while it reads ``text``: its position, the
    tokens read, and the word being read (its parts, whether it has begun, whether every
    part is literal)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.out: list[Word | Op] = []
        self.word: list[str] = []
        self.started = False
        self.literal = True

    def add(self, text: str, literal: bool = True) -> None:
        self.word.append(text)
        self.started = True
        self.literal = self.literal and literal

    def take(self) -> Word | None:
        """The word read so far (``None``: none begun), and a new one begun."""
        word = Word("".join(self.word), self.literal) if self.started else None
        self.word, self.started, self.literal = [], False, True
        return word

    def flush(self) -> None:
        word = self.take()
        if word is not None:
            self.out.append(word)


class _Lexer(WordReader):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        #: Here-documents opened on the current line: (index of the operator, delimiter).
        self.pending: list[tuple[int, str]] = []

    def run(self) -> list[Word | Op]:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t\r":
                self.flush()
                self.i += 1
            elif c == "\n":
                self.flush()
                self.out.append(Op(";", ""))
                self.i += 1
                self.read_heredocs()
            elif c == "#" and not self.started:
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif c == "\\":
                if text.startswith("\n", self.i + 1):
                    self.i += 2
                    continue
                self.add(text[self.i + 1 : self.i + 2])
                self.i += 2
            elif c == "'":
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise Unreadable("unbalanced single quote")
                self.add(text[self.i + 1 : end])
                self.i = end + 1
            elif c == '"':
                self.i, inner, literal = _double_quoted(text, self.i + 1, 0)
                self.add(inner, literal)
            elif c in "$`":
                start = self.i
                self.i = _expansion(text, self.i, 0)
                self.add(text[start : self.i], literal=self.i == start + 1 and c == "$")
            elif c in "|&;<>()":
                self.operator()
            else:
                self.add(c, literal=c not in "*?[")
                self.i += 1
        self.flush()
        self.read_heredocs()
        return self.out

    def flush(self) -> None:
        word = self.take()
        if word is None:
            return
        last = self.out[-1] if self.out else None
        if isinstance(last, Op) and last.op in ("<<", "<<-") and last.body is None:
            self.pending.append((len(self.out) - 1, word.text))
        self.out.append(word)

    def operator(self) -> None:
        text = self.text
        fd = ""
        if text[self.i] in "<>" and self.started and self.literal and "".join(self.word).isdigit():
            fd = "".join(self.word)
            self.word, self.started = [], False
        else:
            self.flush()
        op = next(o for o in _OPERATORS if text.startswith(o, self.i))
        self.i += len(op)
        self.out.append(Op(op, fd))

    def read_heredocs(self) -> None:
        """Read the texts of the here-documents opened on the line just ended."""
        text = self.text
        for index, delimiter in self.pending:
            strip = self.out[index].op == "<<-"  # type: ignore[union-attr]
            body: list[str] = []
            while self.i < len(text):
                end = text.find("\n", self.i)
                line = text[self.i :] if end < 0 else text[self.i : end]
                self.i = len(text) if end < 0 else end + 1
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                body.append(line + "\n")
            op = self.out[index]
            assert isinstance(op, Op)
            self.out[index] = op._replace(body="".join(body))
        self.pending = []


def _double_quoted(text: str, i: int, depth: int) -> tuple[int, str, bool]:
    """The end of the double-quoted string whose text starts at ``i``, its text, and
    whether nothing in it is expanded."""
    out: list[str] = []
    literal = True
    while i < len(text):
        c = text[i]
        if c == '"':
            return i + 1, "".join(out), literal
        if c == "\\":
            after = text[i + 1 : i + 2]
            if after == "\n":
                pass
            elif after in ('"', "\\", "$", "`"):
                out.append(after)
            else:
                out.append(c + after)
            i += 2
        elif c in "$`":
            end = _expansion(text, i, depth + 1)
            literal = literal and end == i + 1 and c == "$"
            out.append(text[i:end])
            i = end
        else:
            out.append(c)
            i += 1
    raise Unreadable("unbalanced double quote")


def _expansion(text: str, i: int, depth: int) -> int:
    """The end of the expansion starting at ``i`` (``$name``, ``${...}``, ``$(...)``,
    ``$'...'``, a backquoted command); ``i + 1`` for a ``$`` that expands nothing."""
    if depth > MAX_DEPTH:
        raise Unreadable("substitutions nested too deep")
    if text[i] == "`":
        end = i + 1
        while end < len(text) and text[end] != "`":
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            raise Unreadable("unbalanced backquote")
        return end + 1
    after = text[i + 1 : i + 2]
    if after == "(":
        return _group_end(text, i + 1, depth)
    if after == "{":
        end = text.find("}", i + 2)
        if end < 0:
            raise Unreadable("unbalanced ${")
        return end + 1
    if after == "'":
        end = i + 2
        while end < len(text) and text[end] != "'":
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            raise Unreadable("unbalanced $'")
        return end + 1
    if after and (after.isalnum() or after in "_@*#?$!-"):
        end = i + 2
        if after.isalpha() or after == "_":
            while end < len(text) and (text[end].isalnum() or text[end] == "_"):
                end += 1
        return end
    return i + 1


def _group_end(text: str, i: int, depth: int) -> int:
    """The end of the parenthesised group opening at ``i`` (quotes and groups within)."""
    level = 0
    while i < len(text):
        c = text[i]
        if c == "(":
            level += 1
        elif c == ")":
            level -= 1
            if level == 0:
                return i + 1
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise Unreadable("unbalanced single quote")
            i = end
        elif c == '"':
            i = _double_quoted(text, i + 1, depth + 1)[0] - 1
        elif c == "\\":
            i += 1
        elif c in "$`" and text[i + 1 : i + 2] != "(":
            i = _expansion(text, i, depth + 1) - 1
        i += 1
    raise Unreadable("unbalanced parenthesis")
