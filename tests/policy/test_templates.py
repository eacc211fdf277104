"""One reading of a template as the pattern of the texts it writes (issue 37, item 3): the
budget step's previews and line-rule notices and the loop guard's notice are recognised
through ``policy.templates.template_pattern``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from middleware.policy.templates import template_literals, template_pattern

FIELDS = ["head", "path", "omitted", "total"]
NUMBERS = frozenset({"omitted", "total"})


def test_literal_text_is_escaped_and_fields_match_their_body() -> None:
    pattern = template_pattern("[{omitted} chars cut; see {path}.*]", numbers=NUMBERS)
    assert pattern.fullmatch("[120 chars cut; see /tmp/a b.txt.*]")
    assert not pattern.fullmatch("[many chars cut; see /tmp/a.txt.*]")
    assert not pattern.fullmatch("[120 chars cut; see /tmp/a.txtX*]")
    assert template_pattern("{reason}", field=".+?").fullmatch("") is None
    assert template_pattern("{reason}").fullmatch("") is not None
    literals = template_literals("[{omitted} cut {{not a field}}: {path}]")
    assert "".join(literals) == "[ cut {not a field}: ]"


def test_named_fields_are_groups_and_repeats_match_the_first() -> None:
    template = "{path}: {total} lines\nread {path} again"
    named = template_pattern(template, named=True, numbers=NUMBERS)
    match = named.fullmatch("a.py: 12 lines\nread b.py again")
    assert match is not None and match.groupdict() == {"path": "a.py", "total": "12"}
    repeated = template_pattern(template, named=True, repeated=True, numbers=NUMBERS)
    assert repeated.fullmatch("a.py: 12 lines\nread b.py again") is None
    assert repeated.fullmatch("a.py: 12 lines\nread a.py again") is not None


def escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@given(
    st.lists(
        st.tuples(st.text(max_size=6), st.sampled_from(FIELDS), st.text(max_size=6)),
        max_size=4,
    ),
    st.data(),
)
def test_what_a_template_writes_matches_its_pattern(
    pieces: list[tuple[str, str, str]], data: st.DataObject
) -> None:
    template = "".join(
        f"{escaped(before)}{{{name}}}{escaped(after)}" for before, name, after in pieces
    )
    values = {
        name: str(data.draw(st.integers(0, 10**6))) if name in NUMBERS else data.draw(st.text())
        for name in FIELDS
    }
    written = template.format(**values)
    for options in ({}, {"named": True}, {"named": True, "repeated": True}):
        match = template_pattern(template, numbers=NUMBERS, **options).fullmatch(written)
        assert match is not None, (template, options)
