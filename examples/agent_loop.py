"""An agent loop that bounds tool output when the tool returns (dispatch-time admission)
and stops a runaway loop, under the Ethos preset.

Run: python examples/agent_loop.py
"""

from __future__ import annotations

from typing import Any

import middleware


def fake_model(turn: int) -> list[dict[str, Any]]:
    """The calls a model might make: three parallel reads, then the same search again and
    again (a runaway loop)."""
    if turn == 0:
        return [{"id": f"read_{i}", "name": "read_file", "input": {"path": f"src/m{i}.py"}}
                for i in range(3)]  # fmt: skip
    return [{"id": f"search_{turn}", "name": "web_search", "input": {"q": "same question"}}]


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    if name == "read_file":
        return "".join(f"{arguments['path']}:{n}: code\n" for n in range(3000))  # ~70k chars
    return "no results"


def main() -> None:
    policy = middleware.load_policy(
        "preset:ethos", overrides={"loop_guard.action": "raise"}, dotenv_path=False
    )
    history: list[dict[str, Any]] = [{"role": "user", "content": "Explain module m0."}]
    with middleware.Pipeline(policy) as pipe:
        for turn in range(10):
            calls = fake_model(turn)
            history.append({"role": "assistant", "content": [
                {"type": "tool_use", **call} for call in calls]})  # fmt: skip
            outputs = [
                middleware.ToolOutput(
                    c["name"], c["id"], run_tool(c["name"], c["input"]), c["input"]
                )
                for c in calls
            ]
            admitted = pipe.admit_batch(outputs)
            for call, result in zip(calls, admitted, strict=True):
                budget = "none" if result.budget is None else f"{result.budget:,}"
                print(
                    f"turn {turn}: {call['id']} kept {len(result.text):,} chars (budget {budget})"
                )
            history.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c["id"], "content": a.text}
                for c, a in zip(calls, admitted, strict=True)]})  # fmt: skip
            try:
                request = pipe.process(history)
            except middleware.LoopGuardError as stop:
                print(f"turn {turn}: stopped: {stop}")
                return
            assert not request.changed  # admitted results are never cut again


if __name__ == "__main__":
    main()
