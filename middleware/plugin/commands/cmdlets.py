"""The cmdlets of a PowerShell line that read or write files (:class:`~.engine.Effect`).

Reads: ``Get-Content`` (``gc``, ``cat``, ``type``) prints a file, its first lines with
``-TotalCount``, ``-Head`` or ``-First``, its last with ``-Tail`` or ``-Last``;
``Select-String`` the lines of ONE named file it matches; after a ``|``, ``Select-Object``
keeps ``-First``, ``-Last`` or ``-Skip`` lines and ``Select-String`` those that match.
Writes: ``Set-Content``, ``Add-Content``, ``Out-File``, ``Tee-Object`` and every output
redirection. ``Set-Location`` (``cd``, ``sl``, ``Push-Location``) changes the directory;
``Write-Output`` and ``Write-Host`` print nothing that matters; ``git`` and ``rg`` are
the programs themselves (:mod:`.posix`). Parameter names are matched whole, in any case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from middleware.plugin.commands.engine import CD, FILTER, OTHER, QUIET, READ, Effect, passing
from middleware.plugin.commands.posix import effect as native_effect
from middleware.plugin.commands.syntax import Simple, Word
from middleware.plugin.file_use import WHOLE, Part, Range, lines_part, select_last, select_lines

#: Programs a PowerShell line runs as they are, not cmdlets of the same name.
NATIVE = frozenset({"git", "rg"})


def effect(command: Simple) -> Effect:
    """What ``command`` does (see the module's docstring)."""
    words = command.words
    if not words or not words[0].literal:
        return Effect(OTHER if words else QUIET)
    name = words[0].text.lower().removesuffix(".exe")
    if name in NATIVE:
        return native_effect(command)
    handler = _CMDLETS.get(name)
    return Effect(OTHER) if handler is None else handler(words[1:])


Parameters = tuple[dict[str, str], list[Word]]


def _parameters(
    words: Sequence[Word], valued: frozenset[str], flags: frozenset[str]
) -> Parameters | None:
    """Named parameters (lower case) with their values, and the positional words; ``None``
    for an unknown parameter or a value that is not certain."""
    named: dict[str, str] = {}
    positional: list[Word] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not (word.text.startswith("-") and len(word.text) > 1 and word.text[1].isalpha()):
            positional.append(word)
            continue
        if not word.literal:
            return None
        name, colon, value = word.text[1:].lower().partition(":")
        if name in valued:
            if not colon:
                if i >= len(words) or not words[i].literal:
                    return None
                value = words[i].text
                i += 1
            named[name] = value
        elif name in flags:
            named[name] = ""
        else:
            return None
    return named, positional


def _get_content(words: Sequence[Word]) -> Effect:
    found = _parameters(words, _GC_VALUED, _GC_FLAGS)
    if found is None:
        return Effect(OTHER)
    named, positional = found
    path = named.get("path") or named.get("literalpath") or named.get("lp")
    if path is None and positional:
        word = positional.pop(0)
        path = word.text if word.literal else None
    if path is None or positional:
        return Effect(OTHER)
    first = next((named[k] for k in ("totalcount", "head", "first") if k in named), None)
    last = next((named[k] for k in ("tail", "last") if k in named), None)
    part: Part = WHOLE
    if first is not None and last is None and first.isdigit():
        part = lines_part(((1, int(first)),))
    elif last is not None and first is None and last.isdigit():
        part = select_last(WHOLE, int(last))
    elif first is not None or last is not None:
        return Effect(OTHER)
    return Effect(READ, (path,), part)


_GC_VALUED = frozenset({
    "path", "literalpath", "lp", "totalcount", "head", "first", "tail", "last", "encoding",
    "readcount", "erroraction", "ea", "delimiter",
})  # fmt: skip
_GC_FLAGS = frozenset({"raw", "force", "wait"})


def _select_object(words: Sequence[Word]) -> Effect:
    found = _parameters(words, frozenset({"first", "last", "skip"}), frozenset())
    if found is None or found[1]:
        return Effect(OTHER)
    named = found[0]
    if not all(value.isdigit() for value in named.values()):
        return Effect(OTHER)
    skip, first, last = (int(named[k]) if k in named else None for k in ("skip", "first", "last"))
    if last is not None:
        if skip is not None or first is not None:
            return Effect(OTHER)
        return Effect(FILTER, narrow=lambda p: select_last(p, last))
    start = (skip or 0) + 1
    ranges: tuple[Range, ...] = ((start, None if first is None else start + first - 1),)
    if first == 0:
        return Effect(QUIET)
    return Effect(FILTER, narrow=lambda p: select_lines(p, ranges))


def _select_string(words: Sequence[Word]) -> Effect:
    found = _parameters(words, _SLS_VALUED, _SLS_FLAGS)
    if found is None:
        return Effect(OTHER)
    named, positional = found
    if "pattern" not in named:
        if not positional or not positional[0].literal:
            return Effect(OTHER)
        named["pattern"] = positional.pop(0).text
    paths = [named[k] for k in ("path", "literalpath") if k in named]
    paths += [w.text for w in positional if w.literal]
    said = " ".join(
        f"-{k} {v}".rstrip() for k, v in sorted(named.items()) if k not in ("path", "literalpath")
    )
    if len(paths) + sum(not w.literal for w in positional) > 1:
        return Effect(OTHER)
    if not paths:
        return Effect(FILTER, narrow=lambda p: (*p, ("search", said)))
    return Effect(READ, (paths[0],), (("search", said),))


_SLS_VALUED = frozenset({"pattern", "path", "literalpath", "context", "encoding"})
_SLS_FLAGS = frozenset(
    {"simplematch", "casesensitive", "allmatches", "notmatch", "raw", "noemphasis"}
)


def _location(words: Sequence[Word]) -> Effect:
    found = _parameters(words, frozenset({"path", "literalpath"}), frozenset())
    if found is None:
        return Effect(CD)
    named, positional = found
    path = named.get("path") or named.get("literalpath")
    if path is None and len(positional) == 1 and positional[0].literal:
        path = positional[0].text
    return Effect(CD, (path,) if path else ())


def _writing(
    kind: str, path_names: frozenset[str], valued: frozenset[str]
) -> Callable[[Sequence[Word]], Effect]:
    """A cmdlet writing the file its path parameter (or first positional word) names."""

    def effect_of(words: Sequence[Word]) -> Effect:
        found = _parameters(words, path_names | valued | _COMMON, _WRITE_FLAGS)
        if found is None:
            return Effect(OTHER)
        named, positional = found
        path = next((named[k] for k in sorted(path_names) if k in named), None)
        if path is None and positional and positional[0].literal:
            path = positional[0].text
        return Effect(
            kind, narrow=passing if kind == FILTER else None, writes=(path,) if path else ()
        )

    return effect_of


_COMMON = frozenset({"erroraction", "ea"})
_WRITE_FLAGS = frozenset({"append", "force", "nonewline", "noclobber", "passthru", "width"})
_CONTENT = _writing(QUIET, frozenset({"path", "literalpath"}), frozenset({"value", "encoding"}))
_CMDLETS: dict[str, Callable[[Sequence[Word]], Effect]] = {
    **dict.fromkeys(("get-content", "gc", "cat", "type"), _get_content),
    **dict.fromkeys(("select-object", "select"), _select_object),
    **dict.fromkeys(("select-string", "sls"), _select_string),
    **dict.fromkeys(("set-location", "sl", "cd", "chdir", "push-location", "pushd"), _location),
    **dict.fromkeys(("set-content", "sc", "add-content", "ac"), _CONTENT),
    "out-file": _writing(QUIET, frozenset({"filepath", "literalpath", "path"}),
                         frozenset({"encoding", "width"})),
    **dict.fromkeys(("tee-object", "tee"), _writing(
        FILTER, frozenset({"filepath", "literalpath", "path"}), frozenset({"encoding"}))),
    **dict.fromkeys(("write-output", "echo", "write", "write-host"),
                    lambda words: Effect(QUIET)),
}  # fmt: skip
