"""When two calls name the same file, however each wrote its path.

A path is compared in a normal form (:func:`file_key`): backslashes are slashes,
``.`` and ``..`` steps and repeated slashes are resolved as far as the path itself says,
and a Windows drive is written as Git Bash and MSYS write it (``D:\\src\\a.go``,
``D:/src/a.go`` and ``/d/src/a.go`` are all ``/d/src/a.go``; a first step of one letter is
taken in lower case). A path that is not absolute says nothing of the directory it
was relative to (a shell's ``cd`` in an earlier call, a tool's own root), so it names the
same file as any path that ends with its steps: ``src/a.ts`` is ``/p/src/a.ts`` and
``/q/src/a.ts``, and ``a.ts``. This is decided from the two paths alone, the same way
every time; two files of one name in two directories read through relative paths are
then taken as one, which only ends the protection of a read early.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import Generic, TypeVar

_DRIVE = re.compile(r"\A([A-Za-z]):(?:/|\Z)")
_ONE_LETTER = re.compile(r"\A/[A-Z](?:/|\Z)")

V = TypeVar("V")


def file_key(path: str) -> str:
    """``path`` in the normal form paths are compared in (see the module's docstring)."""
    key = path.replace("\\", "/")
    if key.startswith("//") and not key.startswith("///"):  # a UNC path keeps its two slashes
        key = "/" + posixpath.normpath(key[1:])
    elif key:
        key = posixpath.normpath(key)
    drive = _DRIVE.match(key)
    if drive is not None:
        key = "/" + drive.group(1).lower() + key[2:]
    if _ONE_LETTER.match(key):
        key = "/" + key[1].lower() + key[2:]
    return key[2:] if key.startswith("./") else key


def is_relative(key: str) -> bool:
    """Whether the normal form ``key`` names a file relative to a directory not given."""
    return not key.startswith("/")


def same_file(a: str, b: str) -> bool:
    """Whether the normal forms ``a`` and ``b`` name the same file: equal, or one of them
    relative and the other ending with its steps."""
    if a == b:
        return True
    if len(a) < len(b):
        a, b = b, a
    return is_relative(b) and b not in (".", "..") and a.endswith("/" + b)


def _name(key: str) -> str:
    return key.rsplit("/", 1)[-1]


class FileIndex(Generic[V]):
    """Values filed under paths, found again by any path naming the same file
    (:func:`same_file`); only the entries of the same file name are compared."""

    def __init__(self) -> None:
        self._entries: dict[str, list[tuple[str, V]]] = {}

    def add(self, path: str, value: V) -> None:
        key = file_key(path)
        self._entries.setdefault(_name(key), []).append((key, value))

    def find(self, path: str) -> Iterator[V]:
        """The values filed under a path naming the same file as ``path``, in the order
        they were added."""
        key = file_key(path)
        for other, value in self._entries.get(_name(key), ()):
            if same_file(key, other):
                yield value
