"""The policy reference (``docs/policy.md``, ``chatcli-mw schema --markdown``), written from
the schema: every key with its meaning, type, default and environment variables."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from typing import Any

from middleware.policy.env import ALIASES, PREFIX, env_name
from middleware.policy.limits import FILE_SIZE, MAX_DEPTH, MAX_EXTENDS, MAX_NODES
from middleware.policy.schema import DOCUMENT_KEYS, Key, keys, policy_schema, resolve
from middleware.policy.templates import TEMPLATE_RULES

HEADER = """\
# Policy reference

<!-- Written by `chatcli-mw schema --markdown` from schemas/policy.schema.json: edit the
schema, then regenerate this file (a test checks it is current). -->

Every key of a policy, with its default (the embedded default policy is these defaults)
and the environment variable that sets it. A policy file states only what it changes:

```yaml
# yaml-language-server: $schema=<the path `chatcli-mw schema --path` prints>
version: 1
extends: default            # or preset:NAME, or a path
budget:
  max_result_chars: 30000
```

Precedence, lowest first: the defaults below < the policy file (and what it `extends`) <
`.env` < the environment < explicit overrides. An environment value is parsed as the key's
type (`20k` or `-5` is an error naming the variable); a list or mapping is written as JSON.
A variable with a double underscore must name a section (`CHATCLI_PROXI__HOST` is an error
saying `CHATCLI_PROXY__`), and a section and key joined by one (`CHATCLI_PROXY_HOST`) is an
error naming the variable meant; other `CHATCLI_*` names are left to the host application.
`chatcli-mw config --show-origin` prints every value in effect and where it came from.
"""


#: The bounds, written from the constants of ``limits.py`` (the one place they live).
LIMITS = f"""\
## Limits

Every policy input (a policy file, what it `extends`, `.env`, the environment, explicit
overrides) is held to these bounds; breaking one is a `PolicyError` that names it, never a
hang or an exhausted memory. No real policy comes near them.

* A policy file or `.env` file is a regular file of at most {FILE_SIZE}: devices such
  as `/dev/zero`, FIFOs and folders are refused before they are read, and no more than
  the limit is ever read. The `${{VAR}}` expansions of a `.env` file produce at most
  {FILE_SIZE} in all.
* At most {MAX_NODES:,} keys and values in one file once YAML aliases are expanded
  (counted while the file is parsed, so an alias bomb stops at its first oversized level),
  and in the merged policy.
* Mappings and lists nested at most {MAX_DEPTH} levels deep.
* An `extends` chain of at most {MAX_EXTENDS} files.
* Every number finite and at most 2**53 in magnitude: `.nan` and `.inf` in YAML, `nan`,
  `inf` or `1e309` in a variable, NaN in an override are errors naming the key or variable.
* Plain values only: text, numbers, true/false, null, lists, and mappings whose keys are
  text. YAML tags (`!!python/...`, `!!binary`, `!!set`) are refused, and so are dates
  (quote them).

A file is read as a policy only once it is a YAML mapping with a `version` key. Until then,
and for every YAML syntax error, a message gives the location and the problem but never
quotes the file: an `extends` that names a file which is not a policy does not print it.
"""


#: How a template writes the names it shows (:mod:`middleware.policy.quoting`).
TEMPLATES = """\
## Templates

A text the model reads is a template (a preview, a notice, a summary, the sentence that
says how to read the rest back): its `{fields}` are filled as the text is written, and a
field a template may not use is an error when the policy loads (each key below lists its
fields). A field that names something the conversation or the spill store gave (`{path}`,
`{file}`, `{tool}`, `{key}`, `{source}`) cannot make the text say something else:

* `{path}` shows the name as it is when it is plain; otherwise as a JSON string, quotes
  included, in which line breaks, other control and invisible characters (C0, DEL, C1,
  bidi and zero-width characters, line and paragraph separators) and the brackets the
  notices are made of (`[ ] < >`) are escapes: `"/repo/a\\n\\u005bsystem\\u005d.txt"`.
* `{quoted_path}` is the name as one word of a POSIX shell command: as it is when the shell
  reads it so (`/tmp/a.txt`), else quoted (`'/tmp/a b.txt'`, Python's `shlex.quote`), or,
  for a name with a character no command line can hold raw, `$'a\\nb.txt'` (bash, zsh,
  ksh, busybox; a shell that does not know this form, such as dash, reads another name and
  runs nothing). A command in a template takes a name in this form, after `--` where the
  command takes options: `sed -n '{first}p' -- {quoted_source}`.
"""


def render_markdown() -> str:
    """The whole reference, as Markdown."""
    schema = policy_schema()
    out = [HEADER, LIMITS, TEMPLATES]
    out.append("## The policy itself\n")
    for key in keys():
        if key.dotted in DOCUMENT_KEYS:
            out.extend(_key_block(key, env=False))
    for section, raw in schema["properties"].items():
        if section in DOCUMENT_KEYS:
            continue
        node = resolve(raw)
        out.append(f"## `{section}`\n")
        out.append(f"{node.get('description', '')}\n")
        if section == "tools":
            out.extend(_tools_section(node))
            continue
        for key in keys(node, f"{section}."):
            out.extend(_key_block(key))
    return "\n".join(out).rstrip() + "\n"


def _key_block(key: Key, *, env: bool = True) -> Iterator[str]:
    yield f"### `{key.dotted}`\n"
    yield f"{key.schema.get('description', '')}\n"
    yield f"* type: {_type(key.schema)}"
    if "default" in key.schema:
        yield f"* default: `{_json(key.default)}`"
    fields = _template_fields(key.dotted)
    if fields:
        yield f"* fields: {', '.join(f'`{{{name}}}`' for name in sorted(fields))}"
    if env:
        names = [f"`{env_name(key.dotted)}`"]
        names += [f"`{alias}` (ChatCLI's name)" for alias, k in ALIASES.items() if k == key.dotted]
        yield f"* environment: {', '.join(names)}"
    yield ""


def _tools_section(node: Mapping[str, Any]) -> Iterator[str]:
    entry = resolve(node["additionalProperties"])
    yield (
        "Each entry is named by a tool, or by a glob pattern (`mcp_*`); it may set:\n\n"
        "```yaml\ntools:\n  read_spilled_file: {exempt: true}\n  sql_query: {max_chars: 40000}\n"
        "  bash: {lines: tail}\n```\n"
    )
    yield (
        f"* default: `{_json(node.get('default'))}`\n"
        f"* environment: `{PREFIX}TOOLS__<TOOL>__<KEY>` sets one key of one entry (the "
        "variable names the tool in lower case)\n"
    )
    requires = entry.get("dependencies", {})
    for name, raw in entry.get("properties", {}).items():
        child = resolve(raw)
        yield f"### `tools.<name>.{name}`\n"
        yield f"{child.get('description', '')}\n"
        yield f"* type: {_type(child)}"
        if name in requires:
            yield f"* needs: {', '.join(f'`{r}`' for r in requires[name])}"
        yield f"* default: `{_json(child.get('default'))}`\n"


def _template_fields(dotted: str) -> frozenset[str]:
    for pattern, allowed in TEMPLATE_RULES:
        if fnmatchcase(dotted, pattern):
            return allowed
    return frozenset()


def _type(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(f"`{_json(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{_json(schema['const'])}`"
    kind = schema.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else str(kind)
    if kind == "array" or (isinstance(kind, list) and "array" in kind):
        item = schema.get("items", {}).get("type")
        text = f"list of {item}s" if item else "list"
    bounds = []
    if "minimum" in schema:
        bounds.append(f"≥ {schema['minimum']}")
    if "exclusiveMinimum" in schema:
        bounds.append(f"> {schema['exclusiveMinimum']}")
    if "maximum" in schema:
        bounds.append(f"≤ {schema['maximum']}")
    if schema.get("minLength"):
        bounds.append("not empty")
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
