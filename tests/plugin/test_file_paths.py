"""Two calls name the same file however each wrote its path (middleware.plugin.file_paths),
and a later read covers an earlier one when it prints all of it (file_use.covers)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from middleware.plugin.file_paths import FileIndex, file_key, same_file
from middleware.plugin.file_use import covers, select_last, select_lines


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/p/src/a.ts", "/p/src/a.ts"),
        ("/p/./src//b/../a.ts", "/p/src/a.ts"),
        ("./src/a.ts", "src/a.ts"),
        ("D:\\oh-my-posh\\src\\a.go", "/d/oh-my-posh/src/a.go"),
        ("D:/oh-my-posh/src/a.go", "/d/oh-my-posh/src/a.go"),
        ("/D/oh-my-posh/src/a.go", "/d/oh-my-posh/src/a.go"),
        ("src\\a.go", "src/a.go"),
        ("//server/share/a.txt", "//server/share/a.txt"),
    ],
)
def test_a_path_is_compared_in_its_normal_form(path: str, key: str) -> None:
    assert file_key(path) == key


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("/p/src/a.ts", "src/a.ts", True),  # relative: any directory it may be taken from
        ("/p/src/a.ts", "a.ts", True),
        ("src/a.ts", "a.ts", True),
        ("/p/src/a.ts", "/q/src/a.ts", False),  # two absolute paths: equal or not the same
        ("/p/src/a.ts", "rc/a.ts", False),  # steps, not characters
        ("/p/src/a.ts", "lib/a.ts", False),
        ("D:\\x\\a.go", "/d/x/a.go", True),
        ("/p/a.ts", ".", False),
    ],
)
def test_a_relative_path_names_the_file_any_path_ending_with_it_names(
    a: str, b: str, same: bool
) -> None:
    assert same_file(file_key(a), file_key(b)) is same
    assert same_file(file_key(b), file_key(a)) is same


def test_an_index_finds_what_was_filed_under_any_path_of_the_same_file() -> None:
    index: FileIndex[int] = FileIndex()
    index.add("/p/src/a.ts", 1)
    index.add("src/a.ts", 2)
    index.add("/q/lib/a.ts", 3)
    assert list(index.find("a.ts")) == [1, 2, 3]
    assert list(index.find("/p/src/a.ts")) == [1, 2]
    assert list(index.find("lib/a.ts")) == [3]
    assert list(index.find("b.ts")) == []


@given(
    st.lists(st.sampled_from(["p", "src", "a.ts", "..", ".", "D:", "x y"]), max_size=6),
    st.booleans(),
)
def test_the_normal_form_is_stable(steps: list[str], absolute: bool) -> None:
    path = ("/" if absolute else "") + "/".join(steps)
    key = file_key(path)
    assert file_key(key) == key
    assert same_file(key, key)


@pytest.mark.parametrize(
    ("later", "earlier", "covered"),
    [
        ((), (("lines", "1-200"),), True),  # the whole file
        ((("lines", "1-200"),), (("lines", "10-50"),), True),
        ((("lines", "1-200"),), (("lines", "150-250"),), False),
        ((("lines", "100-"),), (("lines", "150-250"),), True),
        ((("lines", "1-10,20-30"),), (("lines", "22-25"),), True),
        ((("search", "x"),), (("search", "x"),), True),  # the same part
        ((("search", "x"),), (("lines", "1-5"),), False),
        ((("lines", "1-5"),), (), False),
        ((("offset", "3"),), (), False),
    ],
)
def test_a_later_read_covers_an_earlier_one_when_it_prints_all_of_it(
    later: tuple[tuple[str, str], ...], earlier: tuple[tuple[str, str], ...], covered: bool
) -> None:
    assert covers(later, earlier) is covered


def test_a_filter_keeps_lines_of_the_lines_read() -> None:
    assert select_lines((), ((5, 9),)) == (("lines", "5-9"),)
    assert select_lines((("lines", "10-20"),), ((2, 4),)) == (("lines", "11-13"),)
    assert select_lines((("lines", "1-3,10-20"),), ((3, 5),)) == (("lines", "3-3,10-11"),)
    assert select_lines((("lines", "1-3"),), ((5, 9),)) == (("lines", "none"),)
    assert select_lines((("search", "x"),), ((1, 5),)) == (("search", "x"), ("then", "lines 1-5"))
    assert select_last((), 20) == (("last", "20"),)
    assert select_last((("lines", "1-50"),), 10) == (("lines", "41-50"),)
    assert select_last((("last", "20"),), 5) == (("last", "20"), ("then", "last 5"))
