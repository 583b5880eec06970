"""scripts/check, the static checks .ci/run runs before the tests: it passes on this
tree and fails on a copy with one planted lint error, one unformatted module or one
new type error. The copies share one mypy cache, warmed from the checkout's when it
has one (.ci/run ran the script first), so each takes seconds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREE = ("cua_rl", "tests", "scripts", "vm/guest/cua_guest", "pyproject.toml")
SKIP = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
TOOLS = ("ruff", "mypy", "mypy-baseline", "lint-imports")

pytestmark = pytest.mark.skipif(
    any(not (Path(sys.executable).parent / tool).exists() for tool in TOOLS),
    reason=f"the check's tools ({', '.join(TOOLS)}) are not beside {sys.executable} "
    "(pip install -e .[dev])",
)


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("mypy") / "cache"
    if (ROOT / ".mypy_cache").is_dir():
        shutil.copytree(ROOT / ".mypy_cache", cache)
    return cache


def _copy(to: Path) -> Path:
    for name in TREE:
        src, dst = ROOT / name, to / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=SKIP)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return to


def _check(tree: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable, "MYPY_CACHE_DIR": str(cache)}
    return subprocess.run(
        ["bash", str(tree / "scripts" / "check")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_the_tree_passes(tmp_path: Path, mypy_cache: Path) -> None:
    done = _check(_copy(tmp_path), mypy_cache)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "new: 0" in done.stdout


def test_a_lint_error_fails(tmp_path: Path, mypy_cache: Path) -> None:
    tree = _copy(tmp_path)
    _append(tree / "cua_rl" / "seeds.py", "\n\ndef _planted() -> None:\n    import json\n")
    done = _check(tree, mypy_cache)
    assert done.returncode != 0
    assert "cua_rl/seeds.py" in done.stdout and "F401" in done.stdout


def test_an_unformatted_module_fails(tmp_path: Path, mypy_cache: Path) -> None:
    tree = _copy(tmp_path)
    module = next(p for p in sorted((tree / "cua_rl").rglob("*.py")) if p.stat().st_size > 200)
    _append(module, "\n\nPLANTED = {  'a':1 }\n")
    done = _check(tree, mypy_cache)
    assert done.returncode != 0
    assert str(module.relative_to(tree)) in done.stdout + done.stderr
    assert "mypy" not in done.stderr  # stopped at the format step


def test_a_new_type_error_fails(tmp_path: Path, mypy_cache: Path) -> None:
    tree = _copy(tmp_path)
    _append(tree / "cua_rl" / "seeds.py", '\n\ndef _planted() -> int:\n    return "seven"\n')
    done = _check(tree, mypy_cache)
    assert done.returncode != 0
    assert "cua_rl/seeds.py" in done.stdout and "new: 1" in done.stdout
