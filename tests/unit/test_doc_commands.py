"""Every command and flag the docs name exists, so README and docs/ cannot drift
from the CLI again (a renamed flag fails here, as the second test shows)."""

from __future__ import annotations

from pathlib import Path

from tests_support.doc_commands import Mention, mentions, problems

from cua_rl.cli import cli

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "infra" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_command_and_flag_in_the_docs_exists() -> None:
    found = [m for page in PAGES for m in mentions(page.read_text(), str(page.relative_to(REPO)))]
    assert len(found) > 100  # the parser sees the docs' commands at all
    wrong = [line for m in found for line in problems(m, cli)]
    assert not wrong, "\n".join(wrong)


def test_a_renamed_flag_or_command_is_caught() -> None:
    """The same check on snippets that are wrong on purpose (e.g. the pre-rename
    `--templates-root` is hidden now and still accepted, but `--template-root` is not)."""
    page = """
Run `cua-rl train --ouput runs/x` or, in a block:

```
cua-rl eval --osworld PATH \\
    --modle Qwen/Qwen3-VL-8B-Thinking
cua-rl tasks lsit
cua-rl tasks list --osworld PATH --root DIR --json
```
"""
    found = list(mentions(page, "page.md"))
    assert [m.where for m in found] == ["page.md:2", "page.md:6", "page.md:7", "page.md:8"]
    wrong = [problems(m, cli) for m in found]
    assert "train has no option --ouput" in wrong[0][0]
    assert "eval has no option --modle" in wrong[1][0]
    assert "no command 'lsit' under tasks" in wrong[2][0]
    assert wrong[3] == []


def test_placeholders_end_the_walk_without_a_verdict() -> None:
    line = Mention("x", "cua-rl bench COMMAND --anything")
    assert problems(line, cli) == []
