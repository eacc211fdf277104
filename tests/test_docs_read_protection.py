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
#: And for a read of a part of a file, after it.
PART_PHRASE = (
    "for up to `protect_part_turns` turns ({turns}) while among the newest "
    "`protect_part_tokens` tokens ({tokens})"
)
#: A claim of how long a read stays whole, however worded.
CLAIM = re.compile(r"whole\s+for\s+(?:up\s+to\s+)?\S+\s+turns")
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def phrase(template: str = PHRASE, key: str = "protect") -> re.Pattern[str]:
    turns = default_of(f"microcompact.reads.{key}_turns")
    tokens = default_of(f"microcompact.reads.{key}_tokens")
    words = template.format(turns=turns, tokens=f"{tokens:,}").split(" ")
    return re.compile(r"\s+".join(map(re.escape, words)))


@pytest.mark.parametrize(
    "doc", ["README.md", "docs/proxy.md", "docs/presets.md", "docs/plugins.md"]
)
def test_the_docs_that_promise_reads_whole_give_both_bounds(doc: str) -> None:
    text = (REPO / doc).read_text("utf-8")
    whole = phrase().search(text)
    assert whole, f"{doc} does not say {PHRASE!r}"
    part = phrase(PART_PHRASE, "protect_part").search(text, whole.end())
    assert part and part.start() - whole.end() < 200, (
        f"{doc} does not say, after it, {PART_PHRASE!r}"
    )


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_no_doc_gives_the_turns_alone(doc: object) -> None:
    text = (REPO / str(doc)).read_text("utf-8")
    for claim in CLAIM.finditer(text):
        assert phrase().match(text, claim.start()), (
            f"{doc}: {text[claim.start() : claim.end() + 80]!r} names the turns without the "
            "protected window's tokens"
        )
