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
    return {"role": "assistant", "content": [
        {"type": "tool_use", "id": call_id, "name": name, "input": arguments}]}  # fmt: skip


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": text}]}  # fmt: skip


def conversation() -> list[dict[str, Any]]:
    old = 'def handler_250(request):  # returns the "value" of 250\nx = 1'
    typed = 'def handler_7(request):  # returns the "value" of 7'
    return [
        {"role": "user", "content": f"Fix handler 250. Also look at `{typed}`."},
        use("r1", "Read", {"file_path": "/src/app.py"}),
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
    assert quote == Quote('def handler_250(request):  # returns the "value" of 250',
                          (2, 0), "Read", "e1", True)  # fmt: skip
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
    spec = PolicySpec("cap", None)
    raw, capped = simulate([transcript], [spec], PRICING["anthropic-5m"])
    assert raw.quotes == capped.quotes == 1 and raw.quotes_hidden == 0
    # The default cap keeps 5,000 characters of the 30,000-character file: the edited
    # line (about line 250) is in the spilled middle, and the edit must read it again.
    assert capped.quotes_hidden == 1 and capped.rereads == {"Read": 1}
    assert capped.readback_cost > 0 and capped.relative_effective_cost > capped.relative_cost
    session = capped.sessions["q"].to_dict()
    assert (session["quotes_hidden"], session["forced_rereads"]) == (1, 1)


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
