"""A policy text is parsed once and kept by its content (policy/files.py): loading the
embedded default again parses nothing, an edited file is always parsed again (a reload
sees the edit, of the same size and in the same second included), and every caller gets a
document of its own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from middleware.errors import PolicyError
from middleware.policy import files, load_policy


def loaded(path: Path) -> dict[str, Any]:
    return load_policy(path, env={}, dotenv_path=False).to_dict()


def test_loading_the_default_again_parses_nothing() -> None:
    load_policy(None, env={}, dotenv_path=False)
    before = files._parsed.cache_info()
    load_policy(None, env={}, dotenv_path=False)
    after = files._parsed.cache_info()
    assert after.misses == before.misses and after.hits > before.hits


def test_an_edit_of_the_same_size_and_time_is_read(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nbudget:\n  max_result_chars: 11111\n", "utf-8")
    stamp = os.stat(policy).st_mtime_ns
    assert loaded(policy)["budget"]["max_result_chars"] == 11111
    policy.write_text("version: 1\nbudget:\n  max_result_chars: 22222\n", "utf-8")
    os.utime(policy, ns=(stamp, stamp))
    assert loaded(policy)["budget"]["max_result_chars"] == 22222


def test_each_reader_gets_a_document_of_its_own(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\ntools:\n  Bash:\n    max_chars: 1000\n", "utf-8")
    document, lines = files.read_policy_file(policy)
    document["tools"]["Bash"]["max_chars"] = 5
    lines.clear()
    again, lines_again = files.read_policy_file(policy)
    assert again["tools"]["Bash"]["max_chars"] == 1000 and lines_again


def test_a_broken_text_fails_every_time_it_is_read(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\nbudget: [\n", "utf-8")
    for _ in range(2):
        with pytest.raises(PolicyError, match=str(policy)):
            files.read_policy_file(policy)
