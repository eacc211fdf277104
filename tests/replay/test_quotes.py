"""The quoted-span measure: lines a tool input copies from an earlier result, found and
judged hidden without any tokenizer."""

from __future__ import annotations

from typing import Any

from middleware.formats import get_codec
from middleware.replay.costs import PRICING, serialize
from middleware.replay.quotes import MIN_QUOTE, Quote, is_hidden, quotes
from middleware.replay.simulate import PolicySpec, simulate
from middleware.replay.transcripts import Transcript

FILE = "\n".join(
    f'{n:>6}\u2192def handler_{n}(request):  # returns the "value" of {n}' for n in range(1, 400)
)


def use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
    }


def result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
    }


def conversation(reader: str = "Read") -> list[dict[str, Any]]:
    """A file read with ``reader``, an edit quoting a line of it, and a write of a line
    the user typed."""
    old = 'def handler_250(request):  # returns the "value" of 250\nx = 1'
    typed = 'def handler_7(request):  # returns the "value" of 7'
    return [
        {"role": "user", "content": f"Fix handler 250. Also look at `{typed}`."},
        use("r1", reader, {"file_path": "/src/app.py"}),
        result("r1", FILE),
        use("e1", "Edit", {"file_path": "/src/app.py", "old_string": old, "new_string": "ok"}),
        result("e1", "The file was edited."),
        use("w1", "Write", {"file_path": "/src/b.py", "content": f"{typed}\nshort line"}),
        result("w1", "Written."),
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]


def test_lines_copied_from_a_result_are_quotes_and_others_are_not() -> None:
    messages = conversation()
    full = get_codec("anthropic").parse(messages)
    (quote,) = quotes(full, 3)  # the edit: its first line is in the read file
    assert quote == Quote(
        'def handler_250(request):  # returns the "value" of 250', (2, 0), "Read", "e1", True
    )
    assert len("x = 1") < MIN_QUOTE  # its second line is too short to be one
    # The write's line was typed by the user first: not taken from the result.
    assert quotes(full, 5) == []
    assert quotes(full, 1) == []  # nothing was read before the first call


def test_a_quote_is_hidden_when_no_string_of_the_request_holds_it() -> None:
    messages = conversation()
    (quote,) = quotes(get_codec("anthropic").parse(messages), 3)
    assert not is_hidden(quote, serialize(messages[:3]))  # escaped quotes in JSON still match
    cut = [*messages[:2], result("r1", FILE[:2_000] + "\n[… cut …]")]
    assert is_hidden(quote, serialize(cut))


def test_simulate_counts_hidden_quotes_and_the_rereads_they_force() -> None:
    messages = conversation()
    transcript = Transcript("q", "claude-code", "anthropic", messages)
    lean, default = PolicySpec("cap", "preset:lean"), PolicySpec("default", None)
    raw, capped, kept = simulate([transcript], [lean, default], PRICING["anthropic-5m"])
    assert raw.quotes == capped.quotes == 1 and raw.quotes_hidden == 0
    # preset:lean keeps 5,000 characters of the 30,000-character file: the edited line
    # (about line 250) is in the spilled middle, and the edit must read it again.
    assert capped.quotes_hidden == 1 and capped.rereads == {"Read": 1}
    assert capped.readback_cost > 0 and capped.relative_effective_cost > capped.relative_cost
    session = capped.sessions["q"].to_dict()
    assert (session["quotes_hidden"], session["forced_rereads"]) == (1, 1)
    # The default bounds a read by the Read tool's own limit: the edit finds its line.
    assert kept.quotes_hidden == 0 and kept.readback_cost == 0


def test_a_text_protocol_agent_quotes_with_the_code_of_its_answer() -> None:
    import middleware
    from middleware.formats.text_protocol import text_protocol_rule

    source = "\n".join(f"    def permute_{n}(self, other):  # cycle {n}" for n in range(50))
    rewrite = (
        "cat <<'EOF' > patch.py\n    def permute_7(self, other):  # cycle 7\n        return 1\nEOF"
    )
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can run bash."},
        {"role": "user", "content": "Fix the Permutation bug."},
        {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\ncat permutations.py\n```"},
        {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{source}\n</output>"},
        {"role": "assistant", "content": f"THOUGHT: edit it.\n\n```bash\n{rewrite}\n```"},
    ]
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    full = get_codec("openai").parse(messages, text_protocol_rule(policy))
    assert any(r.text_protocol for r in full.nodes[3].results)
    (quote,) = quotes(full, 4)
    assert quote.text == "def permute_7(self, other):  # cycle 7"
    assert (quote.source, quote.call_id, quote.in_edit) == ((3, 0), "text:4", False)
    assert quotes(full, 2) == []  # the first command quotes nothing


def test_hidden_quotes_are_told_by_what_hid_their_result_and_the_tool() -> None:
    """Issue 35, item 5: the spilled output is the cause, the command that printed the
    file the tool; in the summary, its JSON, each session's, and the text table's line."""
    from middleware.cli.simulate_views import render_sessions, render_table

    transcript = Transcript("q", "claude-code", "anthropic", conversation("Bash"))
    raw, capped = simulate([transcript], [PolicySpec("cap", None)], PRICING["anthropic-5m"])
    assert raw.quotes_hidden_by == {}
    by = {"budget:spilled": {"Bash": 1}}
    assert capped.quotes_hidden_by == capped.to_dict()["quotes_hidden_by"] == by
    assert capped.sessions["q"].quotes_hidden_by == by
    assert capped.sessions["q"].to_dict()["quotes_hidden_by"] == by
    table = render_table([raw, capped], 1, "anthropic-5m", 200_000, []).splitlines()
    assert "quotes hidden (cap), by cause and tool: budget:spilled Bash 1" in table
    assert not any(line.startswith("quotes hidden (none)") for line in table)
    head, row = render_sessions([raw, capped]).splitlines()
    assert head.endswith("quoted hidden by cause and tool")
    assert row.endswith("  budget:spilled Bash 1")


def test_one_cause_for_a_result_whether_a_reference_or_a_quote_finds_it_hidden() -> None:
    """The last action on a result is its cause (by call id; by message for an output of
    the text protocol, which has none); a result no action names was hidden by something
    else (``other``)."""
    from middleware.replay.hidden import OTHER, Causes
    from middleware.report import Action

    full = get_codec("anthropic").parse(conversation())
    causes = Causes(
        full,
        [
            Action("budget", "spilled", "r1", "Read", 2),
            Action("microcompact", "summarized", "r1", "Read", 2),
            Action("microcompact", "input_cleared", "e1", "Edit", 3),
        ],
    )
    assert causes.of((2, 0)) == "microcompact:summarized"  # the read: the last action
    assert causes.of((4, 0)) == "microcompact:input_cleared"  # the edit's call and result
    assert causes.of((6, 0)) == OTHER == "other"  # the write: no action on it
    assert Causes(full, []).of((2, 0)) == OTHER

    import middleware
    from middleware.formats.text_protocol import text_protocol_rule

    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can run bash."},
        {"role": "user", "content": "Fix it."},
        {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\ncat a.py\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx = 1\n</output>"},
    ]
    text = get_codec("openai").parse(messages, text_protocol_rule(policy))
    by_message = Causes(text, [Action("microcompact", "summarized", "", None, 3)])
    assert by_message.of((3, 0)) == "microcompact:summarized"
    assert Causes(text, [Action("microcompact", "summarized", "", None, 1)]).of((3, 0)) == OTHER


def test_a_line_with_an_accent_and_a_quote_is_found_as_the_request_writes_it() -> None:
    """A request is serialised with ``ensure_ascii=False``: "–" stays as it is and '"' is
    escaped, so a line holding both is found only in that spelling."""
    line = '<dd class="field-odd"><p>Dict[str, Any]</p> – the value of 250</dd>'
    messages = [
        {"role": "user", "content": "render it"},
        use("r1", "Bash", {"command": "cat index.html"}),
        result("r1", f"<html>\n{line}\n</html>"),
        use("e1", "Edit", {"file_path": "/x.html", "old_string": line, "new_string": "ok"}),
    ]
    (quote,) = quotes(get_codec("anthropic").parse(messages), 3)
    assert not is_hidden(quote, serialize(messages[:3]))
    assert is_hidden(quote, serialize([*messages[:2], result("r1", "<html></html>")]))
