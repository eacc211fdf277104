"""How many of the error lines a preview leaves out it still shows (issue 25).

A default preview keeps a head, a tail and an outline of the omitted middle. An error line
in that middle is *shown* when the outline quotes it (``"{number}: ..."``). Over two sets of
long outputs:

* the corpus of real tool outputs, ``tests/corpus/tool-outputs/``, whose error lines are
  labelled by the generator that made them (``tests/corpus/make_tool_outputs.py``);
* the tool results of the recorded sessions in ``--data``, longer than the default cap,
  whose error lines are found by the rule below, written here and not shared with the
  outline's classifier (the measure must not grade a classifier against itself).

It prints, per set, the omitted error lines the previews show, and the outline's time per
MB of text (the whole corpus, and one 50 MB log).

    python benchmarks/preview_errors.py [--data DIR] [--files]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import middleware
from middleware.formats import get_codec
from middleware.formats.text_protocol import text_protocol_rule
from middleware.policy.settings import bind
from middleware.replay.transcripts import load_transcripts
from middleware.steps.budget.settings import BudgetSettings
from middleware.steps.outline import outline
from middleware.steps.previews import PreviewStyle, make_preview, parse_preview
from middleware.view import ToolResult

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "tool-outputs"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "trajectories"
PATH = "/tmp/chatcli-agent-s/tool-results/r1-0123456789abcdef.txt"

#: The shared data's error lines: what the common tools print when something fails.
REPORTED = re.compile(
    r"""^\s*(?:E\s{2,}\S                          # pytest's assertion lines
    |(?:FAILED|ERROR|FAIL)(?:\s|:|$)              # pytest / unittest reports
    |Traceback\ \(most\ recent\ call\ last\)
    |(?:[\w.]+\.)?\w*(?:Error|Exception)(?::|$)   # a raised exception's last line
    |npm\ (?:ERR!|error)\ |fatal:\ |panic:\ |error(?:\[\w+\])?:)
    |\S+:\d+(?::\d+)?:\ (?:fatal\ )?error:        # gcc, mypy, clang
    |\(\d+,\d+\):\ error\ TS\d+                   # tsc
    |\s(?:FAILED|ERROR)(?:\s|$)                   # a test id followed by its status
    """,
    re.VERBOSE,
)


@dataclass
class Tally:
    """Omitted error lines and those the outline shows, over one set of outputs."""

    outputs: int = 0
    omitted: int = 0
    shown: int = 0
    notices: int = 0
    rows: list[str] = field(default_factory=list)

    def line(self, name: str) -> str:
        share = self.shown / self.omitted if self.omitted else 1.0
        return (
            f"{name}: {self.shown} / {self.omitted} omitted error lines shown ({share:.1%}) "
            f"in {self.outputs} previews; {self.notices} say more are left"
        )


def default_style() -> PreviewStyle:
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    return bind(policy, BudgetSettings).preview


def grade(text: str, errors: list[int], style: PreviewStyle) -> tuple[int, int, bool]:
    """(omitted error lines, those shown, whether a "more error lines" notice is there)."""
    preview = make_preview(text, style, path=PATH)
    if preview is None:
        return 0, 0, False
    fields = parse_preview(preview, style) or {}
    head, tail = len(fields.get("head", "")), len(fields.get("tail", ""))
    quoted = set(re.findall(r"^(\d+): ", fields.get("outline", ""), re.MULTILINE))
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    omitted = [n for n in errors if starts[n] > head and starts[n - 1] < len(text) - tail]
    shown = [n for n in omitted if str(n) in quoted]
    return len(omitted), len(shown), "more error line" in fields.get("outline", "")


def corpus(style: PreviewStyle, tally: Tally) -> None:
    for labels_file in sorted(CORPUS.glob("*.labels.json")):
        text = labels_file.with_name(labels_file.name.replace(".labels.json", ".txt")).read_text()
        labels = json.loads(labels_file.read_text())
        omitted, shown, notice = grade(text, labels["errors"], style)
        tally.outputs += 1
        tally.omitted += omitted
        tally.shown += shown
        tally.notices += notice
        tally.rows.append(f"  {labels_file.name[:-12]:28} {shown:3} / {omitted:3}"
                          + ("  (notice)" if notice else ""))  # fmt: skip


def shared(data: Path, style: PreviewStyle, tally: Tally) -> None:
    patterns = ("claude-code/**/*.jsonl", "mini-swe-agent/**/*.traj.json", "swe-agent/**/*.traj",
                "tau-bench/*.json")  # fmt: skip
    policy = middleware.load_policy(None, env={}, dotenv_path=False)
    cap = bind(policy, BudgetSettings).max_result_chars
    seen: set[str] = set()
    for file in sorted(p for pattern in patterns for p in data.glob(pattern)):
        for transcript in load_transcripts(file):
            rule = text_protocol_rule(policy)
            conversation = get_codec(transcript.format).parse(transcript.messages, rule)
            for node in conversation.nodes:
                for block in node.blocks:
                    if not isinstance(block, ToolResult) or len(block.text) <= cap:
                        continue
                    text = block.text
                    if text in seen:
                        continue
                    seen.add(text)
                    errors = [n for n, line in enumerate(text.splitlines(), 1)
                              if REPORTED.search(line)]  # fmt: skip
                    omitted, shown, notice = grade(text, errors, style)
                    tally.outputs += 1
                    tally.omitted += omitted
                    tally.shown += shown
                    tally.notices += notice
                    if omitted:
                        tally.rows.append(f"  {file.name[:40]:40} {shown:3} / {omitted:3}")


def timing(style: PreviewStyle) -> list[str]:
    """Milliseconds per MB of text the outline reads: the corpus, and a 50 MB log."""
    texts = [p.read_text() for p in sorted(CORPUS.glob("*.txt"))]
    rows = []
    started = time.perf_counter()
    for _ in range(5):
        for text in texts:
            outline(text, style.head, len(text) - style.tail, style.outline_chars)
    spent = (time.perf_counter() - started) / 5
    megabytes = sum(len(t) for t in texts) / 1e6
    rows.append(f"corpus: {spent * 1e3 / megabytes:.0f} ms per MB ({megabytes:.2f} MB)")
    line = "2026-03-02 09:14:07,112 INFO orders.import: batch {}: imported 41 orders\n"
    big = "".join(line.format(i) for i in range(50_000_000 // len(line)))
    middle = len(big) // 2
    big = big[:middle] + "ERROR orders.import: batch 9: order tree too deep\n" + big[middle:]
    started = time.perf_counter()
    outline(big, style.head, len(big) - style.tail, style.outline_chars)
    spent = time.perf_counter() - started
    rows.append(f"50 MB log: {spent * 1e3:.0f} ms ({spent * 1e3 / 50:.1f} ms per MB)")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--files", action="store_true", help="a row per output")
    args = parser.parse_args(argv)
    style = default_style()
    sets = [("corpus", Tally())]
    corpus(style, sets[0][1])
    if args.data.is_dir():
        sets.append(("shared data", Tally()))
        shared(args.data, style, sets[1][1])
    for name, tally in sets:
        print(tally.line(name))
        if args.files:
            print("\n".join(tally.rows))
    print("\n".join(timing(style)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
