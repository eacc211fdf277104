"""The docs state how long a file read stays whole as microcompaction keeps it: for up to
``reads.protect_turns`` turns *and* while among the newest ``reads.protect_tokens`` tokens
of reads (a 15 KB read was compacted two prompts later while the docs said "ten turns"),
with the schema's defaults."""

from __future__ import annotations

import re

import pytest
from locations import REPO

from middleware.policy.schema import default_of

#: How every doc says it (a line break may fall between any two words).
PHRASE = (
    "whole for up to `protect_turns` turns ({turns}) while among the newest "
    "`protect_tokens` tokens ({tokens}) of file reads"
)
#: A claim of how long a read stays whole, however worded.
CLAIM = re.compile(r"whole\s+for\s+(?:up\s+to\s+)?\S+\s+turns")
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def phrase() -> re.Pattern[str]:
    turns = default_of("microcompact.reads.protect_turns")
    tokens = default_of("microcompact.reads.protect_tokens")
    words = PHRASE.format(turns=turns, tokens=f"{tokens:,}").split(" ")
    return re.compile(r"\s+".join(map(re.escape, words)))


@pytest.mark.parametrize("doc", ["README.md", "docs/proxy.md", "docs/presets.md"])
def test_the_docs_that_promise_reads_whole_give_both_bounds(doc: str) -> None:
    assert phrase().search((REPO / doc).read_text("utf-8")), f"{doc} does not say {PHRASE!r}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_no_doc_gives_the_turns_alone(doc: object) -> None:
    text = (REPO / str(doc)).read_text("utf-8")
    for claim in CLAIM.finditer(text):
        assert phrase().match(text, claim.start()), (
            f"{doc}: {text[claim.start() : claim.end() + 80]!r} names the turns without the "
            "protected window's tokens"
        )
