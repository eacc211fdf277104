"""Distinctive tokens: the fast reader agrees with the definition written as regular
expressions, token for token."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.steps.mentions import (
    CHUNK_CHARS,
    _chunks,
    cut_between_tokens,
    iter_distinctive,
    mentions,
    tokens_of,
)

_CANDIDATE = re.compile(r"(?:~/|\.{1,2}/|/)?[A-Za-z0-9_][A-Za-z0-9_.:/\-]*[A-Za-z0-9_]")


def reference_distinctive(token: str) -> bool:
    """The definition: at least 3 characters with a letter and a digit, ``_``, ``.``,
    ``/``, ``:`` or an inner capital; or a dotted number of three parts or more."""
    if len(token) < 3:
        return False
    if re.search(r"[A-Za-z]", token) is None:
        return re.match(r"^\d+(\.\d+){2,}$", token) is not None
    return re.search(r"[0-9_./:]", token) is not None or re.search(r"[a-z][A-Z]", token) is not None


def reference_tokens(text: str) -> list[str]:
    out = []
    for match in _CANDIDATE.finditer(text):
        candidate = match.group()
        if reference_distinctive(candidate):
            out.append(candidate)
        if ":" in candidate:
            out += [part for part in candidate.split(":") if reference_distinctive(part)]
    return out


TOKENS = ["helloWorld", "HTTPServer", "Hello", "a-b-c", "1.2.3", "1.2", "~/a.py", "path.py:17"]
TOKENS += ["x:y:z1", "FAILED tests", "Traceback\u2028ok", "--", "aB"]
TOKENISH = st.text(
    alphabet=st.sampled_from("aZbY09_.:/-~ \n\r\x0b\x1c\x85\u2028éxError"), max_size=80
) | st.sampled_from(TOKENS)


@settings(max_examples=400)
@given(TOKENISH, TOKENISH)
def test_the_fast_tokeniser_gives_the_reference_tokens(left: str, right: str) -> None:
    text = left + " " + right
    assert list(iter_distinctive(text)) == reference_tokens(text)


@settings(max_examples=300)
@given(st.lists(TOKENISH, max_size=12), st.integers(min_value=1, max_value=40))
def test_tokens_are_the_same_read_in_chunks(parts: list[str], size: int) -> None:
    """Text is tokenised in chunks cut where no token can be: any chunk size gives the
    tokens of the whole."""
    text = " ".join(parts)
    chunks = list(_chunks(text, size))
    assert "".join(chunks) == text
    assert [t for chunk in chunks for t in tokens_of(chunk)] == reference_tokens(text)


def test_known_tokens() -> None:
    text = "see helloWorld and HTTPServer in /etc/x.conf, v1.2.3, a-b-c, Hello, path.py:17"
    assert mentions(text, 10) == [
        "helloWorld",
        "/etc/x.conf",
        "v1.2.3",
        "path.py:17",
        "path.py",
    ]


def test_a_text_of_many_chunks_gives_the_tokens_of_the_whole() -> None:
    text = "\n".join(f"{t} src/mod_{i}.py:{i} {t}" for i, t in enumerate(TOKENS * 2_000))
    assert len(text) > 10 * CHUNK_CHARS
    assert list(iter_distinctive(text)) == reference_tokens(text)
    assert mentions(text, 5_000) == list(dict.fromkeys(reference_tokens(text)))[:5_000]


@settings(max_examples=300)
@given(TOKENISH, st.integers(min_value=0, max_value=90))
def test_a_cut_between_tokens_shows_only_whole_tokens(text: str, width: int) -> None:
    cut = cut_between_tokens(text, width)
    assert text.startswith(cut) and len(cut) <= width
    if len(text) <= width:
        assert cut == text
    elif _CANDIDATE.search(text[:width]) and re.search(r"[^A-Za-z0-9_.:/~\-]", text[:width]):
        # Whenever a whole token fits, no token is shown cut short: every token of the
        # clipped text is a token of the full text at the same place.
        assert reference_tokens(cut) == reference_tokens(text)[: len(reference_tokens(cut))]


def test_known_cuts() -> None:
    assert cut_between_tokens('"phoenix_pubsub": {:hex, "2.2.0"}', 12) == '"'
    entry = '"ecto": {:hex, :ecto, "3.13.5", "abc"}'
    assert cut_between_tokens(entry, 30) == '"ecto": {:hex, :ecto, "3.13.5"'
    assert cut_between_tokens(entry, 27) == '"ecto": {:hex, :ecto, "'  # not "3.13"
    assert cut_between_tokens("abcdefgh", 4) == "abcd"  # one token longer than the width
    assert cut_between_tokens("short", 80) == "short"
