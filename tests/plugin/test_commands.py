"""Shell command lines read as file reads and writes (middleware.plugin.commands): what a
line prints is a read only where that is certain, and a line it cannot read is no read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from middleware.plugin.commands import _line_use, argv_line, shell_use
from middleware.plugin.commands.patch import patch_use
from middleware.plugin.file_use import FileUse

Part = tuple[tuple[str, str], ...]


def lines(spec: str) -> Part:
    return (("lines", spec),)


def search(words: str) -> Part:
    return (("search", words),)


#: (command line, [(file read, part)], [file written], [file edited])
POSIX: list[tuple[str, list[tuple[str, Part]], list[str], list[str]]] = [
    # one read
    ("cat /repo/a.py", [("/repo/a.py", ())], [], []),
    ("cat -n a.py b.py", [("a.py", ()), ("b.py", ())], [], []),
    ("nl -ba src/a.ts", [("src/a.ts", ())], [], []),
    ("sed -n '1,200p' src/a.ts", [("src/a.ts", lines("1-200"))], [], []),
    ("sed -n 5p a.py", [("a.py", lines("5-5"))], [], []),
    ("sed -n '243,260p;322,356p' D:/x/g.go", [("D:/x/g.go", lines("243-260,322-356"))], [], []),
    ("sed -n '40,$p' a.py", [("a.py", lines("40-"))], [], []),
    ("sed -n '/^def /,/^$/p' a.py", [("a.py", (("sed -n", "/^def /,/^$/p"),))], [], []),
    ("head -n 50 a.log", [("a.log", lines("1-50"))], [], []),
    ("head -3 README.md", [("README.md", lines("1-3"))], [], []),
    ("head a.log", [("a.log", lines("1-10"))], [], []),
    ("tail -n 20 a.log", [("a.log", (("last", "20"),))], [], []),
    ("tail -20 a.log", [("a.log", (("last", "20"),))], [], []),
    ("tail -n +5 a.log", [("a.log", lines("5-"))], [], []),
    ("cat < a.txt", [("a.txt", ())], [], []),
    ("grep -n def a.py", [("a.py", search("-n def"))], [], []),
    ("rg -n 'fn main' src/main.rs", [("src/main.rs", search("-n 'fn main'"))], [], []),
    ("grep -rn -B3 '^func ' ./c/s.go", [("./c/s.go", search("-rn -B3 '^func '"))], [], []),
    # what changed in named files
    ("git diff src/a.ts", [("src/a.ts", (("git", ""),))], [], []),
    ("git -C /p diff HEAD~1 -- a.ts", [("/p/a.ts", (("git", "'HEAD~1' --"),))], [], []),
    (
        "diff a.md b.md",
        [("a.md", (("diff", "a.md b.md"),)), ("b.md", (("diff", "a.md b.md"),))],
        [],
        [],
    ),
    # pipelines that only keep lines of what was read
    ("nl -ba x.js | sed -n '305,322p'", [("x.js", lines("305-322"))], [], []),
    ("sed -n 1,80p f | nl", [("f", lines("1-80"))], [], []),
    ("head -n 50 a.log | tail -n 10", [("a.log", lines("41-50"))], [], []),
    ("cat a.py | head -n 5", [("a.py", lines("1-5"))], [], []),
    ("cat a | grep x", [("a", search("x"))], [], []),  # a search of a, not all of it
    (
        "grep -n def a.py | head -60",
        [("a.py", (*search("-n def"), ("then", "lines 1-60")))],
        [],
        [],
    ),
    # compound lines
    ("cd /repo && sed -n '1,80p' src/a.py", [("/repo/src/a.py", lines("1-80"))], [], []),
    ("(cd sub && cat a.txt); cat b.txt", [("sub/a.txt", ()), ("b.txt", ())], [], []),
    ("nl -ba a.py; echo ---; tail -5 b.py", [("a.py", ()), ("b.py", (("last", "5"),))], [], []),
    ("sed -n 1,9p a.py 2>/dev/null || echo missing", [("a.py", lines("1-9"))], [], []),
    ("cat a.py # the module", [("a.py", ())], [], []),
    # no read: anything else printed, or not certain
    ("sed -e 's/x/y/' a.py", [], [], []),
    ("sed -n 's/x/y/p' a.py", [], [], []),
    ("cd src && go build ./... && cat a.go", [], [], []),
    ("git show HEAD | sed -n '1,20p'", [], [], []),
    ("git diff", [], [], []),  # no file named
    ("git diff --stat a.ts", [], [], []),
    ("diff -r src lib", [], [], []),
    ("cat a | sort", [], [], []),
    ("grep -rn foo src", [], [], []),
    ("rg -n foo", [], [], []),
    ("grep -n foo a.py b.py", [], [], []),
    ("grep -l foo a.py", [], [], []),
    ("cat $f", [], [], []),
    ('cat "$HOME/a.py"', [], [], []),
    ("cat *.py", [], [], []),
    ("for f in a b; do cat $f; done", [], [], []),
    ("if true; then cat a; fi", [], [], []),
    ("cat a.py &", [], [], []),
    ("python3 -c 'print(1)'", [], [], []),
    ("cat 'unbalanced", [], [], []),
    ("cat", [], [], []),
    ("", [], [], []),
    # writes (a file replaced or created) and edits (a part of it changed)
    ("cat a.py > b.py 2>/dev/null", [], ["b.py"], []),
    ("echo x >> notes.md", [], ["notes.md"], []),
    ("echo hi | tee out.txt", [], ["out.txt"], []),
    ("make 2> err.log", [], ["err.log"], []),
    ("cd /p && echo x > a.txt", [], ["/p/a.txt"], []),
    ("cat >> f.go << 'EOF'\nfunc x() { a | b; }\nEOF\ngo vet", [], ["f.go"], []),
    ("cat > a.py <<EOF\nprint(1)\nEOF\ncat a.py", [("a.py", ())], ["a.py"], []),
    ("sed -i 's/a/b/' f.py g.py", [], [], ["f.py", "g.py"]),
    ("sed -i.bak -e 's/a/b/' f.py", [], [], ["f.py"]),
    ("sed -i 's/x/y/' $f", [], [], []),
    (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n"
        "*** Add File: b.py\n+z\n*** End Patch\nEOF",
        [],
        ["b.py"],
        ["src/a.py"],
    ),
]


@pytest.mark.parametrize(("command", "reads", "writes", "edits"), POSIX)
def test_a_posix_line_reads_writes_and_edits(
    command: str, reads: list[tuple[str, Part]], writes: list[str], edits: list[str]
) -> None:
    assert shell_use(command) == FileUse(tuple(reads), tuple(writes), tuple(edits))


POWERSHELL: list[tuple[str, list[tuple[str, Part]], list[str]]] = [
    ("Get-Content src\\a.go", [("src\\a.go", ())], []),
    ("gc a.txt -TotalCount 50", [("a.txt", lines("1-50"))], []),
    ("Get-Content -Path a.txt -Tail 20", [("a.txt", (("last", "20"),))], []),
    ("type a.txt", [("a.txt", ())], []),
    ("Get-Content a.txt | Select-Object -Skip 10 -First 5", [("a.txt", lines("11-15"))], []),
    ("Get-Content a.txt | Select-Object -First 5", [("a.txt", lines("1-5"))], []),
    ("Set-Location D:\\x; Get-Content b\\c.txt", [("D:\\x\\b\\c.txt", ())], []),
    ("Select-String -Path a.txt -Pattern foo", [("a.txt", search("-pattern foo"))], []),
    ("git diff src\\a.go", [("src\\a.go", (("git", ""),))], []),  # git as it is
    ("Get-Content $p -Raw", [], []),
    ("Get-Content a.txt | ForEach-Object { $_.Length }", [], []),
    ("npm run build 2>&1 | Select-String -Pattern 'x' | Select-Object -First 5", [], []),
    ("Get-Content a.txt > $null", [], []),
    ("'a' | Set-Content out.txt", [], ["out.txt"]),
    ("Get-Content a.txt | Out-File -FilePath b.txt", [], ["b.txt"]),
    ("go test ./... > test.log", [], ["test.log"]),
    ("Get-Content 'unbalanced", [], []),
]


@pytest.mark.parametrize(("command", "reads", "writes"), POWERSHELL)
def test_a_powershell_line_reads_and_writes(
    command: str, reads: list[tuple[str, Part]], writes: list[str]
) -> None:
    assert shell_use(command, "powershell") == FileUse(tuple(reads), tuple(writes))


def test_relative_paths_are_taken_from_the_calls_directory() -> None:
    assert shell_use("sed -n 1,9p src/a.ts", workdir="/p").reads == (
        ("/p/src/a.ts", (("lines", "1-9"),)),
    )
    assert shell_use("cat /etc/hosts ./b", workdir="/p").reads == (
        ("/etc/hosts", ()),
        ("/p/b", ()),
    )
    assert shell_use("cd ../q && cat a", workdir="/p/r").reads == (("/p/q/a", ()),)
    # a directory that is not certain leaves the paths after it as written
    assert shell_use("cd $D && cat a", workdir="/p").reads == (("a", ()),)


def test_an_argument_vector_is_the_line_its_shell_runs() -> None:
    assert shell_use(["bash", "-lc", "sed -n '1,9p' a.py"]).reads == (
        ("a.py", (("lines", "1-9"),)),
    )
    assert shell_use(["cat", "a b.txt"]).reads == (("a b.txt", ()),)
    assert shell_use(["pwsh", "-Command", "gc a.txt"]).reads == (("a.txt", ()),)
    assert argv_line(("bash", "script.sh")) is None
    assert shell_use(["bash"]) == FileUse()


def test_a_patch_edits_the_files_it_updates_and_writes_those_it_adds_deletes_or_moves() -> None:
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/b.py\n@@\n-x\n+y\n"
        "*** Update File: e.py\n@@\n-x\n+y\n*** Delete File: c.py\n*** Add File: d.py\n"
        "+*** Update File: not/a/header.py\n*** End Patch"
    )
    assert patch_use(patch) == FileUse(
        writes=("src/a.py", "src/b.py", "c.py", "d.py"), edits=("e.py",)
    )
    assert patch_use("no patch") == FileUse()


#: Words a shell line is made of, to build lines that look like commands.
WORDS = st.sampled_from([
    "cat", "sed", "-n", "'1,9p'", "head", "-n", "5", "tail", "grep", "rg", "nl", "-ba", "cd",
    "a.py", "src/b.ts", "|", "&&", "||", ";", "\n", ">", ">>", "<", "<<", "EOF", "2>&1",
    "$x", "$(", ")", "(", "`", "'", '"', "\\", "#", "{", "}", "-i", "tee", "apply_patch",
    "*** Update File: z.py", "Get-Content", "Select-Object", "-First", "-Path", "@(",
])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.text(max_size=200), st.lists(WORDS, max_size=30).map(" ".join)),
    st.sampled_from(["sh", "powershell"]),
    st.one_of(st.none(), st.sampled_from(["/p", "C:\\w"])),
)
def test_any_line_is_read_without_failing_and_the_same_way_twice(
    command: str, dialect: str, workdir: str | None
) -> None:
    first = shell_use(command, dialect, workdir)  # type: ignore[arg-type]
    assert isinstance(first, FileUse)
    assert all(isinstance(file, str) and file for file, _ in first.reads)
    assert all(isinstance(file, str) and file for file in first.writes + first.edits)
    _line_use.cache_clear()  # read again, not remembered
    assert shell_use(command, dialect, workdir) == first  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["a.py", "'b c.txt'", "src/d.ts"]), min_size=1, max_size=3),
    st.integers(1, 500),
    st.integers(0, 500),
)
def test_a_line_range_read_is_the_range_whatever_the_command(
    files: list[str], first: int, count: int
) -> None:
    last = first + count
    names = tuple(f.strip("'") for f in files)
    for command in (
        f"sed -n '{first},{last}p' {files[0]}",
        f"nl -ba {files[0]} | sed -n '{first},{last}p'",
        f"cat {files[0]} | head -n {last} | tail -n {count + 1}",
    ):
        assert shell_use(command).reads == ((names[0], (("lines", f"{first}-{last}"),)),), command
