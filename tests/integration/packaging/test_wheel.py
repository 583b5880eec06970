"""The task data installs with the package: a wheel built from this checkout and
installed alone in a fresh virtual environment (its dependencies read from the
checkout's environment) lists the same local tasks, with the same variants, as the
checkout does. A wheel without `cua_rl/tasks/data` would list none."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _tasks(python: Path | str, cwd: Path, env: dict[str, str] | None = None) -> list[dict]:
    done = subprocess.run(
        [str(python), "-m", "cua_rl.cli", "tasks", "list", "--source", "local", "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_wheel_installed_alone_lists_the_checkouts_tasks(tmp_path: Path) -> None:
    src = tmp_path / "src"  # built from a copy: a build leaves build/ in its tree
    shutil.copytree(ROOT / "cua_rl", src / "cua_rl", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(src),
        ],
        check=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    (wheel,) = wheels.glob("cua_rl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("cua_rl/tasks/data/local/") for n in names)
    assert any(n.startswith("cua_rl/tasks/data/splits/") for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
    )
    # dependencies from the checkout's environment; PYTHONPATH entries run no .pth file,
    # so its editable cua_rl (a .pth finder) stays out and the wheel's is imported
    deps = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "PYTHONPATH": deps}
    where = subprocess.run(
        [str(python), "-c", "import cua_rl; print(cua_rl.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr

    installed = _tasks(python, tmp_path, env)
    checkout = _tasks(sys.executable, ROOT)
    assert len(installed) >= 25
    assert installed == checkout
