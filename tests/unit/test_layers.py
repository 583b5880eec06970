"""The package keeps its layers: every import points down (docs/architecture.md,
"Layers"). The contract is import-linter's, in pyproject.toml; this runs it on this
checkout's code and shows that it does catch an upward import."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the package under `root` with the contract of its pyproject.toml;
    `root` first on the path, so the copy checked is the one there, not an installed one."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _contract() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["type"] == "layers"]
    return contract


def test_the_package_keeps_its_layers() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cua_rl layers KEPT" in result.stdout


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    """A copy of the package whose `types` (the bottom layer) imports the runtime inside
    a function, as a lazy import would: the same contract must refuse it."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "cua_rl", tmp_path / "cua_rl", ignore=shutil.ignore_patterns("__pycache__")
    )
    types = tmp_path / "cua_rl" / "types.py"
    types.write_text(
        types.read_text()
        + "\n\ndef _upward() -> None:\n    from cua_rl.runtime import train  # noqa\n"
    )
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "cua_rl layers BROKEN" in result.stdout
    assert "cua_rl.types -> cua_rl.runtime.train" in result.stdout


def test_the_documented_layers_are_the_contract() -> None:
    """docs/architecture.md lists the layers in a block, one per line with its reason
    after `#`; it must say what the contract checks."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"## Layers\n.*?```\n(.*?)```", text, re.S)
    assert block is not None, "docs/architecture.md has no `## Layers` block"
    documented = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    assert [line for line in documented if line] == _contract()["layers"]
