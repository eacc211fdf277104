"""The scripted model of the recall-tool tests: it runs the agent's ``build`` tool, then
reads on with ``recall`` as the preview says, then answers with what it read back."""

from __future__ import annotations

import re
from typing import Any

from agent_events import events
from stand_in import Call, Reply

RECALL_SAID = re.compile(r"recall tool \(path (\S+), offset (\d+), limit (\d+)\)")


def recalling(fmt: str, body: dict[str, Any]) -> Reply:
    """The model's answer to ``body``, a request in format ``fmt``."""
    seen = events(fmt, body)
    outputs = [e.text for e in seen if e.kind == "result"]
    if not outputs:
        return Reply(calls=(Call("build", {}),))
    said = RECALL_SAID.search(outputs[0])
    if len(outputs) == 1:
        if said is None:  # a streamed request: not offered the tool
            return Reply(text="The preview names no recall tool.")
        args = {"path": said.group(1), "offset": int(said.group(2)), "limit": int(said.group(3))}
        return Reply(calls=(Call("recall", args),))
    first_line = outputs[1].split("\n", 1)[0]
    return Reply(text=f"read back {outputs[1].count(chr(10))} lines from {first_line!r}")
