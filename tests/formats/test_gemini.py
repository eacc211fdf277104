"""Gemini ``generateContent`` as a wire format: pairing by id or by name and position
within a turn, repairs judged by Gemini's own rules (check_history, written apart from the
repair), budgets and microcompaction on ``functionResponse.response``, detection, and what
is never touched (signatures, thoughts, unknown fields)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from locations import REPO

import middleware
from middleware.formats import detect_format, get_codec

COUNT_RULE = "Please ensure that the number of function response parts is equal"
AFTER_RULE = "Please ensure that function response turn comes immediately after"


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def text(words: str) -> dict[str, Any]:
    return {"text": words}


def call(name: str, uid: str | None = None, **args: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "args": args}
    return {"functionCall": {"id": uid, **body} if uid else body}


def answer(name: str, output: Any, uid: str | None = None, key: str = "output") -> dict[str, Any]:
    response = output if isinstance(output, dict) else {key: output}
    body: dict[str, Any] = {"name": name, "response": response}
    return {"functionResponse": {"id": uid, **body} if uid else body}


#: The spill files of the last :func:`processed` call (a pipeline removes its workspace
#: when it closes), by path.
SPILLED: dict[str, str] = {}


def processed(history: Any, tmp_path: Path, **overrides: Any) -> Any:
    overrides = {"spill.root": str(tmp_path), **overrides}
    policy = middleware.load_policy(None, env={}, dotenv_path=False, overrides=overrides)
    before = copy.deepcopy(history)
    with middleware.Pipeline.from_policy(policy, session_id="gemini") as pipe:
        result = pipe.process(history)
        again = pipe.process(result.output)
        SPILLED.clear()
        SPILLED.update({str(f): f.read_text("utf-8") for f in tmp_path.rglob("tool-results/*")})
    assert history == before  # never mutated
    assert again.output == result.output  # idempotent
    assert result.format == "gemini"
    return result


def codes(history: list[dict[str, Any]]) -> list[str]:
    return [v.code for v in middleware.check_history(history, "gemini")]


def kinds(result: Any) -> list[str]:
    return [action.kind for action in result.report.actions]


# -- pairing --------------------------------------------------------------------------------


def test_a_valid_history_passes_through_as_the_same_objects(tmp_path: Path) -> None:
    signed = {**call("read_file", file_path="a"), "thoughtSignature": "c2ln"}
    history = [
        user(text("Read a.")),
        model({"text": "thinking", "thought": True}, signed),
        user(answer("read_file", "contents of a")),
        model(text("Done.")),
    ]
    result = processed(history, tmp_path)
    assert not result.changed and codes(history) == []
    assert all(a is b for a, b in zip(result.messages, history, strict=True))


def test_a_call_left_without_its_response_gets_an_error_response_named_after_it(
    tmp_path: Path,
) -> None:
    history = [
        user(text("Build and test.")),
        model(call("make", target="all"), call("pytest", "call_7")),
        user(answer("make", "built")),
        model(text("Built.")),
    ]
    assert codes(history) == ["missing_result"]
    assert COUNT_RULE in middleware.check_history(history, "gemini")[0].reason
    result = processed(history, tmp_path)
    built, missing = result.messages[2]["parts"]
    assert built == history[2]["parts"][0]
    assert missing["functionResponse"]["id"] == "call_7"  # the call's own id, when it has one
    assert missing["functionResponse"]["name"] == "pytest"
    assert "Tool result missing" in missing["functionResponse"]["response"]["error"]
    assert codes(result.messages) == [] and kinds(result) == ["synthetic_result"]

    unnamed_id = [user(text("Go.")), model(call("make")), user(text("Well?"))]
    repaired = processed(unnamed_id, tmp_path).messages
    assert codes(repaired) == [] and "id" not in repaired[2]["parts"][0]["functionResponse"]
    assert repaired[2]["parts"][1] == text("Well?")  # the responses come first


def test_the_responses_a_resumed_gemini_cli_session_sends_twice_are_sent_once(
    tmp_path: Path,
) -> None:
    """Gemini CLI 0.61 sends every old response twice after ``--resume`` (its session
    file holds each one twice): Gemini refuses the count, the session is dead. The
    duplicates are dropped, reported with their content."""
    uid = "run_shell_command_1795763778449_0"
    history = [
        user(text("<session_context>...</session_context>"), text("Run it.")),
        model(call("run_shell_command", uid, command="ls")),
        user(answer("run_shell_command", "a.txt", uid), answer("run_shell_command", "a.txt", uid)),
        model(text("One file.")),
        user(text("Go on.")),
    ]
    assert codes(history) == ["duplicate_result"]
    result = processed(history, tmp_path)
    assert result.messages[2]["parts"] == [history[2]["parts"][0]]
    (dropped,) = result.report.actions
    assert dropped.kind == "duplicate_result_dropped" and dropped.detail["content"] == "a.txt"
    assert codes(result.messages) == []


def test_responses_without_ids_answer_by_name_and_position_whatever_their_order(
    tmp_path: Path,
) -> None:
    """Gemini's Developer API sends calls without ids; Gemini CLI answers them with ids of
    its own. Either way the k-th response named N answers the k-th call named N."""
    history = [
        user(text("Look around.")),
        model(
            call("read_file", file_path="a"),
            call("glob", pattern="*"),
            call("read_file", file_path="b"),
        ),
        user(
            answer("glob", "a b", "glob_1_1"),
            answer("read_file", "A", "read_file_1_0"),
            answer("read_file", "B"),
        ),
    ]
    result = processed(history, tmp_path)
    assert not result.changed and codes(history) == []
    conversation = get_codec("gemini").parse(history)
    calls = {c.id: c.arguments for c in conversation.nodes[1].calls}
    paired = {r.text: calls[r.call_id] for r in conversation.nodes[2].results}
    assert paired == {"a b": {"pattern": "*"}, "A": {"file_path": "a"}, "B": {"file_path": "b"}}


def test_a_response_whose_id_matches_no_call_is_an_orphan_not_answered_by_name(
    tmp_path: Path,
) -> None:
    """Name and position pair only calls that carry no id: a response whose id matches no
    call of its turn does not answer a call of its name that carries another id (Gemini
    refuses it, as check does). It is dropped, reported with its content, and the call gets
    its synthetic response, with its own id."""
    history = [
        user(text("Read a.")),
        model(call("read_file", "call_a", file_path="a")),
        user(answer("read_file", "from another turn", "call_z")),
        model(text("Done.")),
    ]
    assert codes(history) == ["orphan_result"]
    (response,) = get_codec("gemini").parse(history).nodes[2].results
    assert response.call_id == "call_z"  # not the call's: nothing pairs them
    result = processed(history, tmp_path)
    assert codes(result.messages) == []
    (synthetic,) = result.messages[2]["parts"]
    assert synthetic["functionResponse"]["id"] == "call_a"
    assert "Tool result missing" in synthetic["functionResponse"]["response"]["error"]
    dropped, made = result.report.actions
    assert (dropped.kind, dropped.tool_call_id) == ("orphan_dropped", "call_z")
    assert dropped.detail["content"] == "from another turn"
    assert (made.kind, made.tool_call_id) == ("synthetic_result", "call_a")


def test_in_a_turn_with_ids_a_foreign_id_answers_no_call_without_one(tmp_path: Path) -> None:
    """A turn mixing calls with and without ids: a response carrying an id none of them has
    does not answer the call without one (Gemini checks the ids of a turn that has them);
    a response without an id still answers a call of its name by position, whatever id
    that call has."""
    history = [
        user(text("Read a and b, then c.")),
        model(call("read_file", "call_a", file_path="a"), call("read_file", file_path="b")),
        user(answer("read_file", "B?", "call_z"), answer("read_file", "A", "call_a")),
        model(call("read_file", "call_c", file_path="c")),
        user(answer("read_file", "C")),
    ]
    assert codes(history) == ["orphan_result"]
    result = processed(history, tmp_path)
    assert codes(result.messages) == []
    a, missing = result.messages[2]["parts"]
    assert a == history[2]["parts"][1]
    assert "id" not in missing["functionResponse"]  # the call had none
    assert result.messages[3:] == history[3:]  # C answers call_c by name: kept as it is
    assert [(x.kind, x.detail.get("content")) for x in result.report.actions] == [
        ("orphan_dropped", "B?"), ("synthetic_result", None)]  # fmt: skip


def test_an_explicit_id_that_looks_like_a_position_is_kept_and_pairs_by_id(
    tmp_path: Path,
) -> None:
    """The view names a call without an id after its place (``gemini-position:1:1``); a
    call or a response carrying such an id on the wire is not taken for that place: a
    valid history goes through as it came, and a response spoofing a place's name in a
    turn with ids answers nothing."""
    valid = [
        user(text("Go.")),
        model(call("f", "gemini-position:1:1"), call("g")),
        user(answer("f", "F", "gemini-position:1:1"), answer("g", "G")),
    ]
    assert codes(valid) == []
    result = processed(valid, tmp_path)
    assert not result.changed and kinds(result) == []
    spoofed = [
        user(text("Go.")),
        model(call("f", "call_f"), call("g")),
        user(answer("f", "F", "call_f"), answer("g", "G?", "gemini-position:1:1")),
    ]
    assert codes(spoofed) == ["orphan_result"]
    result = processed(spoofed, tmp_path)
    assert codes(result.messages) == [] and result.messages[1] == spoofed[1]
    assert [(x.kind, x.detail.get("content")) for x in result.report.actions] == [
        ("orphan_dropped", "G?"), ("synthetic_result", None)]  # fmt: skip


def test_a_late_response_moves_right_after_its_call_and_an_orphan_goes(tmp_path: Path) -> None:
    history = [
        user(answer("read_file", "from nowhere"), text("Start.")),  # no call before it
        model(call("read_file", file_path="a")),
        user(text("Hurry.")),
        user(answer("read_file", "A"), answer("grep", "no such call")),
    ]
    assert set(codes(history)) == {"orphan_result", "missing_result"}
    assert AFTER_RULE in middleware.check_history(history, "gemini")[0].reason
    result = processed(history, tmp_path)
    assert codes(result.messages) == []
    assert result.messages[0] == user(text("Start."))
    assert result.messages[2]["parts"][0] == history[3]["parts"][0]
    dropped = [a.detail["content"] for a in result.report.actions if a.kind == "orphan_dropped"]
    assert sorted(dropped) == ["from nowhere", "no such call"]
    assert "result_relocated" in kinds(result)


def test_an_unnamed_call_is_dropped_with_what_answers_it(tmp_path: Path) -> None:
    history = [user(text("Go.")), model(text("Trying."), call(" ")), user(answer(" ", "?"))]
    assert "empty_name" in codes(history)
    result = processed(history, tmp_path)
    assert codes(result.messages) == [] and result.messages[1] == model(text("Trying."))


# -- budget and microcompaction on functionResponse.response ---------------------------------


def test_an_output_over_the_cap_is_spilled_in_its_own_key(tmp_path: Path) -> None:
    big = "".join(f"row {i:04d} {'x' * 90}\n" for i in range(1, 201))
    history = [
        user(text("Build it.")),
        model(call("run_shell_command", "c1", command="make big")),
        user(answer("run_shell_command", {"output": big, "exit_code": 0}, "c1")),
    ]
    result = processed(history, tmp_path)
    response = result.messages[2]["parts"][0]["functionResponse"]
    assert response["response"]["exit_code"] == 0 and response["id"] == "c1"
    preview = response["response"]["output"]
    assert len(preview) < 6_000 and "full output saved to" in preview
    (spilled,) = result.report.by_step("budget")
    assert SPILLED[spilled.detail["path"]] == big


def test_a_response_of_several_texts_is_spilled_as_its_json(tmp_path: Path) -> None:
    fields = {"stdout": "out\n" * 2_000, "stderr": "warn\n" * 10}
    history = [user(text("Run.")), model(call("run", "c1")), user(answer("run", fields, "c1"))]
    result = processed(history, tmp_path)
    response = result.messages[2]["parts"][0]["functionResponse"]["response"]
    assert list(response) == ["output"] and "full output saved to" in response["output"]
    (spilled,) = result.report.by_step("budget")
    assert json.loads(SPILLED[spilled.detail["path"]]) == fields


def test_old_outputs_are_compacted_and_the_new_ones_kept(tmp_path: Path) -> None:
    lines = "".join(f"{'a' * 99}\n" for _ in range(150))  # 15,000 chars
    history = [user(text("Investigate."))]
    for i, output in enumerate([lines, "ok", "ok"]):
        history += [model(call("run_shell_command", command=f"step {i}")),
                    user(answer("run_shell_command", output))]  # fmt: skip
    previous = REPO / "policies" / "baselines" / "previous-default.yaml"
    policy = middleware.load_policy(previous, env={}, dotenv_path=False, overrides={
        "spill.root": str(tmp_path), "microcompact.schedule.rewrite_cost": 0,
        "microcompact.schedule.expected_turns_min": 0})  # fmt: skip
    with middleware.Pipeline.from_policy(policy, session_id="mc") as pipe:
        result = pipe.process(history)
        (action,) = result.report.by_step("microcompact")
        assert Path(action.detail["path"]).read_text("utf-8") == lines
    outputs = [m["parts"][0]["functionResponse"]["response"]["output"]
               for m in result.messages[2::2]]  # fmt: skip
    assert outputs[1:] == ["ok", "ok"]
    assert outputs[0].startswith("[Old tool result cleared — 150 lines, 15000 chars")
    assert action.detail["path"] in outputs[0]


# -- reading: detection, bodies, malformed contents ----------------------------------------


def test_detected_from_its_parts_and_model_role_and_read_from_a_request_body(
    tmp_path: Path,
) -> None:
    history = [user(text("Hi.")), model(text("Hello."))]
    detected = detect_format(history)
    assert detected.format == "gemini" and detected.evidence == "message 0: 'parts' field"
    body = {"contents": [*history, user(text("Bye."))], "systemInstruction": user(text("Be."))}
    result = processed(body, tmp_path)
    assert result.output == body and result.messages == body["contents"]


def test_a_body_going_on_from_an_explicit_cache_is_not_repaired(tmp_path: Path) -> None:
    """With ``cachedContent`` the provider holds earlier turns: a response at the start of
    ``contents`` may answer a call in the cache, and is no orphan."""
    contents = [user(answer("read_file", "A", "call_in_cache")), model(text("Done."))]
    body = {"cachedContent": "cachedContents/build-log-7", "contents": contents}
    result = processed(body, tmp_path)
    assert not result.changed and result.output == body


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ({"role": "user"}, "a content needs 'parts'"),
        ({"role": "system", "parts": []}, "unknown role 'system'"),
        (user(call("x")), "a functionCall part must be in a model content"),
        (model(answer("x", "y")), "a functionResponse part must be in a user content"),
        (user({"functionResponse": {"name": "x", "response": "text"}}), "must be a JSON object"),
        (model({"functionCall": {"name": "x", "args": [1]}}), "'functionCall.args' must be"),
        ({"role": "user", "parts": ["text"]}, "part 0 must be a JSON object"),
    ],
)
def test_a_malformed_content_is_refused_saying_what_to_change(
    content: dict[str, Any], says: str
) -> None:
    with pytest.raises(middleware.HistoryError, match=says) as raised:
        get_codec("gemini").parse([user(text("Hi.")), content])
    assert raised.value.index == 1


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "chatcli-mw"
    return subprocess.run([str(script), *args], capture_output=True, text=True, cwd=cwd,
                          check=False, env={"PATH": "/usr/bin:/bin"})  # fmt: skip


def test_the_cli_processes_and_checks_a_gemini_history(tmp_path: Path) -> None:
    history = [user(text("Go.")), model(call("make")), user(text("Well?"))]
    path = tmp_path / "gemini.json"
    path.write_text(json.dumps({"contents": history}), "utf-8")
    checked = run("check", str(path), cwd=tmp_path)
    assert checked.returncode == 1 and COUNT_RULE in checked.stdout
    done = run("process", str(path), "-o", str(tmp_path / "out.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads((tmp_path / "out.json").read_text("utf-8"))
    assert codes(out["contents"]) == []
    simulated = run("simulate", str(path), cwd=tmp_path)
    assert simulated.returncode == 0 and "1 session(s), 1 requests" in simulated.stdout


# -- a property: whatever is broken, the result keeps Gemini's rules ------------------------


@st.composite
def broken_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Turns of calls (with or without ids, names from a small set), their responses
    dropped, doubled, reordered or moved to a later content, stray ones added."""
    names = st.sampled_from(["read_file", "glob", "run_shell_command"])
    history = [user(text("Start."))]
    for turn in range(draw(st.integers(1, 4))):
        calls = [(draw(names), draw(st.booleans())) for _ in range(draw(st.integers(1, 3)))]
        history.append(model(*[call(n, f"id_{turn}_{k}" if with_id else None, k=k)
                               for k, (n, with_id) in enumerate(calls)]))  # fmt: skip
        responses = [answer(n, f"out {turn}.{k}", f"id_{turn}_{k}" if with_id else None)
                     for k, (n, with_id) in enumerate(calls)]  # fmt: skip
        responses = draw(st.permutations(responses))
        kept = [r for r in responses if draw(st.integers(0, 5))]  # some dropped
        kept += [r for r in kept if not draw(st.integers(0, 4))]  # some doubled
        if draw(st.integers(0, 6)) == 0:
            kept.append(answer(draw(names), "stray"))
        if kept and draw(st.integers(0, 5)) == 0:
            history += [user(text("Interrupting.")), user(*kept)]
        elif kept:
            history.append(user(*kept))
        if draw(st.booleans()):
            history.append(model(text(f"Turn {turn} done.")))
            history.append(user(text("Next.")))
    return history


@settings(max_examples=150)
@given(history=broken_histories())
def test_every_repaired_history_keeps_geminis_rules(
    history: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    result = processed(history, tmp_path_factory.mktemp("spill"))
    assert codes(result.messages) == []

    # Lossless: every output that left the history is reported with its content.
    def outputs(contents: list[dict[str, Any]]) -> list[str]:
        return [p["functionResponse"]["response"].get("output") for c in contents
                for p in c["parts"] if "functionResponse" in p]  # fmt: skip

    gone = [o for o in outputs(history) if o is not None]
    for kept in outputs(result.messages):
        if kept in gone:
            gone.remove(kept)
    reported = [a.detail.get("content") for a in result.report.actions
                if a.kind in ("orphan_dropped", "duplicate_result_dropped")]  # fmt: skip
    assert sorted(gone) == sorted(reported)
    # The model's turns go through as they came: no call is changed or lost.
    assert [c for c in history if c["role"] == "model"] == [
        c for c in result.messages if c["role"] == "model"]  # fmt: skip


@st.composite
def mixed_id_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Turns whose calls carry an id or none (some ids looking like the view's names of
    places), answered by responses carrying their call's id, none, an id no call has,
    another call's id, or a place's name; dropped, doubled, reordered, moved, strays."""
    names = st.sampled_from(["read_file", "glob"])
    history = [user(text("Start."))]
    for turn in range(draw(st.integers(1, 3))):
        at = len(history)
        count = draw(st.integers(1, 3))
        ids: list[str | None] = []
        for k in range(count):
            kind = draw(st.sampled_from(["own", "none", "place"]))
            uid = {"own": f"id_{turn}_{k}", "none": None, "place": f"gemini-position:{at}:{k}"}
            ids.append(uid[kind] if uid[kind] not in ids else f"id_{turn}_{k}")
        calls = [(draw(names), uid) for uid in ids]
        history.append(model(*[call(n, uid, k=k) for k, (n, uid) in enumerate(calls)]))
        responses = []
        for k, (n, uid) in enumerate(calls):
            said = draw(st.sampled_from(["call", "none", "foreign", "other", "place"]))
            rid = {
                "call": uid, "none": None, "foreign": f"x_{turn}_{k}",
                "other": draw(st.sampled_from([u for u in ids if u] or [None])),
                "place": f"gemini-position:{at}:{draw(st.integers(0, count - 1))}",
            }[said]  # fmt: skip
            responses.append(answer(draw(st.sampled_from([n, n, "glob"])), f"out {turn}.{k}", rid))
        responses = draw(st.permutations(responses))
        kept = [r for r in responses if draw(st.integers(0, 5))]  # some dropped
        kept += [r for r in kept if not draw(st.integers(0, 4))]  # some doubled
        if draw(st.integers(0, 5)) == 0:
            kept.append(answer(draw(names), "stray", draw(st.sampled_from([None, "id_0_0"]))))
        if kept and draw(st.integers(0, 5)) == 0:
            history += [user(text("Interrupting.")), user(*kept)]
        elif kept:
            history.append(user(*kept))
        if draw(st.booleans()):
            history += [model(text(f"Turn {turn} done.")), user(text("Next."))]
    return history


@settings(max_examples=300)
@given(history=mixed_id_histories())
def test_with_mixed_ids_explicit_ids_are_never_overridden_and_the_result_passes_check(
    history: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 36, item 6: name and position pair a response only with a call that carries
    no id (or, from a response without one, any call of its name); what ``process``
    sends always passes ``check``, the model's contents go through as they came, and
    every output that left is reported with its content."""
    conversation = get_codec("gemini").parse(history)
    by_view = {c.id: c for node in conversation.nodes for c in node.calls}
    for node in conversation.nodes:
        for response in node.results:
            said = (response.raw or {}).get("functionResponse", {}).get("id")
            paired = by_view.get(response.call_id)
            if said and paired is not None:
                carried = (paired.raw or {})["functionCall"].get("id")
                assert carried in (None, said), (said, carried)
    result = processed(history, tmp_path_factory.mktemp("spill"))
    assert codes(result.messages) == []
    assert [c for c in history if c["role"] == "model"] == [
        c for c in result.messages if c["role"] == "model"]  # fmt: skip

    def outputs(contents: list[dict[str, Any]]) -> list[str]:
        return [p["functionResponse"]["response"].get("output") for c in contents
                for p in c["parts"] if "functionResponse" in p]  # fmt: skip

    gone = [o for o in outputs(history) if o is not None]
    for kept in outputs(result.messages):
        if kept in gone:
            gone.remove(kept)
    reported = [a.detail.get("content") for a in result.report.actions
                if a.kind in ("orphan_dropped", "duplicate_result_dropped")]  # fmt: skip
    assert sorted(gone) == sorted(reported)


def test_what_gemini_cli_really_sends_after_resuming_goes_through_repaired(
    tmp_path: Path,
) -> None:
    """The requests Gemini CLI 0.61 sent (tests/recorded/): the first goes through as it
    came, the resumed one, whose old response the CLI sent twice, loses the copy only."""
    record = json.loads((REPO / "tests" / "recorded" / "gemini-cli-0.61.0.json").read_text())
    first, resumed = (request["body"] for request in record["requests"])
    assert not processed(first, tmp_path).changed and codes(first["contents"]) == []
    assert codes(resumed["contents"]) == ["duplicate_result"]
    result = processed(resumed, tmp_path)
    sent = result.output
    assert codes(sent["contents"]) == []
    assert {k: v for k, v in sent.items() if k != "contents"} == {
        k: v for k, v in resumed.items() if k != "contents"}  # fmt: skip
    assert sent["contents"][2]["parts"] == resumed["contents"][2]["parts"][:1]
    others = [c for i, c in enumerate(resumed["contents"]) if i != 2]
    assert [c for i, c in enumerate(sent["contents"]) if i != 2] == others
    assert kinds(result) == ["duplicate_result_dropped"]


def test_a_text_agent_on_gemini_has_its_observations_budgeted(tmp_path: Path) -> None:
    """mini-swe-agent's protocol (a fenced command, an observation as a plain user
    content) spoken over Gemini: recognised as for the other formats, its observation over
    the cap spilled and written back as one text part."""
    from text_agent_builders import mini

    big = "".join(f"line {i} {'x' * 60}\n" for i in range(400))
    contents = [
        {"role": "model" if m["role"] == "assistant" else "user", "parts": [text(m["content"])]}
        for m in mini([big, "ok\n"], command="make step_{i}")
        if m["role"] != "system"
    ]
    result = processed(contents, tmp_path)
    assert result.report.text_protocol == "recognised mini-swe-agent (<returncode> observations)"
    observation = result.messages[2]
    assert list(observation) == ["role", "parts"] and len(observation["parts"]) == 1
    assert "full output saved to" in observation["parts"][0]["text"]
    assert result.messages[4] == contents[4]
