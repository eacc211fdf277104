"""Admission at dispatch time: the same bounds as the request-time step, frozen."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import middleware
from middleware.cache import DerivedCache
from middleware.session import decisions
from middleware.session.decisions import DecisionLedger
from tests.preset_builders import batch, outputs, preset


@pytest.mark.parametrize("name", ["chatcli", "claude-code", "ethos", "pi", "hermes"])
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(0, 120_000), tool=st.sampled_from(["read", "bash", "Bash", "grep", "web"]))
def test_admission_equals_what_the_request_time_step_would_send(
    tmp_path: Path, name: str, size: int, tool: str
) -> None:
    output = "".join(f"{i} line of output\n" for i in range(size // 18))[:size]
    with preset(name, tmp_path) as pipe:
        at_request = outputs(pipe.process(batch((tool, output))).messages)[0]
    with preset(name, tmp_path) as pipe:
        admitted = pipe.admit(tool, "t0", output)
        assert admitted.text == at_request
        # Put in the history, the admitted result is left alone...
        assert outputs(pipe.process(batch((tool, admitted.text))).messages) == [admitted.text]
        # ...and a host that sends the raw output gets the admitted text, not a new cut.
        assert outputs(pipe.process(batch((tool, output))).messages) == [admitted.text]


def test_an_admitted_result_is_left_alone_by_the_turn_budget(tmp_path: Path) -> None:
    with preset("chatcli", tmp_path) as pipe:
        texts = [pipe.admit(f"@read{i}", f"t{i}", "r" * 19_000).text for i in range(12)]
        result = pipe.process(batch(*((f"@read{i}", t) for i, t in enumerate(texts))))
        assert outputs(result.messages) == texts  # 228k together: frozen all the same
        assert not result.changed
    with preset("chatcli", tmp_path) as pipe:  # without admission the turn budget cuts
        result = pipe.process(batch(*((f"@read{i}", t) for i, t in enumerate(texts))))
        assert sum(map(len, outputs(result.messages))) <= 200_000


def test_admission_replaces_empty_output_and_reports_the_budget(tmp_path: Path) -> None:
    with preset("claude-code", tmp_path) as pipe:
        admitted = pipe.admit("Bash", "t1", "")
        assert admitted.text == "(Bash completed with no output)" and admitted.changed
        assert admitted.budget == 50_000
        assert [a.kind for a in admitted.actions] == ["empty_replaced"]
        assert pipe.admit("Read", "t2", "x").budget is None  # exempt


def test_admission_uses_the_call_arguments_for_line_rules(tmp_path: Path) -> None:
    with preset("pi", tmp_path) as pipe:
        output = "\n".join(str(i) for i in range(100, 3000))
        admitted = pipe.admit("read", "t1", output, arguments={"path": "a.txt", "offset": 100})
        assert "[Showing lines 100-2099 of 2999. Use offset=2100 to continue]" in admitted.text


def test_admission_of_parallel_calls_takes_the_even_share(tmp_path: Path) -> None:
    with preset("ethos", tmp_path) as pipe:
        admitted = pipe.admit("terminal", "t1", "w" * 50_000, parallel_calls=3)
        assert admitted.budget == 26_666 and len(admitted.text) <= 26_666


def test_decisions_survive_an_export_and_restore() -> None:
    with middleware.Pipeline.from_policy() as pipe:
        admitted = pipe.admit("run", "t0", "q" * 30_000)
        exported = pipe.decisions.export()
    assert exported[0]["made_by"] == "admit" and exported[0]["text"] == admitted.text
    with middleware.Pipeline.from_policy(decisions=exported) as resumed:
        history = batch(("run", "q" * 30_000))
        assert outputs(resumed.process(history).messages) == [admitted.text]
        changed = batch(("run", "p" * 30_000))  # other text under the same id: new decision
        assert outputs(resumed.process(changed).messages) != [admitted.text]


def test_bad_decision_records_and_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="not a decision record"):
        middleware.Pipeline.from_policy(decisions=[{"call_id": "x"}])
    with pytest.raises(ValueError, match="made_by"):
        middleware.Pipeline.from_policy(
            decisions=[{"call_id": "x", "digest": "d", "text": "t", "made_by": "someone"}]
        )
    with middleware.Pipeline.from_policy() as pipe:
        with pytest.raises(TypeError, match="as a string"):
            pipe.admit("run", "t1", b"bytes")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="parallel_calls"):
            pipe.admit("run", "t1", "x", parallel_calls=0)
        with pytest.raises(ValueError, match="tool_use_id as a non-empty string"):
            pipe.admit("run", "", "x")
        with pytest.raises(ValueError, match="context_chars"):
            pipe.admit("run", "t1", "x", context_chars=-1)
    with pytest.raises(RuntimeError, match="closed"):
        pipe.admit("run", "t1", "x")


def test_a_kept_decision_stores_only_the_digest() -> None:
    ledger = middleware.DecisionLedger()
    ledger.record("a", "x" * 100_000, "x" * 100_000, "request")
    ledger.record("b", "y" * 100_000, "preview of y", "request")
    ledger.record("a", "other", "other", "request")  # the first decision for an id wins
    kept, cut = ledger.export()
    assert kept["text"] is None and cut["text"] == "preview of y"
    assert ledger.lookup("a", "x" * 100_000) is not None
    assert ledger.lookup("a", "other") is None  # a changed text is not this decision
    assert ledger.lookup("b", "preview of y") is not None  # the host sent back our output
    assert len(middleware.DecisionLedger(ledger.export())) == 2


def test_line_rule_settings_without_a_line_rule_are_a_policy_error() -> None:
    with pytest.raises(middleware.PolicyError, match=r"\$\.tools\.grep: 'lines' is a dependency"):
        middleware.load_policy(
            env={}, dotenv_path=False, overrides={"tools.grep": {"max_items": 5}}
        )


@pytest.mark.parametrize("name", ["chatcli", "claude-code", "ethos", "hermes"])
def test_a_batch_is_admitted_as_one_turn_like_the_request_time_step(
    tmp_path: Path, name: str
) -> None:
    sizes = [40_000, 45_000, 38_000, 10_000, 0, 70_000, 41_000, 39_000]
    calls = [
        (f"tool{i}", "".join(f"{i}:{j}\n" for j in range(n // 6))[:n]) for i, n in enumerate(sizes)
    ]
    with preset(name, tmp_path) as pipe:
        at_request = outputs(pipe.process(batch(*calls)).messages)
    with preset(name, tmp_path) as pipe:
        admitted = pipe.admit_batch(
            [middleware.ToolOutput(tool, f"t{i}", out) for i, (tool, out) in enumerate(calls)]
        )
        assert [a.text for a in admitted] == at_request
        assert sum(len(a.text) for a in admitted) <= (80_000 if name == "ethos" else 200_000)
        # Sent back raw, the batch gets exactly what was admitted.
        assert outputs(pipe.process(batch(*calls)).messages) == at_request


def test_a_batch_needs_distinct_ids_and_at_least_one_output() -> None:
    with middleware.Pipeline.from_policy() as pipe:
        with pytest.raises(ValueError, match="at least one"):
            pipe.admit_batch([])
        with pytest.raises(ValueError, match="same tool_use_id twice"):
            pipe.admit_batch(
                [middleware.ToolOutput("a", "x", "1"), middleware.ToolOutput("b", "x", "2")]
            )
        with pytest.raises(ValueError, match="at least 2"):
            pipe.admit_batch(
                [middleware.ToolOutput("a", "x", "1"), middleware.ToolOutput("b", "y", "2")],
                parallel_calls=1,
            )


def test_the_ledger_digests_each_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request carries every old result again: the digest a decision is checked by
    is taken once per text, and not at all to record a call id already decided."""

    digested: list[str] = []
    real = decisions.text_digest

    def counting(text: str) -> str:
        digested.append(text)
        return real(text)

    monkeypatch.setattr(decisions, "text_digest", counting)
    ledger = DecisionLedger(cache=DerivedCache(1 << 20))
    ledger.record("call_1", "big output", "preview", "request")
    for _ in range(3):
        found = ledger.lookup("call_1", "big output")
        assert found is not None and found.text == "preview"
        ledger.record("call_1", "big output", "preview", "request")
    assert ledger.lookup("call_1", "another output") is None
    assert digested == ["big output", "another output"]
