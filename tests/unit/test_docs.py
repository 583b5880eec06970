"""The documentation is in the repository: README links docs/, links resolve, and
no code, help text or test cites a design file that only exists outside it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = ("DESIGN.md", "STYLE.md", "PROMPTS.md", "DEVELOPERS.md")
"""Files of the project's planning notes, not shipped in the repository."""
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_links_every_doc_and_links_resolve() -> None:
    readme = (REPO / "README.md").read_text()
    for doc in sorted((REPO / "docs").glob("*.md")):
        assert f"docs/{doc.name}" in readme, f"README does not link docs/{doc.name}"
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in LINK.findall(page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(REPO)}: {target}"


def test_no_citation_of_files_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    for root in ("cua_rl", "vm", "infra", "tests", "docs"):
        for path in (REPO / root).rglob("*"):
            if (
                path.suffix not in (".py", ".md", ".yaml", ".service", ".sh", ".toml")
                or path.resolve() == this
                or not path.is_file()
            ):
                continue
            text = path.read_text(errors="replace")
            cited = [name for name in OUTSIDE if name in text]
            assert not cited, f"{path.relative_to(REPO)} cites {cited}; cite docs/ instead"
