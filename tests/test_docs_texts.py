"""The docs quote the texts the code writes: every example of what the model sees (a
preview's marker, a read-back line, a summary, an outline's lines, a notice) in README.md
and docs/*.md is, line by line, an instance of a line the policy's templates write, filled
as the code fills them; and a template a doc quotes is the policy's own. A change of a
template or of a text the code composes fails here until the docs follow.

An example is a ```text block or an inline code span that holds one of
:data:`SIGNATURES` (the words the model texts are made of, old and new). In an example,
``…`` may shorten a name (a path, a URL), nothing else. It is checked against the embedded
default policy, or under a preset's heading of docs/presets.md, against that preset.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from locations import REPO

import middleware
from middleware.plugin.host import FULL_OUTPUT
from middleware.policy.settings import bind
from middleware.policy.templates import NAME_FIELDS, QUOTED, TEMPLATE_RULES, fill
from middleware.steps.content_types import CONTENT_TYPES
from middleware.steps.definitions import DEFINITION, FIRST_OF
from middleware.steps.definitions import HEADING as DEFINITIONS
from middleware.steps.microcompact.settings import MicrocompactSettings
from middleware.steps.outline import HEADING, NOTICE, SHOWN
from middleware.steps.read_back import REST

#: The docs; docs/policy.md is the schema's reference, generated from it (its defaults are
#: the templates themselves) and checked by tests/policy/test_reference.py.
DOCS = [
    REPO / "README.md",
    *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "policy.md"),
]
#: What the texts the model sees are made of: a code span or text block holding one of
#: these is an example of one (the phrases of texts since changed are kept, so an example
#: left behind by a change is still found).
SIGNATURES = (
    "are not shown", "chars omitted", "read them with", "read it again", "lines at a time",
    "before acting on", "Old tool result", "Old tool output", "Old input cleared",
    "Tool result missing", "Error line:", "Mentions:", "Lines from the omitted part",
    "more error line", "more warning line", "Full output:", "full output:", "full output saved",
    "Loop guard", "completed with no output", "Showing lines", "Showing last", "Use bash:",
    "Output too large", "limit reached", "cleared to save", "Imports and definitions",
)  # fmt: skip
PRESETS = ("chatcli", "claude-code", "ethos", "hermes", "lean", "pi")
#: A field of a template (an example holding one is a template, not an instance).
FIELD = re.compile(r"\{[a-z_]+\}")
#: An inline code span (CommonMark: a run of backticks closes on a run as long).
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)

NUMBERS = frozenset(
    {
        "omitted", "total", "total_bytes", "lines", "chars", "first", "last", "count", "next",
        "hidden_first", "hidden_last", "max_items", "more_items", "shown", "line_chars",
    }
)  # fmt: skip
#: A name as the docs write it: no space or backtick (``…`` may shorten it).
NAME = r"[^\s`]+?"
#: Fields whose text is any: a preview's head and tail (a line holding one is not checked).
FREE = frozenset({"head", "tail"})
#: Fields whose text starts a line of its own (their lines are the code's, :func:`code_lines`).
OWN_LINES = frozenset({"outline", "mentions", "errors", "definitions"})


@dataclass(frozen=True)
class Example:
    doc: str
    line: int
    text: str
    policy: str
    block: bool  # a ```text block, not an inline span


def examples() -> Iterator[Example]:
    for path in DOCS:
        yield from examples_of(path.relative_to(REPO).as_posix(), path.read_text("utf-8"))


def examples_of(doc: str, text: str) -> Iterator[Example]:
    policy = "default"
    lines = text.split("\n")
    paragraph: list[str] = []
    start = 0
    fence: str | None = None
    block: list[str] = []
    for number, line in enumerate([*lines, ""], 1):
        if fence is not None:
            if line.strip() == "```":
                if fence == "text":
                    yield from _if_example(doc, start, "\n".join(block), policy, block=True)
                fence = None
            else:
                block.append(line)
            continue
        if line.startswith("```"):
            yield from _spans(doc, start, paragraph, policy)
            paragraph, fence, block, start = [], line[3:].strip(), [], number + 1
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip().strip("`")
            if line.startswith("## ") and doc == "docs/presets.md":
                policy = heading if heading in PRESETS else "default"
        if not line.strip():
            yield from _spans(doc, start, paragraph, policy)
            paragraph = []
            continue
        if not paragraph:
            start = number
        paragraph.append(line)


def _spans(doc: str, start: int, paragraph: list[str], policy: str) -> Iterator[Example]:
    text = "\n".join(paragraph)
    for match in SPAN.finditer(text):
        content = re.sub(r"\s*\n\s*", " ", match.group(2))
        if content.startswith(" ") and content.endswith(" ") and content.strip():
            content = content[1:-1]
        line = start + text.count("\n", 0, match.start())
        yield from _if_example(doc, line, content, policy, block=False)


def _if_example(doc: str, line: int, text: str, policy: str, *, block: bool) -> Iterator[Example]:
    if any(signature in text for signature in SIGNATURES):
        yield Example(doc, line, text, policy, block)


@cache
def loaded(name: str) -> middleware.Policy:
    source = None if name == "default" else f"preset:{name}"
    return middleware.load_policy(source, env={}, dotenv_path=False)


def templates(policy: middleware.Policy) -> dict[str, str]:
    """The policy's texts for the model: its templates and its fixed texts, by key."""
    found: dict[str, str] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, Mapping):
            for name, item in value.items():
                walk(item, f"{key}.{name}" if key else str(name))
        elif isinstance(value, str) and (
            key.endswith("_text") or any(fnmatch.fnmatchcase(key, p) for p, _ in TEMPLATE_RULES)
        ):
            found[key] = value

    walk(policy.data, "")
    return found


def field_pattern(name: str, recall: str) -> str:
    """What a field's text is, as a pattern of one line."""
    if name in NUMBERS:
        return r"\d+"
    if name in NAME_FIELDS or name.removeprefix(QUOTED) in NAME_FIELDS or name == "url":
        return NAME
    if name == "type":
        return "(?:" + "|".join(map(re.escape, sorted(CONTENT_TYPES))) + ")"
    if name == "size":
        return r"\d+(?:\.\d)? [KM]?B"
    if name == "arguments":
        return r"(?: \([^()]*\))?"
    if name == "recall":
        return recall
    if name == "rest":
        return f"(?:{line_pattern(REST, recall)})?"
    return ".+?"


def line_pattern(template: str, recall: str) -> str:
    """The pattern of a one-line template."""
    return "".join(
        re.escape(literal) + ("" if name is None else field_pattern(name, recall))
        for literal, name, _, _ in string.Formatter().parse(template)
    )


def template_lines(template: str, recall: str) -> Iterator[str]:
    """The pattern of each line ``template`` writes, but those holding a head or tail."""
    line, free = "", False
    for literal, name, _, _ in string.Formatter().parse(template):
        pieces = literal.split("\n")
        for piece in pieces[:-1]:
            line += re.escape(piece)
            if not free:
                yield line
            line, free = "", False
        line += re.escape(pieces[-1])
        if name in FREE:
            free = True
        elif name is not None and name not in OWN_LINES:
            line += field_pattern(name, recall)
    if not free:
        yield line


def code_lines(policy: middleware.Policy) -> Iterator[str]:
    """The lines the code composes: a summary's mentions and error lines (as it writes
    them), a source file's definitions (heading and lines), an outline's heading, lines
    and notices."""
    settings = dataclasses.replace(
        bind(policy, MicrocompactSettings), summary_template="{mentions}{errors}"
    )
    written = settings.summarize("x", "p", "text", ["\x00"], ["\x00"])
    for line in written.split("\n")[1:]:
        yield re.escape(line).replace("\x00", ".+")
    yield line_pattern(FULL_OUTPUT, "")  # a plugin's summary that names no file
    yield re.escape(HEADING.strip("\n"))
    yield SHOWN.pattern.replace("(.*)", "(.+)")
    yield NOTICE.pattern
    yield re.escape(DEFINITIONS.strip("\n"))
    yield line_pattern(FIRST_OF.strip("\n"), "").replace(".+?", r"\d+")
    yield DEFINITION.pattern.removeprefix("^")


@cache
def patterns(name: str) -> tuple[re.Pattern[str], ...]:
    """The lines the policy ``name`` writes for the model, each as a pattern."""
    policy = loaded(name)
    texts = templates(policy)
    sentences = [v for k, v in texts.items() if fnmatch.fnmatchcase(k, "recall.*_template")]
    recall = "(?:" + "|".join(line_pattern(s, "") for s in sentences) + ")"
    lines = {line for text in texts.values() for line in template_lines(text, recall)}
    lines |= set(code_lines(policy))
    return tuple(re.compile(line) for line in sorted(lines) if line.strip("\\ "))


@cache
def literals(name: str) -> tuple[str, ...]:
    """The fixed text of each line the policy writes (an example may quote a piece)."""
    policy = loaded(name)
    pieces = [
        literal
        for text in templates(policy).values()
        for literal, _, _, _ in string.Formatter().parse(text)
    ]
    return (*(line for piece in pieces for line in piece.split("\n")), HEADING, "Mentions:")


def mismatch(example: Example) -> str | None:
    """Why ``example`` is not what the code writes, or ``None``."""
    if FIELD.search(example.text):  # a template: a block quotes one of the policy's
        if not example.block:
            return None
        written = example.text.replace("\\n", "\n")
        if written in templates(loaded(example.policy)).values():
            return None
        return f"the template is none of {example.policy}'s"
    for line in example.text.split("\n"):
        if line.strip() in ("", "...", "…"):  # a line of the text, or lines, left out
            continue
        if any(rule.fullmatch(line) for rule in patterns(example.policy)):
            if (problem := read_back_mismatch(line)) is not None:
                return problem
            continue
        if "…" not in line and any(line in literal for literal in literals(example.policy)):
            continue
        return f"no text of {example.policy} writes the line {line!r}"
    return None


#: A read-back line: the lines hidden, and the range it suggests, in each form's words.
HIDDEN = re.compile(r"Lines (\d+)-(\d+) of \d+ are not shown")
RANGES = (
    (re.compile(r"sed -n '(\d+),(\d+)p'"), False),
    (re.compile(r"offset[= ](\d+)(?:&|, )limit[= ](\d+)"), True),
    (re.compile(r"--offset (\d+) --limit (\d+)"), True),
)


def read_back_mismatch(line: str) -> str | None:
    """Whether a read-back line says what :class:`ReadBack` says for its numbers: when its
    range is not all the hidden lines, which lines it shows and how to read the rest."""
    hidden = HIDDEN.search(line)
    if hidden is None:
        return None
    for rule, counted in RANGES:
        suggested = rule.search(line)
        if suggested is None:
            continue
        first, second = int(suggested.group(1)), int(suggested.group(2))
        last = first + second - 1 if counted else second
        hidden_last = int(hidden.group(2))
        rest = fill(REST, {"first": first, "last": last, "next": last + 1,
                           "hidden_last": hidden_last, "count": last - first + 1}, {})  # fmt: skip
        if last < hidden_last and rest not in line:
            return f"the range {first}-{last} is not all of the hidden lines: no {rest!r}"
        if last >= hidden_last and " the same way, " in line:
            return "the range covers the hidden lines, yet the line says to read more"
    return None


EXAMPLES = list(examples())


def test_the_docs_show_examples_of_every_kind() -> None:
    """The examples are found: read-back lines, markers, summaries, outlines, notices."""
    text = "\n".join(example.text for example in EXAMPLES)
    kinds = ("are not shown: read them with", "chars omitted", "Old tool result cleared",
             "Lines from the omitted part:", "more error lines", "read it again with")  # fmt: skip
    for words in kinds:
        assert words in text, words
    assert len(EXAMPLES) >= 20


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e.doc}:{e.line}" for e in EXAMPLES])
def test_every_example_is_what_the_code_writes(example: Example) -> None:
    problem = mismatch(example)
    assert problem is None, f"{example.doc}:{example.line}: {problem}: {example.text!r}"


@pytest.mark.parametrize(
    "stale",
    [
        # The read-back line before it said how much its range covers.
        "[Lines 27-695 of 701 are not shown: read them with `sed -n '27,87p' /tmp/s/t.txt`, "
        "61 lines at a time]",
        "[Lines 27-695 of 701 are not shown: read them with `sed -n '27,87p' /tmp/s/t.txt` "
        "before acting on them]",
        "[Old tool result cleared — L lines, C chars, TYPE. Full output: PATH]",
        "… and 7 more error lines (lines 410-1290)",
    ],
)
def test_an_example_the_code_does_not_write_is_found(stale: str) -> None:
    """The check has teeth: texts the code no longer (or never) writes fail it."""
    assert mismatch(Example("doc", 1, stale, "default", block=True)) is not None
