"""``chatcli-mw validate``, ``config`` and ``schema``: check policy files, print the policy
in effect, and the schema every policy follows."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING, Any

import yaml

import middleware.proxy.settings  # noqa: F401 - registers the proxy's checks (provider names)
from middleware.cli.common import add_command
from middleware.policy import load_policy, validate_policy_file
from middleware.policy.reference import render_markdown
from middleware.policy.resources import policy_schema_path
from middleware.policy.secrets import HIDDEN, is_secret, shown

if TYPE_CHECKING:
    from middleware.cli.common import Subcommands


def add_validate(commands: Subcommands) -> None:
    validate_cmd = add_command(
        commands,
        "validate",
        summary="check policy files (exit 1 on error)",
        description="Check policy files against the schema (with the files they extend): "
        "every problem as file:line:col: $.json.path: message, for editors and CI.",
        examples=[
            "chatcli-mw validate policies/*.yaml",
            "chatcli-mw validate deploy/policy.yaml && kubectl apply -f deploy/",
        ],
    )
    validate_cmd.add_argument(
        "files", metavar="FILE", nargs="+", help="policy files (or preset:NAME) to check"
    )
    validate_cmd.set_defaults(run=_validate)


def add_config(commands: Subcommands) -> None:
    config = add_command(
        commands,
        "config",
        summary="print the effective policy",
        description="Print the policy in effect once every layer is applied (defaults, the "
        "policy file and what it extends, .env, the environment), optionally with where "
        "each value came from. Credentials are never printed: the tokens and "
        "spill.storage_options are commented out, a URL's password is shown as ***.",
        examples=[
            "chatcli-mw config --show-origin",
            "CHATCLI_BUDGET__MAX_RESULT_CHARS=30000 chatcli-mw config --policy prod.yaml",
            "chatcli-mw config --policy preset:pi --json",
        ],
    )
    config.add_argument(
        "--policy", help="policy file or preset:NAME (default: $CHATCLI_POLICY, else embedded)"
    )
    config.add_argument("--show-origin", action="store_true", help="say where each value came from")
    config.add_argument("--json", action="store_true", help="print JSON")
    config.set_defaults(run=_config)


def _validate(args: argparse.Namespace) -> int:
    failed = 0
    for file in args.files:
        errors = validate_policy_file(file)
        for error in errors:
            print(error, file=sys.stderr)
        if errors:
            failed += 1
        else:
            print(f"{file}: ok")
    return 1 if failed else 0


def _config(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    values = shown("", policy.to_dict())
    if args.json:
        data: dict[str, Any] = {"source": policy.source, "policy": values}
        if args.show_origin:
            data["origins"] = dict(policy.origins)
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    print(_comment(f"effective policy: {policy.source} (sha256 {policy.digest[:12]})"))
    _print_tree(values, "", 0, policy.origins if args.show_origin else None)
    return 0


def _print_tree(node: dict[str, Any], prefix: str, depth: int, origins: Any) -> None:
    """The policy as YAML that loads back to it (saved, it is a policy to edit), but for
    its credentials: a hidden one is a comment, so the saved policy leaves it unset."""
    indent = "  " * depth
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            print(f"{indent}{_yaml_key(key)}:")
            _print_tree(value, f"{dotted}.", depth + 1, origins)
            continue
        line = f"{indent}{_yaml_key(key)}: {_yaml_value(value)}"
        if value == HIDDEN and is_secret(dotted):
            line = f"{indent}{_comment(f'{key}: {HIDDEN}')}"
        if origins is not None and dotted in origins:
            line += f"  {_comment(origins[dotted])}"
        print(line)


#: A key written as it is: a word YAML reads as that string (indicators such as ``*`` or
#: ``&``, spaces and ``:`` need quotes; ``on`` or ``null`` are checked by loading).
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
#: What YAML cannot hold raw in a quoted string or a comment: characters outside its
#: printable set (a BOM among them), and the line breaks it folds or ends a comment on
#: (NEL, LS, PS). JSON already escapes the C0 controls of a string.
_UNSAFE = re.compile(
    "[^\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)


def _yaml_key(key: str) -> str:
    if _PLAIN_KEY.fullmatch(key) and yaml.safe_load(key) == key:
        return key
    return _yaml_string(key)


def _yaml_value(value: Any) -> str:
    """A value in YAML's flow style, written as JSON would where the two agree."""
    if isinstance(value, str):
        return _yaml_string(value)
    if isinstance(value, float):
        mantissa, e, exponent = repr(value).partition("e")
        if e and "." not in mantissa:  # YAML 1.1 reads 1e-05 as a string
            mantissa += ".0"
        return f"{mantissa}{e}{exponent}"
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{_yaml_string(k)}: {_yaml_value(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(value)


def _yaml_string(text: str) -> str:
    """A double-quoted YAML string: JSON's, with what YAML refuses or folds escaped."""
    return _UNSAFE.sub(_escape, json.dumps(text, ensure_ascii=False))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _comment(text: str) -> str:
    """A comment that stays one line whatever ``text`` holds (a path with a line break)."""
    return "# " + _UNSAFE.sub(_escape, text.replace("\n", "\\n").replace("\r", "\\r"))


def add_schema(commands: Subcommands) -> None:
    schema = add_command(
        commands,
        "schema",
        summary="print the policy schema, where it is installed, or the key reference",
        description="Print the JSON Schema every policy file follows (editors use it to "
        "complete and check policies), its installed path, or the reference of every key.",
        examples=[
            "chatcli-mw schema --path        # for '# yaml-language-server: $schema=<path>'",
            "chatcli-mw schema --markdown > policy-reference.md",
        ],
    )
    what = schema.add_mutually_exclusive_group()
    what.add_argument("--path", action="store_true", help="print the schema file's path")
    what.add_argument(
        "--markdown", action="store_true", help="print every key with its default and variable"
    )
    schema.set_defaults(run=_schema)


def _schema(args: argparse.Namespace) -> int:
    if args.path:
        print(policy_schema_path())
    elif args.markdown:
        sys.stdout.write(render_markdown())
    else:
        sys.stdout.write(policy_schema_path().read_text(encoding="utf-8"))
    return 0
