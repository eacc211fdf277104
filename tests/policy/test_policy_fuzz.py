"""Fuzzing the policy loader: whatever the YAML text, the ``.env`` file or the environment
values, ``load_policy`` returns a valid ``Policy`` or raises a one-line ``PolicyError``,
nothing else (issue #13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from middleware import PolicyError, load_policy
from middleware.policy.env import ALIASES, env_name
from middleware.policy.schema import keys, policy_schema

#: Every variable that sets a key (the dunder names and ChatCLI's aliases).
VARIABLES = sorted({env_name(key.dotted) for key in keys()} | set(ALIASES))
#: Every key's dotted name, to place random values where the schema looks.
KEYS = sorted(key.dotted for key in keys())

#: Derandomized, so CI runs the same examples every time (run with a higher max_examples
#: and derandomize=False locally to explore).
FUZZ = settings(
    max_examples=150,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

numbers = st.one_of(
    st.integers(),
    st.integers(min_value=2**53 - 2, max_value=2**53 + 2),
    st.integers(min_value=10**300, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 256, 20_000, 0.5, 1e-300, 1e308]),
)
texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "{head}", "{nope}", "{", "}", "(", "preset:pi", "default", "~", "null",
                     "yes", "no", ".nan", ".inf", "-.inf", "2026-11-23", "0x1F", "1_000", "1:30",
                     "*a", "&a", "!!python/object:os.system", "\x00", "\ud7ff", "é", "<<"]),
)  # fmt: skip
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(texts, st.sampled_from(KEYS)), children, max_size=4),
    ),
    max_leaves=20,
)


@st.composite
def documents(draw: st.DrawFn) -> Any:
    """A policy-shaped mapping: mostly real keys (so the schema's checks run), random
    values, sometimes random extra keys, sometimes no ``version``."""
    document: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        document["version"] = draw(st.one_of(st.just(1), scalars))
    for dotted in draw(st.lists(st.sampled_from(KEYS), max_size=6)):
        node = document
        *parents, last = dotted.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[last] = draw(values)
    document.update(draw(st.dictionaries(texts, values, max_size=2)))
    return document


def dump(document: Any) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


def nest(text: str, depth: int) -> str:
    return "[" * depth + text + "]" * depth


@st.composite
def yaml_texts(draw: st.DrawFn) -> str | bytes:
    """YAML as a writer (or an attacker) might produce it: dumped documents, the same with
    anchors and aliases, deep nesting, edits of valid text, arbitrary text and bytes."""
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return dump(draw(documents()))
    if kind == 1:  # aliases, maybe of aliases
        levels = draw(st.integers(1, 8))
        width = draw(st.integers(1, 12))
        lines = ["version: 1", "x0: &a0 [lol]"]
        for i in range(1, levels + 1):
            lines.append(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
        last = ["tools: *a0", "name: *a1", f"tools: {{t: *a{levels}}}", "budget: &b {x: *b}",
                "<<: *a0", ""]  # fmt: skip
        lines.append(draw(st.sampled_from(last)))
        return "\n".join(lines) + "\n"
    if kind == 2:  # deep nesting
        depth = draw(st.integers(20, 3000))
        key = draw(st.sampled_from(["name", "tools", "microcompact"]))
        return f"version: 1\n{key}: {nest(draw(st.sampled_from(['', '1', 'a: b', '{}'])), depth)}\n"
    if kind == 3:  # a valid document with a few characters changed
        text = dump(draw(documents()))
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(
                [":", "- ", "\t", "'", '"', "{", "[", "&a ", "*a", "!!", "\n  ", "#", "\x00",
                 "\ufeff", "? ", "<<: ", "%YAML 1.1\n---\n", "\n---\n"])) + text[at:]  # fmt: skip
        return text
    if kind == 4:
        return draw(st.text(max_size=200))
    if kind == 5:
        return draw(st.binary(max_size=200))
    odd = ["1e309", "1.0e+309", ".nan", "-.inf", "9" * 5000, "0x" + "f" * 40, "2026-13-45",
           "1:2:3:4:5", "0b" + "1" * 60]  # fmt: skip
    number = draw(st.sampled_from(odd))
    key = draw(st.sampled_from(KEYS))
    return (
        "version: 1\n"
        + "".join(f"{'  ' * i}{part}:\n" for i, part in enumerate(key.split(".")[:-1]))
        + f"{'  ' * key.count('.')}{key.rsplit('.', 1)[-1]}: {number}\n"
    )


env_values = st.one_of(
    texts,
    numbers.map(str),
    st.sampled_from(["nan", "NaN", "inf", "-Infinity", "1e309", "9" * 5000, "20k", "-5", "1_000",
                     "[]", "{}", '{"max_chars": NaN}', '{"max_chars": 1e400}', '["a", 1]',
                     nest("", 2000), '{"a": ' * 50 + "1" + "}" * 50, "true", "off", " 42 "]),
    values.map(lambda v: json.dumps(v, allow_nan=True)),
)  # fmt: skip
environments = st.dictionaries(st.sampled_from(VARIABLES), env_values, max_size=3)


def check(outcome: Any) -> None:
    """What every load must end in: a valid, finite, JSON-clean policy."""
    document = outcome.to_dict()
    jsonschema.Draft7Validator(policy_schema()).validate({"version": 1, **document})
    canonical = json.dumps(document, allow_nan=False)  # raises on NaN or infinity
    assert json.loads(canonical) == document
    assert outcome.digest


def attempt(**kwargs: Any) -> None:
    try:
        policy = load_policy(**kwargs)
    except PolicyError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert len(message) < 1000, message
        return
    check(policy)


@FUZZ
@given(text=yaml_texts())
def test_any_yaml_text_loads_or_is_a_policy_error(tmp_path: Path, text: str | bytes) -> None:
    path = tmp_path / "fuzz.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        try:
            path.write_text(text, encoding="utf-8")
        except UnicodeEncodeError:  # a lone surrogate: not writable as UTF-8 text
            assume(False)
    attempt(path=path, env={}, dotenv_path=False)


@FUZZ
@given(env=environments)
def test_any_environment_loads_or_is_a_policy_error(env: dict[str, str]) -> None:
    attempt(env=env, dotenv_path=False)


@FUZZ
@given(env=environments)
def test_any_dotenv_file_loads_or_is_a_policy_error(tmp_path: Path, env: dict[str, str]) -> None:
    dotenv = tmp_path / ".env"
    lines = [f"{name}={json.dumps(value)}" for name, value in env.items()]
    try:
        dotenv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    except UnicodeEncodeError:
        assume(False)
    attempt(env={}, dotenv_path=dotenv)


@FUZZ
@given(overrides=st.dictionaries(st.sampled_from(KEYS), values, max_size=3))
def test_any_overrides_load_or_are_a_policy_error(overrides: dict[str, Any]) -> None:
    attempt(env={}, dotenv_path=False, overrides=overrides)
