"""One source of truth per policy key: the schema holds every default, the default policy
file restates none, and the settings classes read exactly the schema's keys."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import fields

import jsonschema
import pytest
import yaml

import middleware
from middleware import load_policy
from middleware.policy.document import Policy
from middleware.policy.resources import default_policy_path
from middleware.policy.schema import DOCUMENT_KEYS, default_of, defaults, key_schema, keys
from middleware.policy.settings import SECTIONS, bind, bound_keys
from middleware.steps.budget.settings import tool_settings


def import_everything() -> None:
    """Import every module, so every settings class is registered."""
    for module in pkgutil.walk_packages(middleware.__path__, "middleware."):
        if not module.name.endswith("__main__"):  # that one runs the command line
            importlib.import_module(module.name)


import_everything()
#: The settings classes of whole sections (not of one ``tools`` entry).
SECTION_SETTINGS = sorted(
    (cls for cls, where in SECTIONS.items() if "*" not in where), key=lambda cls: cls.__name__
)


def bound() -> Iterator[tuple[type, str]]:
    for cls, where in SECTIONS.items():
        for key in bound_keys(cls, where):
            yield cls, key


def test_every_key_has_a_valid_default_in_the_schema() -> None:
    for key in keys():
        if key.dotted in DOCUMENT_KEYS:
            continue
        assert "default" in key.schema, f"{key.dotted} has no default in the schema"
        assert key.schema.get("title") and key.schema.get("description"), key.dotted
        jsonschema.Draft7Validator(key.schema).validate(key.default)


def test_the_defaults_form_a_valid_policy() -> None:
    document = {"version": 1, **defaults()}
    jsonschema.Draft7Validator(middleware.policy.schema.policy_schema()).validate(document)


def test_the_default_policy_file_restates_no_default() -> None:
    document = yaml.safe_load(default_policy_path().read_text(encoding="utf-8"))
    assert set(document) <= DOCUMENT_KEYS


def test_every_key_a_settings_class_reads_is_in_the_schema() -> None:
    for cls, key in bound():
        assert key_schema(key) is not None, f"{cls.__name__} reads {key}, which is not a key"


def test_every_schema_key_is_read_by_a_settings_class() -> None:
    read = {key for _, key in bound()}
    covered = read | {"tools"}  # tools.* entries: ToolSettings
    for key in keys():
        if key.dotted in DOCUMENT_KEYS:
            continue
        parts = key.dotted.split(".")
        prefixes = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
        assert prefixes & covered, f"no settings class reads {key.dotted}"


@pytest.mark.parametrize("cls", SECTION_SETTINGS, ids=lambda cls: cls.__name__)
def test_a_loaded_policy_and_the_schema_defaults_bind_alike(cls: type) -> None:
    loaded = bind(load_policy(env={}, dotenv_path=False), cls)
    bare = bind(Policy({"version": 1}, "hand-made"), cls)  # every key from the schema
    assert loaded == bare
    assert [f.name for f in fields(cls)]  # a settings class reads something


def test_bound_settings_are_built_once_per_snapshot() -> None:
    policy = load_policy(env={}, dotenv_path=False)
    budget = next(cls for cls, where in SECTIONS.items() if where == "budget")
    assert bind(policy, budget) is bind(policy, budget)


def test_a_tool_entry_reads_the_schema_defaults_for_what_it_leaves_out() -> None:
    policy = load_policy(
        env={}, dotenv_path=False, overrides={"tools": {"grep": {"lines": "head"}}}
    )
    entry = tool_settings(policy, "grep")
    assert entry is not None
    key, settings = entry
    assert key == "grep"
    assert settings.lines == "head"
    assert settings.noun == default_of("tools.*.noun") == "results"
    assert settings.max_chars is None
    assert settings.notices == {}
