"""What recall counts as lines, and which keys it accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from middleware import load_policy
from middleware.policy.settings import bind
from middleware.spill import SpillSettings, SpillWorkspace
from middleware.spill.recall import RecallError, lines_of, recall


def test_only_a_line_feed_ends_a_line() -> None:
    text = "one\r\ntwo\u2028still two\x0cand\nthree"
    assert lines_of(text, "x", 2, 1).text == "two\u2028still two\x0cand\n"
    assert lines_of(text, "x", 3, None).text == "three"
    assert lines_of(text, "x", 1, None).total == 3
    whole = lines_of(text, "x", 1, None)
    assert whole.text == text and (whole.first, whole.last) == (1, 3)


def test_an_empty_output_has_no_lines_but_can_be_read() -> None:
    empty = lines_of("", "x", 1, None)
    assert (empty.text, empty.total, empty.last) == ("", 0, 0)
    with pytest.raises(RecallError, match="past the end"):
        lines_of("", "x", 2, None)


@pytest.mark.parametrize(("offset", "limit"), [(0, None), (-3, None), (1, 0)])
def test_offset_and_limit_are_line_numbers(offset: int, limit: int | None) -> None:
    with pytest.raises(RecallError, match="line"):
        recall(
            "s/x-0123456789abcdef.txt",
            bind(load_policy(None), SpillSettings),
            offset=offset,
            limit=limit,
        )


def test_a_file_url_is_a_local_path(tmp_path: Path) -> None:
    path = SpillWorkspace("f", tmp_path).save("k", "a\nb\n")
    spill = bind(load_policy(None, dotenv_path=False), SpillSettings)
    assert recall(f"file://{path}", spill).text == "a\nb\n"
    assert recall(path, spill, offset=2).text == "b\n"


def test_a_web_address_is_never_fetched(tmp_path: Path) -> None:
    """A key is what a preview names, and an agent can be made to quote anything: recall
    never makes the process fetch a web address (issue 26, item 10)."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        settings = bind(
            load_policy(None, overrides={"spill.root": str(tmp_path)}, dotenv_path=False),
            SpillSettings,
        )
        for scheme in ("http", "https", "ftp"):
            key = (
                f"{scheme}://127.0.0.1:{port}/p/chatcli-agent-s/tool-results/a-0123456789abcdef.txt"
            )
            with pytest.raises(RecallError, match="never a web address"):
                recall(key, settings)
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []
