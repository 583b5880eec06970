"""Thunderbird, VS Code, OS-state, archive and multi-app metrics on files the tests write
(compare_htmls and is_expected_installed_extensions are registered by metrics/chrome.py)."""

from __future__ import annotations

import json
import sqlite3
import tarfile
import zipfile
from pathlib import Path

import pytest

from cua_rl.evaluation import get_metric


def run(name: str, *args: object, **options: object) -> float:
    return float(get_metric(name).func(*args, **options))


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


PREFS = """// Mozilla User Preferences
user_pref("mail.identity.id1.auto_quote", false);
user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");
user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");
user_pref("mail.server.default.autosync_offline_stores", true);
"""


def test_check_thunderbird_prefs(tmp_path: Path) -> None:
    prefs = write(tmp_path, "prefs.js", PREFS)
    assert (
        run(
            "check_thunderbird_prefs",
            prefs,
            {
                "expect": {
                    "mail.identity.id1.auto_quote": {"method": "eq", "ref": False},
                    "mail.identity.id1.htmlSigText": {"method": "re.S", "ref": "Anonym\nXYZ Lab"},
                    "extensions.activeThemeID": {"method": "re", "ref": "dark"},
                }
            },
        )
        == 1.0
    )
    assert (
        run(
            "check_thunderbird_prefs",
            prefs,
            {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": True}}},
        )
        == 0.0
    )
    assert (
        run(
            "check_thunderbird_prefs",
            prefs,
            {
                "expect": {  # absent pref
                    "mail.server.default.applyIncomingFilters": {"method": "eq", "ref": True}
                }
            },
        )
        == 0.0
    )
    assert (
        run(
            "check_thunderbird_prefs",
            prefs,
            {
                "unexpect": {
                    "mail.server.default.autosync_offline_stores": {"method": "eq", "ref": True}
                }
            },
        )
        == 0.0
    )
    assert run("check_thunderbird_prefs", None, {"expect": {}}) == 0.0


FILTERS = """version="9"
logging="no"
name="Promotions"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Promotions"
condition="AND (subject,contains,discount) AND (from,contains,\\"shop\\")"
name="Forward all"
enabled="no"
type="17"
action="Forward"
actionValue="anonym-x2024@gmail.com"
condition="ALL"
"""


def test_check_thunderbird_filter(tmp_path: Path) -> None:
    rules = write(tmp_path, "msgFilterRules.dat", FILTERS)
    move = {
        "enabled": "yes",
        "action": "Move to folder",
        "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
        "condition": ["AND (subject,contains,discount)", 'AND (from,contains,"shop")'],
    }
    assert run("check_thunderbird_filter", rules, {"expect": [move]}) == 1.0
    forward = {
        "enabled": "yes",
        "action": "Forward",
        "actionValue": "anonym-x2024@gmail.com",
        "condition": ["ALL"],
    }
    assert run("check_thunderbird_filter", rules, {"expect": [forward]}) == 0.0  # disabled
    assert (
        run(
            "check_thunderbird_filter",
            rules,
            {"expect": [move], "unexpect": [{"action": "Forward"}]},
        )
        == 0.0
    )


def test_check_thunderbird_folder_keeps_osworlds_digest(tmp_path: Path) -> None:
    mail = "From - Mon Jan 1 00:00:00 2024\nX-Mozilla-Status: 0001\nSubject: hi\n\nbody\n"
    a = write(tmp_path, "have_seen", mail)
    b = write(tmp_path, "gold", mail.replace("hi", "other"))
    empty = write(tmp_path, "empty", "")
    # OSWorld's digest ignores message contents: only emptiness tells folders apart
    assert run("check_thunderbird_folder", [a], [b], remove_deleted=True) == 1.0
    assert run("check_thunderbird_folder", a, empty) == 0.0
    assert run("check_thunderbird_folder", [None], [b]) == 0.0


def test_vscode_settings_and_keybindings(tmp_path: Path) -> None:
    settings = write(
        tmp_path,
        "settings.json",
        json.dumps({"editor.wordWrapColumn": 50, "files.exclude": {"**/__pycache__": True}}),
    )
    assert run("check_json_settings", settings, {"expected": {"editor.wordWrapColumn": 50}}) == 1.0
    assert run("check_json_settings", settings, {"expected": {"editor.wordWrapColumn": 80}}) == 0.0
    assert run("check_json_settings", write(tmp_path, "bad.json", "{,"), {"expected": {}}) == 0.0
    binding = {
        "key": "ctrl+j",
        "command": "workbench.action.focusActiveEditorGroup",
        "when": "terminalFocus",
    }
    keys = write(
        tmp_path,
        "keybindings.json",
        "// Place your key bindings in this file\n" + json.dumps([binding]),
    )
    assert run("check_json_keybindings", keys, {"expected": binding}) == 1.0
    assert run("check_json_keybindings", keys, {"expected": {**binding, "key": "ctrl+k"}}) == 0.0


def test_compare_config_and_extensions(tmp_path: Path) -> None:
    settings = write(
        tmp_path, "settings.json", '{"workbench.colorTheme": "Visual Studio Dark", "a": 1}'
    )
    wanted = {"expected": '{"workbench.colorTheme": "Visual Studio Dark"}\n'}
    assert run("compare_config", settings, wanted, containment_ok=True) == 1.0
    assert run("compare_config", settings, wanted, containment_ok=False) == 0.0
    assert run("compare_config", settings, {"expected": '{"workbench.colorTheme": "Light"}'}) == 0.0
    opened = write(tmp_path, "OpenProject.txt", "/home/user/project\n")
    assert run("compare_config", opened, {"expected": "project"}) == 1.0
    assert run("compare_config", opened, {"expected": "other"}) == 0.0
    rules = {"type": "contain", "expected": "ms-python.python"}
    assert run("is_extension_installed", "ms-python.python\n", rules) == 1.0
    assert run("is_extension_installed", "", rules) == 0.0
    assert run("is_extension_installed", "", {**rules, "type": "not_contain"}) == 1.0


def test_check_python_file_by_test_suite(tmp_path: Path) -> None:
    write(tmp_path, "snake.py", "def length():\n    return 3\n")
    good = write(
        tmp_path,
        "test_suite.py",
        "import os\nfrom snake import length\n"
        "def test():\n    return length() == 3 and os.path.exists('snake.py')\n",
    )
    assert run("check_python_file_by_test_suite", [str(tmp_path / "snake.py")], good) == 1.0
    bad = write(
        tmp_path,
        "bad_suite.py",
        "from snake import length\ndef test():\n    raise AssertionError(length())\n",
    )
    assert run("check_python_file_by_test_suite", [], bad) == 0.0
    assert run("check_python_file_by_test_suite", [], good, test_function_name="nope") == 0.0


def test_text_answer_metrics(tmp_path: Path) -> None:
    a = write(tmp_path, "a.py", "def f(x):\n    return  x+1\n")
    same = write(tmp_path, "b.py", "def f(x):\n\n    return  x+1   ")
    other = write(tmp_path, "c.py", "def f(x):\n return x+1")
    assert run("compare_python_pure_text", a, same) == 1.0
    assert run("compare_python_pure_text", a, other) == 0.0
    gold = write(tmp_path, "gold.txt", "42.5\n")
    assert run("compare_result_files", write(tmp_path, "r1.txt", "The answer is 42.5"), gold) == 1.0
    assert run("compare_result_files", write(tmp_path, "r2.txt", "42.50001"), gold) == 1.0
    assert run("compare_result_files", write(tmp_path, "r3.txt", "41"), gold) == 0.0
    report = write(tmp_path, "report.txt", "12:00:01 AM all 1\n12:00:02 AM all 2\nAverage: 3\n")
    assert run("check_line_number", report, {"expected": "2"}) == 1.0
    assert run("check_line_number", report, {"expected": "31"}) == 0.0


TIMEDATECTL = """               Local time: Thu 2024-01-25 12:56:06 {zone}
           Universal time: Thu 2024-01-25 12:56:06 UTC
                 RTC time: Thu 2024-01-25 12:56:05
                Time zone: {name} ({zone}, {offset})
System clock synchronized: yes
"""


def test_os_state_metrics() -> None:
    utc = TIMEDATECTL.format(zone="WET", name="Atlantic/Faroe", offset="+0000")
    assert run("is_utc_0", utc) == 1.0
    assert (
        run("is_utc_0", TIMEDATECTL.format(zone="CET", name="Europe/Paris", offset="+0100")) == 0.0
    )
    assert run("is_utc_0", None) == 0.0
    rule = {"expected": ["google-chrome.desktop", "thunderbird.desktop"]}
    assert (
        run("check_gnome_favorite_apps", "['thunderbird.desktop', 'google-chrome.desktop']\n", rule)
        == 1.0
    )
    assert run("check_gnome_favorite_apps", "['thunderbird.desktop']\n", rule) == 0.0
    assert run("check_gnome_favorite_apps", "@as []\n", rule) == 0.0
    tree = {
        "name": "cpjpg",
        "type": "directory",
        "children": [{"name": "a.jpg", "type": "file"}, {"name": "b.jpg", "type": "file"}],
    }
    assert run("check_moved_jpgs", tree, {"expected": ["b.jpg", "a.jpg"]}) == 1.0
    assert run("check_moved_jpgs", tree, {"expected": ["a.jpg"]}) == 0.0
    clip = {"expected": "/home/user/Data3/List3/secret.docx"}
    assert run("is_in_vm_clickboard", clip, "/home/user/Data3/List3/secret.docx") == 1.0
    assert run("is_in_vm_clickboard", clip, "/home/user/other.docx") == 0.0
    assert run("is_in_vm_clickboard", clip, None) == 0.0


def test_run_sqlite3(tmp_path: Path) -> None:
    db = tmp_path / "global-messages-db.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE messages (id INTEGER, folderID INTEGER)")
        conn.executemany("INSERT INTO messages VALUES (?, ?)", [(1, 13), (2, 13), (3, 4)])
    sql = "SELECT (SELECT COUNT(*) FROM messages WHERE folderID = 13) = {}"
    assert run("run_sqlite3", str(db), {"sql": sql.format(2)}) == 1.0
    assert run("run_sqlite3", str(db), {"sql": sql.format(3)}) == 0.0
    assert run("run_sqlite3", str(db), {"sql": "SELECT * FROM missing"}) == 0.0


# {attr} and {st}: the namespaces vm/guest's accessibility dump writes
AT_TREE = """<desktop-frame xmlns:attr="{attr}" xmlns:st="{st}" name="main">
 <application name="Thunderbird">
  <page-tab-list attr:id="tabmail-tabs" name="">
   <page-tab name="About Profiles">About Profiles</page-tab>
  </page-tab-list>
  <label name="anonym-x2024@outlook.com">anonym-x2024@outlook.com</label>
 </application>
</desktop-frame>"""


def test_check_accessibility_tree() -> None:
    pytest.importorskip("cssselect")
    guest = pytest.importorskip("cua_guest.atspi_dump", reason="vm/guest is not importable")
    tree = AT_TREE.format(attr=guest.NS["attr"], st=guest.NS["st"])
    css = [
        {
            "selectors": [
                'application[name=Thunderbird] page-tab-list[attr|id="tabmail-tabs"]'
                '>page-tab[name="About Profiles"]'
            ]
        }
    ]
    assert run("check_accessibility_tree", tree, css) == 1.0
    assert (
        run("check_accessibility_tree", tree, [{"selectors": ['page-tab[name="Settings"]']}]) == 0.0
    )
    xpath = [
        {
            "xpath": "//application[@name='Thunderbird']//*[contains(@name, 'outlook.com')]",
            "text": "anonym-x2024@outlook.com",
            "exact": True,
        }
    ]
    assert run("check_accessibility_tree", tree, xpath) == 1.0
    assert run("check_accessibility_tree", tree, [{**xpath[0], "text": "x"}]) == 0.0


def test_compare_zip_files_and_archive(tmp_path: Path) -> None:
    def zipped(name: str, members: dict[str, str]) -> str:
        path = tmp_path / name
        with zipfile.ZipFile(path, "w") as archive:
            for member, text in members.items():
                archive.writestr(member, text)
        return str(path)

    gold = zipped("gold.zip", {"essay.txt": "text", "notes.md": "n"})
    assert (
        run("compare_zip_files", zipped("same.zip", {"notes.md": "n", "essay.txt": "text"}), gold)
        == 1.0
    )
    assert (
        run("compare_zip_files", zipped("diff.zip", {"essay.txt": "TEXT", "notes.md": "n"}), gold)
        == 0.0
    )
    assert (
        run(
            "compare_archive",
            zipped("pred.zip", {"d/a.txt": "1", "d/b.txt": "2"}),
            zipped("g.zip", {"d/a.txt": "1", "d/b.txt": "X"}),
            file_path="d",
        )
        == 0.5
    )

    def tarred(name: str, members: dict[str, str]) -> str:
        src = tmp_path / f"{name}_src"
        src.mkdir()
        path = tmp_path / name
        with tarfile.open(path, "w:gz") as archive:
            for member, text in members.items():
                (src / member).write_text(text)
                archive.add(src / member, arcname=member)
        return str(path)

    assert (
        run(
            "compare_archive",
            tarred("p.tar.gz", {"a.txt": "1"}),
            tarred("gg.tar.gz", {"a.txt": "1"}),
        )
        == 1.0
    )
    assert (
        run(
            "compare_archive",
            tarred("q.tar.gz", {"b.txt": "1"}),
            tarred("gq.tar.gz", {"a.txt": "1"}),
        )
        == 0.0
    )


def test_fuzzy_place_math(tmp_path: Path) -> None:
    docx = pytest.importorskip("docx")

    def document(words: list[str]) -> str:
        doc = docx.Document()
        for word in words:
            doc.add_paragraph(word)
        path = tmp_path / f"{len(words)}-{words[0]}.docx"
        doc.save(path)
        return str(path)

    rules = {"expected": ["福田区正义街1号", "深圳市福田区振兴路108号", "福田区水围村龙景楼一楼"]}
    assert run("fuzzy_place_math", document(rules["expected"]), rules) == pytest.approx(1.0)
    assert run("fuzzy_place_math", document(rules["expected"][:2]), rules) == 0.0
    assert run("fuzzy_place_math", document(["abc", "def", "ghi"]), rules) < 0.2


def test_compare_htmls(tmp_path: Path) -> None:
    pytest.importorskip("bs4")
    page = '<html><body><table><tr><td sdnum="1033;0;0.00">1.50</td></tr></table></body></html>'
    gold = write(tmp_path, "gold.html", page)
    assert run("compare_htmls", write(tmp_path, "same.html", page), gold) == 1.0
    other = write(tmp_path, "other.html", page.replace('sdnum="1033;0;0.00"', 'sdnum="1033"'))
    assert run("compare_htmls", other, gold) == 0.0
    assert run("compare_htmls", other, gold, ignore_sdnum=True) == 1.0
    assert (
        run("compare_htmls", write(tmp_path, "text.html", page.replace("1.50", "2")), gold) == 0.0
    )


def test_is_expected_installed_extensions() -> None:
    rules = {"expected": ["Momentum", "Google Translate"]}
    assert (
        run("is_expected_installed_extensions", ["Google Translate", "Momentum", "X"], rules) == 1.0
    )
    assert run("is_expected_installed_extensions", ["Momentum"], rules) == 0.0
    assert run("is_expected_installed_extensions", [], rules) == 0.0
