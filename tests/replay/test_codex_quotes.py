"""Codex's apply_patch is an edit for the quote measure: its context and removed lines are
quoted old text (``in_edit``, as Edit's ``old_string``), its added lines are the model's
own; so simulate's quotes and forced re-reads cover Codex sessions."""

from __future__ import annotations

import json
from typing import Any

import codex_rollout_builders as cx
from hypothesis import given
from hypothesis import strategies as st

from middleware.formats import get_codec
from middleware.replay.costs import PRICING
from middleware.replay.quotes import Quote, quotes
from middleware.replay.simulate import PolicySpec, simulate
from middleware.replay.transcripts import Transcript
from middleware.view import Conversation

LINE_12 = "export function priceOfItem12(cart: Cart): number { return cart.total * 12; }"
LINE_13 = "export function priceOfItem13(cart: Cart): number { return cart.total * 13; }"
LINE_14 = "export function priceOfItem14(cart: Cart): number { return cart.total * 14; }"
LINE_20 = "export function priceOfItem20(cart: Cart): number { return cart.total * 20; }"
NEW_13 = "export function priceOfItem13(cart: Cart): number { return cart.subtotal * 13; }"


def items(*lines: dict[str, Any]) -> list[dict[str, Any]]:
    return [cx.payload(line) for line in lines]


def parse(history: list[dict[str, Any]]) -> Conversation:
    return get_codec("responses").parse(history)


def read_then(call: dict[str, Any]) -> list[dict[str, Any]]:
    """The user's request, an exec read of the file, then ``call``."""
    return items(
        cx.message("user", "Make item 13 use the subtotal.", 0),
        cx.exec_call("call_a", f"sed -n '1,80p' {cx.WORKDIR}/src/cart.ts", 1),
        cx.exec_output("call_a", cx.SOURCE, 2),
        call,
    )


def test_apply_patch_context_and_removed_lines_are_quotes_of_an_edit() -> None:
    full = parse(read_then(cx.apply_patch("call_c", cx.PATCH, 3)))
    assert quotes(full, 3) == [
        Quote(LINE_12, (2, 0), "exec_command", "call_c", True),
        Quote(LINE_13, (2, 0), "exec_command", "call_c", True),
        Quote(LINE_14, (2, 0), "exec_command", "call_c", True),
    ]  # the @@ header holds line 11 of the file, but a header is not a quote


def test_apply_patch_sent_through_a_shell_heredoc_is_an_edit_too() -> None:
    script = f"apply_patch <<'EOF'\n{cx.PATCH}\nEOF\n"
    full = parse(read_then(cx.exec_call("call_s", script, 3)))
    found = quotes(full, 3)
    assert [(q.text, q.in_edit, q.call_id) for q in found] == [
        (LINE_12, True, "call_s"),
        (LINE_13, True, "call_s"),
        (LINE_14, True, "call_s"),
    ]


def test_exec_command_lines_are_quotes_as_any_call_input() -> None:
    script = f"python3 - <<'PY'\nprint('''{LINE_14}''')\n{LINE_12}\nPY"
    full = parse(read_then(cx.exec_call("call_p", script, 3)))
    assert [(q.text, q.in_edit) for q in quotes(full, 3)] == [(LINE_12, False)]


def test_lines_a_patch_added_are_the_models_own_later() -> None:
    """The model wrote the new line 13 and the label: quoting them later (the file shown
    again) is not quoting a result, whether the patch went as apply_patch or through the
    shell (where the JSON of the call's arguments escapes the label's quotes)."""
    label = 'const label = "subtotal of the cart items, in cents";'
    patch = cx.PATCH.replace("*** End Patch", f"+{label}\n*** End Patch")
    shown = cx.SOURCE.replace(LINE_13, NEW_13) + f"\n{label}"
    again = (
        f"*** Begin Patch\n*** Update File: src/cart.ts\n@@\n {NEW_13}\n {label}\n"
        f"-{LINE_20}\n+// twenty\n*** End Patch"
    )
    firsts = [
        (cx.apply_patch("call_c", patch, 3), cx.patch_output("call_c", 4)),
        (
            cx.exec_call("call_c", f"apply_patch <<'EOF'\n{patch}\nEOF", 3),
            cx.exec_output("call_c", "Success. Updated the following files:", 4),
        ),
    ]
    for call, output in firsts:
        history = [
            *read_then(call),
            cx.payload(output),
            *items(
                cx.exec_call("call_h", "sed -n '1,80p' src/cart.ts", 5),
                cx.exec_output("call_h", shown, 6),
                cx.apply_patch("call_i", again, 7),
            ),
        ]
        found = quotes(parse(history), 7)
        assert [(q.text, q.in_edit, q.source) for q in found] == [(LINE_20, True, (6, 0))], call[
            "payload"
        ]["type"]


def session(size: int = 400) -> list[dict[str, Any]]:
    """A long file read through exec_command, then a patch of a line in its middle."""
    source = "\n".join(
        f"export function priceOfItem{n}(cart: Cart): number {{ return cart.total * {n}; }}"
        for n in range(1, size)
    )
    patch = cx.PATCH.replace("11", "251").replace("12", "252").replace("13", "253")
    patch = patch.replace("14", "254")
    return items(
        cx.message("user", "Make item 253 use the subtotal.", 0),
        cx.exec_call("call_a", "cat src/cart.ts", 1),
        cx.exec_output("call_a", source, 2),
        cx.apply_patch("call_c", patch, 3),
        cx.patch_output("call_c", 4),
        cx.message("assistant", "Done.", 5),
    )


def test_simulate_counts_a_hidden_patched_line_as_a_forced_reread() -> None:
    transcript = Transcript("cx", "codex", "responses", session())
    raw, capped = simulate(
        [transcript], [PolicySpec("cap", "preset:lean")], PRICING["openai-gpt-5"]
    )
    assert raw.quotes == capped.quotes == 3 and raw.quotes_hidden == 0
    # preset:lean keeps 5,000 characters of the 32,000-character output: the patched
    # lines are in the spilled middle, and the patch must read the file again.
    assert capped.quotes_hidden == 3 and capped.rereads == {"exec_command": 1}
    assert json.loads(json.dumps(capped.to_dict()))["forced_rereads"] == 1


@given(
    st.lists(st.sampled_from(" -+"), min_size=1, max_size=12),
    st.booleans(),
)
def test_a_patchs_old_lines_are_its_edit_quotes_and_its_new_lines_none(
    signs: list[str], through_shell: bool
) -> None:
    """Whatever the hunk, its context and removed lines are exactly its in-edit quotes,
    and no added line is a quote (each line here is one of the file read first)."""
    lines = cx.SOURCE.split("\n")
    hunk = [f"{sign}{lines[20 + i]}" for i, sign in enumerate(signs)]
    patch = "\n".join(
        ["*** Begin Patch", "*** Update File: src/cart.ts", "@@", *hunk, "*** End Patch"]
    )
    call = (
        cx.exec_call("call_p", f"apply_patch <<'EOF'\n{patch}\nEOF", 3)
        if through_shell
        else cx.apply_patch("call_p", patch, 3)
    )
    found = quotes(parse(read_then(call)), 3)
    old = [line[1:] for line in hunk if line[0] in " -"]
    assert [q.text for q in found] == old
    assert all(q.in_edit for q in found)


@given(st.text())
def test_any_call_input_reads_without_error(text: str) -> None:
    full = parse(read_then(cx.apply_patch("call_p", text, 3)))
    for quote in quotes(full, 3):
        assert len(quote.text) >= 20 and quote.text in cx.SOURCE
