"""Readings kept beside a session's spill files (``middleware.cache.kept``): a pipeline that
starts cold on a folder an earlier one filled reads the outlines of its previews and what
its summaries keep instead of working them out, and sends exactly what a pipeline without
any cache sends. A reading that is not exactly what this code wrote is worked out again."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from session_builders import listing as output
from session_builders import long_results as history

import middleware
from middleware.cache import DerivedCache, kept
from middleware.cache.kept import MIN_TEXT_CHARS, KeptReadings, ReadingStore
from middleware.spill.layout import READINGS
from middleware.spill.objects import ObjectWorkspace
from middleware.spill.workspace import SpillWorkspace
from middleware.steps import previews
from middleware.steps.microcompact import readings


def pipeline(root: Path, **kwargs: Any) -> middleware.Pipeline:
    policy = middleware.load_policy(
        None, env={}, dotenv_path=False, overrides={"spill": {"root": str(root), "keep": True}}
    )
    return middleware.Pipeline(policy, session_id="kept", **kwargs)


def sent(pipe: middleware.Pipeline, request: list[Any]) -> str:
    result = pipe.process(request, format="anthropic")
    return json.dumps(result.output) + result.report.to_json()


class Counted:
    """How many long texts the outline and the summary's mentions were worked out for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.outlines = 0
        self.mentions = 0
        outline, mentions = previews.outline, readings.mentions

        def counted_outline(text: str, *args: int, reports: bool = True) -> str:
            self.outlines += 1
            return outline(text, *args, reports=reports)

        def counted_mentions(text: str, limit: int) -> list[str]:
            self.mentions += len(text) >= MIN_TEXT_CHARS
            return mentions(text, limit)

        monkeypatch.setattr(previews, "outline", counted_outline)
        monkeypatch.setattr(readings, "mentions", counted_mentions)


def kept_files(root: Path) -> list[Path]:
    return sorted((root / "chatcli-agent-kept" / READINGS).glob("*.json"))


def test_a_cold_pipeline_reads_what_an_earlier_one_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    request = history()
    with pipeline(tmp_path, cache=DerivedCache(0)) as uncached:
        expected = sent(uncached, request)
    assert not kept_files(tmp_path)  # nothing is kept without a cache
    counted = Counted(monkeypatch)
    with pipeline(tmp_path) as first:
        assert sent(first, request) == expected
    assert counted.outlines and counted.mentions  # worked out, and kept:
    files = kept_files(tmp_path)
    assert {f.name.split("-")[0] for f in files} == {"outline", "summary"}
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in files)
    counted.outlines = counted.mentions = 0
    with pipeline(tmp_path) as cold:  # a restart: a fresh cache, the same folder
        assert sent(cold, request) == expected
    assert (counted.outlines, counted.mentions) == (0, 0)


def tamper_name(path: Path) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "reading": "outline-" + "0" * 40}))


def tamper_shape(path: Path) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "value": [["x"], "not a list", "text", 1]}))


def tamper_json(path: Path) -> None:
    path.write_text(path.read_text()[:-5])


def tamper_mode(path: Path) -> None:
    data = json.loads(path.read_text())
    bogus = "\nLines from the omitted part:\n1: planted" if data["reading"][0] == "o" else None
    if bogus is not None:
        path.write_text(json.dumps({**data, "value": bogus}))
    path.chmod(0o644)  # another user could have written it


def tamper_link(path: Path) -> None:
    target = path.with_name("elsewhere")
    target.write_text(path.read_text())
    target.chmod(0o600)
    path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize(
    "tamper", [tamper_name, tamper_shape, tamper_json, tamper_mode, tamper_link]
)
def test_a_reading_that_is_not_exactly_what_was_kept_is_worked_out_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tamper: Callable[[Path], None]
) -> None:
    request = history()
    with pipeline(tmp_path, cache=DerivedCache(0)) as uncached:
        expected = sent(uncached, request)
    with pipeline(tmp_path) as first:
        sent(first, request)
    files = kept_files(tmp_path)
    for path in files:
        tamper(path)
    counted = Counted(monkeypatch)
    with pipeline(tmp_path) as cold:
        assert sent(cold, request) == expected
    assert counted.outlines + counted.mentions == len(files)


def test_readings_of_other_code_are_never_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    request = history()
    with pipeline(tmp_path) as first:
        expected = sent(first, request)
    before = kept_files(tmp_path)
    monkeypatch.setattr(kept, "_code_digest", lambda modules: "another version")
    counted = Counted(monkeypatch)
    with pipeline(tmp_path) as cold:
        assert sent(cold, request) == expected
    assert counted.outlines + counted.mentions == len(before)
    assert len(kept_files(tmp_path)) == 2 * len(before)  # kept apart, under other names


def test_without_the_source_of_a_module_nothing_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kept._code_digest.cache_clear()
    monkeypatch.setattr(kept.inspect, "getsource", lambda module: (_ for _ in ()).throw(OSError()))
    try:
        with pipeline(tmp_path) as pipe:
            sent(pipe, history())
    finally:
        kept._code_digest.cache_clear()
    assert not kept_files(tmp_path)


def test_only_a_local_workspace_keeps_readings(tmp_path: Path) -> None:
    """An object store's round trip costs more than the reading it would save."""
    assert isinstance(SpillWorkspace("s", tmp_path), ReadingStore)
    assert not issubclass(ObjectWorkspace, ReadingStore)


def test_the_workspace_keeps_a_reading_only_under_its_own_names(tmp_path: Path) -> None:
    workspace = SpillWorkspace("s", tmp_path)
    name = "outline-" + "a" * 40
    workspace.save_reading(name, "content")
    assert workspace.load_reading(name, str) == "content"
    assert workspace.load_reading("../" + name, str) is None
    assert workspace.load_reading("outline-" + "b" * 40, str) is None
    with pytest.raises(ValueError, match="not a reading name"):
        workspace.save_reading("../../etc/x", "content")
    workspace.close()
    workspace.save_reading(name, "closed")  # best effort: logged, never raised


def test_an_unsafe_folder_of_readings_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = SpillWorkspace("s", tmp_path, keep=True)
    folder = workspace.session_dir / READINGS
    workspace.save_reading("outline-" + "a" * 40, "content")
    folder.chmod(0o755)
    other = SpillWorkspace("s", tmp_path, keep=True)
    with caplog.at_level(logging.INFO, logger="middleware.spill.workspace"):
        other.save_reading("outline-" + "c" * 40, "content")
    assert "other users can access it" in caplog.text
    assert not (folder / ("outline-" + "c" * 40 + ".json")).exists()
    workspace.close()
    other.close()


def test_short_texts_are_worked_out_not_kept(tmp_path: Path) -> None:
    store = SpillWorkspace("s", tmp_path)
    readings_kept = KeptReadings(DerivedCache(10**6), store)
    short = "x" * (MIN_TEXT_CHARS - 1)
    calls: list[int] = []
    value = readings_kept.derive(
        previews.OUTLINE, ("outline", short, 1, 2, 3), lambda: calls.append(1) or "o", 1
    )
    assert value == "o" and calls == [1]
    assert not os.path.exists(store.session_dir / READINGS)
    store.close()


def test_a_reading_outlives_the_text_the_cache_let_go(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """More sessions live than the cache holds the texts of (on an object store, which
    keeps no readings): the entries keyed by a session's texts are evicted, and on its
    next request each text is digested again but its outline and summary are not worked
    out again; the output is what a cacheless pipeline sends."""
    counted = Counted(monkeypatch)
    request = history()
    texts = [m["content"][0]["content"] for m in request[2::2]]
    cache = DerivedCache(64_000_000)
    assert cache.readings is not None
    first = sent(pipeline(tmp_path / "a", cache=cache), request)
    worked = (counted.outlines, counted.mentions)
    assert worked[0] > 0 and worked[1] > 0
    assert cache.discard(texts=texts) > sum(map(len, texts))  # every text-keyed entry
    again = sent(pipeline(tmp_path / "b", cache=cache), request)
    assert (counted.outlines, counted.mentions) == worked
    assert cache.readings.stats().hits == worked[0] + worked[1]
    bare = sent(pipeline(tmp_path / "c", cache=DerivedCache(0)), request)
    assert first.replace(str(tmp_path / "a"), "~") == bare.replace(str(tmp_path / "c"), "~")
    assert again.replace(str(tmp_path / "b"), "~") == bare.replace(str(tmp_path / "c"), "~")


def test_a_reading_is_found_by_its_texts_digest_only_for_that_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A text of the same length and shape but one character changed is read anew."""
    counted = Counted(monkeypatch)
    cache = DerivedCache(10_000_000)
    kept_readings = KeptReadings(cache, None)
    text = output(1, 400)
    other = text.replace("value_1_200 ", "value_1_201 ", 1)
    assert len(other) == len(text) and other != text
    span = (1_000, len(text) - 1_000, 600)
    for subject in (text, other, text):
        cache.discard(texts=(subject,))  # the text-keyed entry gone: only the digest is left
        kept_readings.derive(
            previews.OUTLINE,
            ("outline", subject, *span),
            lambda s=subject: previews.outline(s, *span),
            600,
            (subject,),
        )
    assert counted.outlines == 2
