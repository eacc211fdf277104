"""The provider stand-in's Responses model calls a freeform tool (Codex CLI's
``apply_patch``) as the API does: a ``custom_tool_call`` whose ``input`` is the call's
text, streamed with its input as deltas, read as such by the official SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from servers import serving
from stand_in import FREEFORM, Call, Provider, Reply

PATCH = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-old line\n+new line\n*** End Patch\n"
CALLS = (
    Call("exec_command", {"cmd": "cat notes.txt"}),
    Call("apply_patch", {FREEFORM: PATCH}, freeform=True),
)
KW: dict[str, Any] = {"api_key": "sk-test", "max_retries": 0}


@pytest.fixture
def client() -> Iterator[openai.OpenAI]:
    stand_in = Provider(script=lambda fmt, body: Reply(calls=CALLS))
    with serving(stand_in.app()) as url, openai.OpenAI(base_url=f"{url}/v1", **KW) as client:
        yield client


def test_a_freeform_call_is_a_custom_tool_call(client: openai.OpenAI) -> None:
    output = client.responses.create(model="m", input="Fix notes.txt.").output
    assert [item.type for item in output] == ["function_call", "custom_tool_call"]
    function, custom = output
    assert function.type == "function_call" and function.arguments == '{"cmd": "cat notes.txt"}'
    assert custom.type == "custom_tool_call"
    assert (custom.name, custom.input) == ("apply_patch", PATCH)
    assert custom.id is not None and custom.id.startswith("ctc_")
    assert custom.call_id.startswith("call_") and custom.call_id != function.call_id


def test_a_streamed_freeform_call_sends_its_input_as_deltas(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model="m", input="Fix notes.txt.", stream=True))
    kinds = [event.type for event in events]
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert [(item.type, item.status) for item in added] == [
        ("function_call", "in_progress"),
        ("custom_tool_call", "in_progress"),
    ]
    assert added[1].type == "custom_tool_call" and added[1].input == ""
    deltas = [e for e in events if e.type == "response.custom_tool_call_input.delta"]
    (done,) = [e for e in events if e.type == "response.custom_tool_call_input.done"]
    assert "".join(e.delta for e in deltas) == done.input == PATCH
    assert {(e.item_id, e.output_index) for e in [*deltas, done]} == {(added[1].id, 1)}
    first, last = kinds.index(deltas[0].type), kinds.index(done.type)
    assert kinds[first - 1] == "response.output_item.added"
    assert kinds[last + 1] == "response.output_item.done"
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    with client.responses.stream(model="m", input="Fix notes.txt.") as stream:
        final = stream.get_final_response().output
    assert final[1].type == "custom_tool_call" and final[1].input == PATCH


def test_a_freeform_call_has_its_text_as_its_one_argument() -> None:
    with pytest.raises(ValueError, match="one argument"):
        Call("apply_patch", {"patch": PATCH}, freeform=True)
