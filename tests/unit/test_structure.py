"""The package's shape: no import cycles (lazy and TYPE_CHECKING imports included),
small modules, and a CLI entry that does not import torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests_support.import_graph import cycles, import_graph

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400


def test_the_package_has_no_import_cycles() -> None:
    assert cycles(import_graph(ROOT / "cua_rl")) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from pkg.a import f\n")
    (pkg / "c.py").write_text("from pkg import a\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b"]]


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines())
             for base in ("cua_rl", "vm/guest/cua_guest") for p in (ROOT / base).rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


def test_the_cli_help_does_not_import_torch() -> None:
    code = ("import sys; from click.testing import CliRunner; from cua_rl.cli import cli; "
            "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('torch', 'transformers', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_no_caller_reaches_into_the_async_run_store() -> None:
    """Outside cua_rl/store/, the run store is used through AsyncRunStore's own async
    methods: `store.sync.X` would run SQLite on the event loop."""
    import re

    package = ROOT / "cua_rl"
    reaching = re.compile(r"\bstore\.sync\.\w+")
    found = [f"{path.relative_to(package)}:{n}" for path in sorted(package.rglob("*.py"))
             if "store" not in path.relative_to(package).parts[:1]
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if reaching.search(line)]
    assert found == [], found
