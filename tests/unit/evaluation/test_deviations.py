"""Where we differ from OSWorld on purpose (docs/evaluation-deviations.md): each
test here is the one a row of that table names."""

from __future__ import annotations

import re
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from aiohttp import web
from tests_support.metrics import run, write_bytes
from tests_support.servers import free_port

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.file_cache import FileCache
from cua_rl.evaluation import GetterContext, get_getter


def test_non_utf8_text_files_score_zero(tmp_path: Path) -> None:
    """OSWorld's `open()` raises UnicodeDecodeError on these; no U+FFFD stand-ins
    here, so two different Latin-1 files can never pass as equal."""
    one = write_bytes(tmp_path, "one.txt", "caf\xe9 12:00:01\n".encode("latin-1"))
    two = write_bytes(tmp_path, "two.txt", "caf\xe8 12:00:01\n".encode("latin-1"))
    assert run("compare_text_file", one, two) == 0.0
    assert run("compare_text_file", one, one) == 0.0
    assert run("diff_text_file", one, one) == 0.0
    assert run("check_line_number", one, {"expected": 1}) == 0.0
    assert run("compare_python_pure_text", one, one) == 0.0
    book = tmp_path / "book.epub"
    with zipfile.ZipFile(book, "w") as z:
        z.writestr("ch1.html", "<p>caf\xe9</p>".encode("latin-1"))
    assert run("compare_epub", str(book), str(book)) == 0.0


def test_utf8_bom_is_ignored(tmp_path: Path) -> None:
    """OSWorld keeps U+FEFF in the first line, so a file saved with a BOM fails
    against the same text without one; here the BOM is dropped (which can also
    fail a file that passes there: docs/evaluation-deviations.md)."""
    plain = write_bytes(tmp_path, "plain.csv", b"name,n\nann,1\n")
    bom = write_bytes(tmp_path, "bom.csv", b"\xef\xbb\xbfname,n\nann,1\n")
    assert run("compare_csv", bom, plain) == 1.0
    assert run("compare_text_file", bom, plain) == 1.0
    assert run("check_csv", bom, {"expect": [{"name": "ann", "n": "1"}]}) == 1.0
    assert run("diff_text_file", bom, plain) == 1.0
    # it can lower a score too: an `unexpect` rule on the first column, which OSWorld
    # reads as "\ufeffname" and so never matches, matches here
    assert run("check_csv", bom, {"unexpect": [{"name": "ann"}]}) == 0.0


def test_app_files_tolerate_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """Thunderbird's prefs.js, vlcrc and GIMP's config files are read with U+FFFD for
    undecodable bytes (OSWorld's strict `open()` raises): the settings the rules
    look at are ASCII, and one odd byte elsewhere must not cost the episode."""
    prefs = write_bytes(
        tmp_path,
        "prefs.js",
        b'user_pref("mail.identity.id1.fullName", "Jos\xe9");\n'
        b'user_pref("mail.identity.id1.auto_quote", false);\n',
    )
    rule = {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}
    assert run("check_thunderbird_prefs", prefs, rule) == 1.0
    vlcrc = write_bytes(tmp_path, "vlcrc", b"# r\xe9glages\nqt-bgcone=1\n")
    assert run("check_qt_bgcone", vlcrc, {"expected_qt_bgcone": 1}) == 1.0
    gimprc = write_bytes(tmp_path, "gimprc", b'(theme "Caf\xe9")\n(undo-levels 100)\n')
    assert run("check_config_status", gimprc, {"key": "undo-levels", "value": "100"}) == 1.0


def test_boolean_cells_read_as_bool(tmp_path: Path) -> None:
    """OSWorld's read_cell_value has no branch for t="b" and returns None."""
    openpyxl = pytest.importorskip("openpyxl", reason="needs the eval extra")
    from cua_rl.evaluation.metrics.xlsx_cells import read_cell_value

    book = openpyxl.Workbook()
    book.active.title = "Sheet1"
    book.active["A1"] = True
    book.active["A2"] = False
    book.save(tmp_path / "b.xlsx")
    assert read_cell_value(tmp_path / "b.xlsx", "Sheet1", "A1") is True
    assert read_cell_value(tmp_path / "b.xlsx", "Sheet1", "A2") is False
    rule = [
        {
            "type": "check_cell",
            "sheet_idx": 0,
            "coordinate": "A1",
            "props": {"value": {"method": "eq", "ref": True}},
        }
    ]
    pytest.importorskip("pandas", reason="needs the eval extra")
    assert run("compare_table", str(tmp_path / "b.xlsx"), rules=rule) == 1.0


def test_sheets_found_through_relationships(tmp_path: Path) -> None:
    """OSWorld opens `xl/worksheets/sheet<sheetId>.xml`; a book whose sheet files
    are numbered otherwise (after moving or deleting sheets) gives it the wrong
    sheet. The workbook's relationships say which file holds which sheet."""
    openpyxl = pytest.importorskip("openpyxl", reason="needs the eval extra")
    from cua_rl.evaluation.metrics.xlsx_cells import read_cell_value

    book = openpyxl.Workbook()
    book.active.title = "First"
    book.active["A1"] = 1
    book.create_sheet("Second")["A1"] = 2
    book.save(tmp_path / "plain.xlsx")
    swap = {
        "xl/worksheets/sheet1.xml": "xl/worksheets/sheet2.xml",
        "xl/worksheets/sheet2.xml": "xl/worksheets/sheet1.xml",
    }
    with (
        zipfile.ZipFile(tmp_path / "plain.xlsx") as src,
        zipfile.ZipFile(tmp_path / "moved.xlsx", "w") as dst,
    ):
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "xl/_rels/workbook.xml.rels":
                data = (
                    data.replace(b"worksheets/sheet1.xml", b"worksheets/TMP")
                    .replace(b"worksheets/sheet2.xml", b"worksheets/sheet1.xml")
                    .replace(b"worksheets/TMP", b"worksheets/sheet2.xml")
                )
            dst.writestr(swap.get(item.filename, item.filename), data)
    moved = tmp_path / "moved.xlsx"
    assert zipfile.ZipFile(moved).read("xl/worksheets/sheet1.xml").count(b"<v>2</v>") == 1
    assert read_cell_value(moved, "First", "A1") == 1.0
    assert read_cell_value(moved, "Second", "A1") == 2.0


def _xlsx(tmp_path: Path, name: str, edit: object = None) -> str:
    openpyxl = pytest.importorskip("openpyxl", reason="needs the eval extra")
    pytest.importorskip("pandas", reason="needs the eval extra")
    book = openpyxl.Workbook()
    book.active.title = "Sheet1"
    book.active["A1"] = "ab "
    if callable(edit):
        edit(book.active)
    book.save(tmp_path / name)
    return str(tmp_path / name)


def test_inline_string_cells_read_as_their_text(tmp_path: Path) -> None:
    """OSWorld's read_cell_value returns xmltodict's dict for an inline string whose
    `<t>` keeps its spaces (`xml:space="preserve"`, as openpyxl writes "ab "), so
    sheet_fuzzy compares "{'@xml:space': ...}" with the other book's text; here
    the cell's text is compared."""
    spaced = _xlsx(tmp_path, "spaced.xlsx")
    assert b'<t xml:space="preserve">ab </t>' in zipfile.ZipFile(spaced).read(
        "xl/worksheets/sheet1.xml"
    )
    plain = _xlsx(tmp_path, "plain.xlsx", lambda sheet: sheet.__setitem__("A1", "ab"))
    rules = [
        {
            "type": "sheet_fuzzy",
            "sheet_idx0": "RNSheet1",
            "sheet_idx1": "ENSheet1",
            "rules": [{"range": ["A1"], "type": "exact_match", "trim_trailings": " "}],
        }
    ]
    assert run("compare_table", spaced, plain, rules=rules) == 1.0
    other = _xlsx(tmp_path, "other.xlsx", lambda sheet: sheet.__setitem__("A1", "abc"))
    assert run("compare_table", spaced, other, rules=rules) == 0.0


def test_hyperlinks_compare_by_target(tmp_path: Path) -> None:
    """OSWorld reads openpyxl's Hyperlink object, which never equals a URL string
    and differs between two books linking the same URL from other cells; here
    the link's target is compared. No OSWorld task reads `hyperlink`."""

    def link(coordinate: str) -> object:
        def edit(sheet: object) -> None:
            sheet[coordinate] = "site"  # type: ignore[index]
            sheet[coordinate].hyperlink = "https://example.org/"  # type: ignore[index]

        return edit

    book = _xlsx(tmp_path, "a.xlsx", link("B2"))
    check = [
        {
            "type": "check_cell",
            "sheet_idx": 0,
            "coordinate": "B2",
            "props": {"hyperlink": {"method": "eq", "ref": "https://example.org/"}},
        }
    ]
    assert run("compare_table", book, rules=check) == 1.0
    check[0]["props"]["hyperlink"]["ref"] = "https://example.com/"
    assert run("compare_table", book, rules=check) == 0.0
    # an empty cell reads None, as in OSWorld; a cell with a value and no link reads ""
    empty = [
        {
            "type": "check_cell",
            "sheet_idx": 0,
            "coordinate": "C3",
            "props": {"hyperlink": {"method": "eq", "ref": ""}},
        }
    ]
    assert run("compare_table", book, rules=empty) == 0.0
    empty[0]["coordinate"] = "A1"
    assert run("compare_table", book, rules=empty) == 1.0


def test_font_color_of_a_cell_without_colour_is_none(tmp_path: Path) -> None:
    """OSWorld reads `font.color.rgb` and raises AttributeError on a font with no
    colour (real task 21ab7b40 has a `style` rule on font_color); here such a
    cell reads None, which equals only another cell without a colour."""
    from openpyxl.styles import Font

    def plain(sheet: object) -> None:
        sheet["A1"].font = Font(name="Arial")  # type: ignore[index]

    def green(sheet: object) -> None:
        sheet["A1"].font = Font(name="Arial", color="FF00FF00")  # type: ignore[index]

    rules = [{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["font_color"]}]
    gold = _xlsx(tmp_path, "gold.xlsx", plain)
    assert run("compare_table", _xlsx(tmp_path, "a.xlsx", plain), gold, rules=rules) == 1.0
    assert run("compare_table", _xlsx(tmp_path, "b.xlsx", green), gold, rules=rules) == 0.0


def test_accessibility_text_without_exact_matches_exactly() -> None:
    """OSWorld reads `rule["exact"]` and raises KeyError when a rule with `text`
    omits it; here it defaults to exact. No OSWorld task has such a rule."""
    tree = "<desktop-frame><label name='a'>Inbox</label></desktop-frame>"
    assert run("check_accessibility_tree", tree, [{"xpath": "//label", "text": "Inbox"}]) == 1.0
    assert run("check_accessibility_tree", tree, [{"xpath": "//label", "text": "Inbo"}]) == 0.0


def test_accessibility_tree_that_does_not_parse_scores_zero() -> None:
    """OSWorld's lxml.etree.fromstring raises XMLSyntaxError on a cut-off dump."""
    rule = [{"xpath": "//label"}]
    assert run("check_accessibility_tree", "<desktop-frame><label name='a'>", rule) == 0.0
    assert run("check_accessibility_tree", "<desktop-frame><label/></desktop-frame>", rule) == 1.0


def test_gimprc_blank_lines_are_skipped(tmp_path: Path) -> None:
    """OSWorld's check_config_status indexes the first token of every line that is
    not exactly "\\n", so a line of spaces raises IndexError; GIMP's own parser
    skips it, and so do we."""
    gimprc = write_bytes(tmp_path, "gimprc", b"# GIMP gimprc\n   \n(undo-levels 100)\n")
    assert run("check_config_status", gimprc, {"key": "undo-levels", "value": "100"}) == 1.0
    assert run("check_config_status", gimprc, {"key": "undo-levels", "value": "5"}) == 0.0


# Metrics that open the agent's image with Pillow and nothing around it in OSWorld
# (metrics/gimp.py): a file that is not an image raises UnidentifiedImageError there.
_IMAGE_METRICS = {
    "compare_image_list": ("bad", "good"),
    "check_image_size": ("bad", {"width": 8}),
    "check_brightness_decrease_and_structure_sim": ("bad", "good"),
    "check_saturation_increase_and_structure_sim": ("bad", "good"),
    "check_contrast_increase_and_structure_sim": ("bad", "good"),
    "check_triangle_position": ("bad",),
    "check_textbox_on_leftside": ("bad",),
    "check_image_mirror": ("bad", "good"),
    "check_green_background": ("bad", "good"),
}


@pytest.mark.parametrize("name", sorted(_IMAGE_METRICS))
@pytest.mark.parametrize("content", [b"", b"GIF89a not really"], ids=["empty", "not-an-image"])
def test_an_image_that_does_not_open_scores_zero(tmp_path: Path, name: str, content: bytes) -> None:
    from PIL import Image

    Image.new("RGB", (8, 8), "green").save(tmp_path / "good.png")
    files = {"bad": write_bytes(tmp_path, "bad.png", content), "good": str(tmp_path / "good.png")}
    args = [files.get(a, a) if isinstance(a, str) else a for a in _IMAGE_METRICS[name]]
    assert run(name, *args) == 0.0


def test_json_that_does_not_parse_scores_zero(tmp_path: Path) -> None:
    """OSWorld's check_direct_json_object calls json.loads on a string result before
    its try, and check_json calls json.load/yaml.load unguarded: both raise."""
    rules = {"expected": {"k": "v"}}
    assert run("check_direct_json_object", "{'k': 'v'", rules) == 0.0
    assert run("check_direct_json_object", "{'k': 'v'}", rules) == 1.0  # quotes swapped
    broken = write_bytes(tmp_path, "s.json", b'{"k": ')
    rule = {"expect": [{"key": ["k"], "method": "eq", "ref": "v"}]}
    assert run("check_json", broken, rule) == 0.0
    assert run("check_json", write_bytes(tmp_path, "y.yaml", b"k: [v\n"), rule, is_yaml=True) == 0.0


async def test_relative_time_falls_back_to_the_host_clock(tmp_path: Path) -> None:
    """Without the desktop's clock (here its /execute answers 500) the host's
    local time is "now"; OSWorld geolocates the host's IP address instead."""

    async def broken(request: web.Request) -> web.Response:
        return web.json_response({"status": "error", "message": "boom"}, status=500)

    app = web.Application()
    app.router.add_post("/execute", broken)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with GuestClient(f"http://127.0.0.1:{port}", timeout=5.0) as client:
            ctx = GetterContext(client=client, cache=FileCache(tmp_path / "c"), cache_dir=tmp_path)
            rules = {
                "relativeTime": {"from": "this month"},
                "expected": {"time": "{Year}-{Month0D}"},
            }
            got = await get_getter("rule_relativeTime").func(ctx, {"rules": rules})
    finally:
        await runner.cleanup()
    assert got["expected"]["time"] == datetime.now().astimezone().strftime("%Y-%m")


def test_every_row_of_the_table_names_an_existing_test() -> None:
    root = Path(__file__).resolve().parents[3]
    table = (root / "docs" / "evaluation-deviations.md").read_text()
    rows = [
        line
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| Where")
    ]
    assert len(rows) >= 14
    for row in rows:
        named = re.findall(r"`((?:unit|integration)/[\w/]+\.py)::(\w+)`", row)
        assert named, f"row without a test: {row[:80]}"
        for path, name in named:
            source = (root / "tests" / path).read_text()
            assert re.search(rf"\bdef {name}\(", source), f"{path}::{name} does not exist"
