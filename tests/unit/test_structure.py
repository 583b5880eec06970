"""The package's shape: no import cycles (lazy and TYPE_CHECKING imports, parent
packages and importlib names included), small modules, and a CLI entry that does
not import torch."""

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
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n"
    )
    (pkg / "c.py").write_text("from pkg import a\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b"]]


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_importing_a_module_runs_its_parent_packages(tmp_path: Path) -> None:
    """`pkg.a` imports only `pkg.sub.leaf`, but that runs `pkg/sub/__init__.py`,
    which imports `pkg.b`, which imports `pkg.a`: a cycle."""
    pkg = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/leaf.py": "",
            "pkg/sub/__init__.py": "from pkg import b\n",
            "pkg/a.py": "def f():\n    from pkg.sub.leaf import x\n",
            "pkg/b.py": "from pkg import a\n",
        },
    )
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.leaf"}
    assert graph["pkg.sub.leaf"] == set()  # its own packages run before it: not an edge
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub"]]


def test_importlib_names_known_from_the_source_are_edges(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/x.py": "",
            "pkg/y.py": "",
            "pkg/z.py": "",
            "pkg/plugins/__init__.py": (
                "import importlib, pkgutil\n"
                "for m in pkgutil.iter_modules(__path__):\n"
                "    importlib.import_module(f'{__name__}.{m.name}')\n"
            ),
            "pkg/plugins/one.py": "",
            "pkg/plugins/two.py": "",
            "pkg/literal.py": "import importlib\nimportlib.import_module('pkg.x')\n",
            "pkg/table.py": (
                "from importlib import import_module\n"
                "TABLE = {'y': 'pkg.y:Y', 'not a module': 'pkg.nope:N'}\n"
                "def get(k):\n    return import_module(TABLE[k].split(':')[0])\n"
            ),
            "pkg/strings.py": "TABLE = {'z': 'pkg.z:Z'}\n",  # never imported by name: no edge
        },
    )
    graph = import_graph(pkg)
    assert graph["pkg.plugins"] == {"pkg.plugins.one", "pkg.plugins.two"}
    assert graph["pkg.literal"] == {"pkg.x"}
    assert graph["pkg.table"] == {"pkg.y"}
    assert graph["pkg.strings"] == set()


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text().splitlines())
        for base in ("cua_rl", "vm/guest/cua_guest")
        for p in (ROOT / base).rglob("*.py")
    }
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


def test_the_cli_help_does_not_import_torch() -> None:
    code = (
        "import sys; from click.testing import CliRunner; from cua_rl.cli import cli; "
        "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0, r.output; "
        "print(sorted(m for m in ('torch', 'transformers', 'ray') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_no_caller_reaches_into_the_async_run_store() -> None:
    """Outside cua_rl/store/, the run store is used through AsyncRunStore's own async
    methods: `store.sync.X` would run SQLite on the event loop."""
    import re

    package = ROOT / "cua_rl"
    reaching = re.compile(r"\bstore\.sync\.\w+")
    found = [
        f"{path.relative_to(package)}:{n}"
        for path in sorted(package.rglob("*.py"))
        if "store" not in path.relative_to(package).parts[:1]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reaching.search(line)
    ]
    assert found == [], found
