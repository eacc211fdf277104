"""What the commands share: reading a JSON input, the shape of a request body, writing
lines, and the type of the subparsers each command adds itself to."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias

from middleware.errors import InputError
from middleware.formats import jsonio

if TYPE_CHECKING:
    Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_command(
    commands: Subcommands, name: str, *, summary: str, description: str, examples: Sequence[str]
) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` says what it does and ends with examples (``command  #
    what it does``, one per line)."""
    return commands.add_parser(
        name,
        help=summary,
        description=textwrap.fill(description, 88),
        epilog="examples:\n" + "".join(f"  {line}\n" for line in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def read_json(file: str) -> Any:
    """A JSON document from a file or ``-`` (stdin), as an :class:`InputError` if not JSON."""
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        raise InputError(exc.strerror or str(exc)) from exc
    return jsonio.loads(data)


def write_output(file: str | None, text: str) -> None:
    """``text`` to ``file``, replaced atomically (the input may be the same file: it was
    read whole before), or to stdout."""
    if file is None:
        sys.stdout.write(text)
    else:
        jsonio.write_atomically(file, text)


def write_lines(stream: TextIO, lines: Sequence[str]) -> None:
    for line in lines:
        stream.write(line + "\n")
