"""Getter -> metric coupling on what real apps and our guest produce (issue 17).

One guest on the module's display, started under `dbus-run-session` (so apps it
launches reach AT-SPI and `/accessibility` dumps them) with its own HOME (so
LibreOffice never hands a conversion to another instance on the machine). The
accessibility test scores the tree our guest's dump writes for a real GTK app;
the office tests score files LibreOffice itself wrote in `postconfig` steps,
the way OSWorld's Calc tasks export their sheets.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests_support.desktops import guest_ready
from tests_support.servers import free_port
from tests_support.xvfb import kill_group

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.desktop.setup_steps import SetupContext
from cua_rl.errors import GuestError
from cua_rl.evaluation import evaluate, get_metric
from cua_rl.types import Action, TaskVariant

pytestmark = pytest.mark.desktop
TOKEN = "apps-live-token-0123456789abcdef"
DONE = Action(kind="terminate", status="success")
# OSWorld's Calc postconfig: every sheet of the book as `<book>-<sheet>.csv`
CSV_FILTER = "csv:Text - txt - csv (StarCalc):44,34,UTF-8,,,,false,true,true,false,false,1"


@dataclass(frozen=True)
class AppGuest:
    url: str
    home: Path


@pytest.fixture(scope="module")
def app_guest(desktop: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppGuest]:
    if shutil.which("dbus-run-session") is None:
        pytest.skip("dbus-run-session is not installed (apt-get install dbus)")
    root = tmp_path_factory.mktemp("apps-guest")
    home = root / "home"
    home.mkdir()
    (root / "token").write_text(TOKEN + "\n")
    env = {**os.environ, "DISPLAY": desktop.display, "HOME": str(home)}
    env.pop("CUA_GUEST_TOKEN", None)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    port = free_port()
    log = root / "guest.log"
    # the guest leads no group: dbus-run-session does, and the apps the guest
    # launches stay in it, so killing the group at teardown stops them all
    proc = subprocess.Popen(
        [
            "dbus-run-session",
            "--",
            sys.executable,
            "-m",
            "cua_guest",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--token-file",
            str(root / "token"),
        ],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        if not asyncio.run(guest_ready(url, TOKEN)):
            pytest.fail(f"guest not ready: {log.read_text()[-2000:]}")
        yield AppGuest(url=url, home=home)
    finally:
        kill_group(proc)


@pytest.fixture
async def client(app_guest: AppGuest) -> AsyncIterator[GuestClient]:
    async with GuestClient(app_guest.url, TOKEN, timeout=120.0) as c:
        yield c


async def score(client: GuestClient, tmp_path: Path, evaluator: dict[str, Any]) -> float:
    variant = TaskVariant(
        task_id="apps-live",
        domain="multi_apps",
        evaluator_name="default",
        instruction="do",
        config=(),
        evaluator=evaluator,
        source_path="apps-live.json",
    )
    return await evaluate(
        variant,
        client,
        cache=FileCache(tmp_path / "cache"),
        context=SetupContext(1920, 1080, strict=True),
        last_action=DONE,
        cache_dir=tmp_path / "traj",
    )


async def test_accessibility_tree_of_a_real_app_scores_selectors(
    client: GuestClient, app_guest: AppGuest, tmp_path: Path
) -> None:
    if shutil.which("mousepad") is None:
        pytest.skip("mousepad is not installed (apt-get install mousepad)")
    note = app_guest.home / "note-7b1e.txt"
    note.write_text("alpha-7b1e is on this line\n")
    await client.launch(["mousepad", str(note)])
    loop = asyncio.get_running_loop()
    end = loop.time() + 60.0
    tree: str | None = None
    while loop.time() < end:
        try:
            tree = await client.accessibility_tree()
        except GuestError as exc:
            if "HTTP 501" not in str(exc):
                raise
            pytest.skip(f"the guest cannot dump AT-SPI here: {exc}")  # no pyatspi
        if tree and "alpha-7b1e" in tree:
            break
        await asyncio.sleep(0.2)
    assert tree and "alpha-7b1e" in tree, "mousepad's text never reached the AT-SPI tree"

    # the prefixes of OSWorld's selectors, on the namespaces our dump writes
    rules = [
        {
            "selectors": [
                "application[name=mousepad] frame[attr|toolkit=gtk][st|showing=true][cp|size]"
            ]
        },
        {
            "xpath": "//application[@name='mousepad']"
            "//*[contains(text(), 'alpha-7b1e') and @st:editable='true']"
        },
    ]
    spec = {
        "func": "check_accessibility_tree",
        "result": {"type": "accessibility_tree"},
        "expected": {"type": "rule", "rules": rules},
    }
    assert await score(client, tmp_path, spec) == 1.0
    spec["expected"]["rules"] = [
        {"selectors": ["application[name=mousepad] frame[attr|toolkit=qt]"]}
    ]
    assert await score(client, tmp_path, spec) == 0.0


def gold_book(path: Path, sheet: str, rows: list[list[object]]) -> Path:
    openpyxl = pytest.importorskip("openpyxl", reason="needs the eval extra")
    book = openpyxl.Workbook()
    book.active.title = sheet
    for row in rows:
        book.active.append(row)
    book.save(path)
    return path


async def test_book_and_sheet_csv_written_by_libreoffice(
    client: GuestClient, app_guest: AppGuest, tmp_path: Path
) -> None:
    if shutil.which("libreoffice") is None:
        pytest.skip("LibreOffice is not installed (apt-get install libreoffice-calc)")
    pytest.importorskip("pandas", reason="needs the eval extra")
    work = app_guest.home / "calc"
    work.mkdir()
    # LibreOffice computes the formulas and writes their values into the book
    (work / "report.csv").write_text("item,price,double\na,1.5,=B2*2\nb,0.5,=B3*2\n")
    gold = gold_book(
        tmp_path / "gold.xlsx",
        "report",
        [["item", "price", "double"], ["a", 1.5, 3], ["b", 0.5, 1]],
    )
    (tmp_path / "gold-report.csv").write_text("item,price,double\na,1.5,3\nb,0.5,1\n")
    book = str(work / "report.xlsx")
    spec = {
        "postconfig": [
            {
                "type": "execute",
                "parameters": {
                    "command": [
                        "libreoffice",
                        "--convert-to",
                        "xlsx",
                        "--outdir",
                        str(work),
                        str(work / "report.csv"),
                    ]
                },
            },
            {
                "type": "execute",
                "parameters": {
                    "command": [
                        "libreoffice",
                        "--convert-to",
                        CSV_FILTER,
                        "--outdir",
                        str(work),
                        book,
                    ]
                },
            },
        ],
        "func": "compare_table",
        "result": {
            "type": "vm_file",
            "multi": True,
            "path": [book, str(work / "report-report.csv")],
            "dest": ["report.xlsx", "report-report.csv"],
        },
        "expected": {
            "type": "cloud_file",
            "multi": True,
            "path": [gold.as_uri(), (tmp_path / "gold-report.csv").as_uri()],
            "dest": ["gold.xlsx", "gold-report.csv"],
        },
        "options": {
            "rules": [
                {"type": "sheet_name"},
                {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                {"type": "sheet_print", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                {
                    "type": "check_cell",
                    "sheet_idx": 0,
                    "coordinate": "C2",
                    "props": {"value": {"method": "eq", "ref": 3}},
                },
            ]
        },
    }
    assert await score(client, tmp_path, spec) == 1.0

    # the same files LibreOffice wrote against a gold that differs in one value
    fetched = tmp_path / "traj" / "report.xlsx"
    other = gold_book(
        tmp_path / "other.xlsx",
        "report",
        [["item", "price", "double"], ["a", 1.5, 3], ["b", 0.5, 2]],
    )
    rules = [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]
    assert get_metric("compare_table").func(str(fetched), str(other), rules=rules) == 0.0


async def test_docx_written_by_libreoffice(
    client: GuestClient, app_guest: AppGuest, tmp_path: Path
) -> None:
    if shutil.which("libreoffice") is None:
        pytest.skip("LibreOffice is not installed (apt-get install libreoffice-writer)")
    docx = pytest.importorskip("docx", reason="needs the eval extra")
    work = app_guest.home / "writer"
    work.mkdir()
    (work / "letter.html").write_text(
        "<html><body><p>Dear Ada,</p><p>the report is attached.</p></body></html>"
    )
    gold = docx.Document()
    gold.add_paragraph("Dear Ada,")
    gold.add_paragraph("the report is attached.")
    gold.save(tmp_path / "gold.docx")
    spec = {
        "postconfig": [
            {
                "type": "execute",
                "parameters": {
                    "command": [
                        "libreoffice",
                        "--convert-to",
                        "docx:MS Word 2007 XML",
                        "--outdir",
                        str(work),
                        str(work / "letter.html"),
                    ]
                },
            }
        ],
        "func": "compare_docx_files",
        "result": {"type": "vm_file", "path": str(work / "letter.docx"), "dest": "letter.docx"},
        "expected": {
            "type": "cloud_file",
            "path": (tmp_path / "gold.docx").as_uri(),
            "dest": "gold.docx",
        },
    }
    assert await score(client, tmp_path, spec) == 1.0
    other = docx.Document()
    other.add_paragraph("Dear Bob,")
    other.add_paragraph("the report is attached.")
    other.save(tmp_path / "other.docx")
    fetched = str(tmp_path / "traj" / "letter.docx")
    assert get_metric("compare_docx_files").func(fetched, str(tmp_path / "other.docx")) == 0.0
