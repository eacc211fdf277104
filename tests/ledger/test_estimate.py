"""The estimate of what a request would have cost unprocessed, from its bill and the
difference between the request as it came and as it went."""

from __future__ import annotations

from typing import Any

from middleware.ledger import Usage, footprint
from middleware.ledger.estimate import without_middleware


def turn(n: int, output: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash",
                                           "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                      "content": output}]},
    ]  # fmt: skip


OPENING = [{"role": "user", "content": "start"}]


def test_a_request_sent_as_it_came_costs_what_it_was_billed() -> None:
    history = [*OPENING, *turn(0, "x" * 500)]
    came = footprint(history)
    billed = Usage(3, 100, 50, 0, 9)
    assert (
        without_middleware(billed, writes=True, raw=came, cleaned=came, before=None, body_chars=800)
        == billed
    )


def test_removed_characters_are_prompt_the_unprocessed_request_would_have_written() -> None:
    raw = [*OPENING, *turn(0, "y" * 40_000)]
    cleaned = [*OPENING, *turn(0, "preview")]
    came, went = footprint(raw), footprint(cleaned, like=(raw, footprint(raw)))
    assert went.hashes[0] == came.hashes[0] and went.hashes[2] != came.hashes[2]
    billed = Usage(input=5, cache_read=0, cache_write_5m=200, output=7)  # a cold request
    body = went.total + 300
    estimate = without_middleware(
        billed, writes=True, raw=came, cleaned=went, before=None, body_chars=body
    )
    per_char = billed.prompt / body
    assert estimate.input == 5 and estimate.cache_read == 0 and estimate.output == 7
    assert estimate.cache_write_5m == 200 + round(per_char * (came.total - went.total))


def test_a_rewrite_of_an_old_message_is_charged_to_the_cleaned_request_only() -> None:
    first_raw = [*OPENING, *turn(0, "a" * 9_000)]
    first_clean = first_raw
    # The next request: the old result is compacted now (a rewrite), a new one appended.
    second_raw = [*first_raw, *turn(1, "b" * 1_000)]
    second_clean = [*OPENING, *turn(0, "[summary]"), *turn(1, "b" * 1_000)]
    before = (footprint(first_raw), footprint(first_clean))
    came, went = footprint(second_raw), footprint(second_clean)
    assert came.shared(before[0]) == before[0].total  # the unprocessed one kept its prefix
    assert went.shared(before[1]) == sum(went.chars[:2])  # the rewrite broke it at message 2
    billed = Usage(input=0, cache_read=20, cache_write_5m=400, output=1)
    estimate = without_middleware(
        billed, writes=True, raw=came, cleaned=went, before=before, body_chars=went.total
    )
    assert estimate.cache_read > 20 + 9_000 * billed.prompt / went.total * 0.9
    assert estimate.prompt > billed.prompt


def test_cache_markers_do_not_count_as_a_change() -> None:
    marked = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    plain = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert footprint(marked).hashes == footprint(plain).hashes


def test_no_caching_stays_no_caching_and_openai_bills_no_writes() -> None:
    raw, cleaned = footprint(turn(0, "z" * 4_000)), footprint(turn(0, "z"))
    uncached = Usage(input=100, output=2)
    estimate = without_middleware(
        uncached, writes=True, raw=raw, cleaned=cleaned, before=None, body_chars=400
    )
    assert estimate.cache_read == estimate.cache_write == 0 and estimate.input > 1_000
    openai = Usage(input=50, cache_read=1024, output=3)
    estimate = without_middleware(
        openai, writes=False, raw=raw, cleaned=cleaned, before=None, body_chars=4_000
    )
    assert estimate.cache_write == 0 and estimate.cache_read == 1024 and estimate.input > 50


def test_the_cache_read_expected_is_the_prefix_shared_up_to_the_last_breakpoint() -> None:
    from middleware.ledger.estimate import expected_read

    first = [*OPENING, *turn(0, "a" * 4_000)]
    second = [*first, *turn(1, "b" * 4_000)]
    marked = json_copy(second)
    marked[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    before, now = footprint(first), footprint(marked)
    assert now.marked == (4,) and now.hashes == footprint(second).hashes
    billed = Usage(input=0, cache_read=900, cache_write_5m=1_100, output=5)
    body = now.total + 400  # system and tools: shared too
    per_char = billed.prompt / body
    new = now.total - now.shared(before)
    expected = expected_read(billed, writes=True, cleaned=now, before=before, body_chars=body)
    assert expected == billed.prompt - round(per_char * new)
    # Nothing marked: Anthropic caches none of the messages; OpenAI caches by itself.
    plain = footprint(second)
    assert expected_read(billed, writes=True, cleaned=plain, before=before, body_chars=body) == (
        billed.prompt - round(per_char * plain.total)
    )
    assert expected_read(billed, writes=False, cleaned=plain, before=before, body_chars=body) == (
        expected
    )
    # Too long ago for the cache, or the first request: nothing expected.
    assert expected_read(billed, writes=True, cleaned=now, before=None, body_chars=body) == 0


def json_copy(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value))
