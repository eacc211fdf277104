"""A replica in a process of its own, for the tests: a pipeline that answers requests as
JSON lines on stdin (``{"process": body}``, with the request's ``"now"`` and ``"format"``
if given, or ``{"load": location}``) with JSON lines on stdout, until stdin closes.

    python tests/replica.py SESSION '{"spill.url": "s3://...", ...}'
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from middleware import Pipeline, load_policy


class Replica:
    """The process running this module, driven from a test."""

    def __init__(self, session: str, overrides: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), session, json.dumps(overrides)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the replica exited with {self.process.wait()}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def process_body(
        self, body: Any, *, now: float | None = None, format: str = "auto"
    ) -> dict[str, Any]:
        return self.ask({"process": body, "now": now, "format": format})

    def load(self, location: str) -> str | None:
        loaded: str | None = self.ask({"load": location})["text"]
        return loaded

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Replica:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(session: str, overrides: dict[str, Any]) -> None:
    policy = load_policy(None, overrides=overrides, dotenv_path=False)
    with Pipeline(policy, session_id=session) as pipe:
        for line in sys.stdin:
            request = json.loads(line)
            if "load" in request:
                answer: dict[str, Any] = {"text": pipe.spill.load(request["load"])}
            else:
                result = pipe.process(
                    request["process"], format=request.get("format", "auto"), now=request.get("now")
                )
                answer = {
                    # the bytes a proxy would send on
                    "sent": json.dumps(result.output, ensure_ascii=False),
                    "actions": [[a.kind, a.detail.get("path")] for a in result.report.actions],
                }
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    serve(sys.argv[1], json.loads(sys.argv[2]))
