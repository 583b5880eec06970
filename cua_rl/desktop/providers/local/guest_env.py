"""The guest's interpreter for local desktops: a virtual environment outside the
checkout, keyed by the guest package's content.

A desktop sees none of the host's files except read-only system directories, so
the guest cannot run from the checkout (an editable install points there) or from
the host's own Python (here pyenv under /root, which must stay invisible). It runs
from a venv of Debian's /usr/bin/python3 (`--system-site-packages` for
python3-pyatspi) with `vm/guest` installed non-editable, under
`/opt/cua-rl/guest-venv-<hash>`: the hash covers the package's files, so two
checkouts with different guest code get two venvs and never clash, and a checkout
under /tmp works. The provider builds it on first use (under a lock, into a
temporary name renamed into place, so a half-built venv is never used);
`setup.sh` builds it ahead with `python -m cua_rl.desktop.providers.local.guest_env`.

Stdlib only.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

GUEST_VENV_ROOT = Path("/opt/cua-rl")
SYSTEM_PYTHON = "/usr/bin/python3"
READY_MARK = ".cua-rl-ready"
_BUILD_TIMEOUT_S = 600.0


def guest_source_dir() -> Path | None:
    """The `vm/guest` directory (pyproject.toml beside `cua_guest/`) this process
    imports `cua_guest` from, or None (not importable, or installed without sources)."""
    spec = importlib.util.find_spec("cua_guest")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def content_hash(src: Path) -> str:
    """Short sha256 of pyproject.toml and every file of the package (paths included)."""
    digest = hashlib.sha256()
    files = [src / "pyproject.toml"]
    files += sorted(
        p for p in (src / "cua_guest").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    for path in files:
        digest.update(str(path.relative_to(src)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def venv_path(src: Path, root: Path = GUEST_VENV_ROOT) -> Path:
    return root / f"guest-venv-{content_hash(src)}"


def ensure_guest_venv(src: Path, root: Path = GUEST_VENV_ROOT) -> Path:
    """The ready venv for this guest source, built if missing. RuntimeError naming
    the failed command (its output tail) when it cannot be built."""
    target = venv_path(src, root)
    if (target / READY_MARK).is_file():
        return target
    if not Path(SYSTEM_PYTHON).is_file():
        raise RuntimeError(
            f"guest venv: {SYSTEM_PYTHON} not found (apt-get install python3 "
            "python3-venv python3-pyatspi)"
        )
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same one
        if (target / READY_MARK).is_file():
            return target
        tmp = root / f".{target.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        try:
            _run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", str(tmp)])
            _run(
                [
                    str(tmp / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    "--no-warn-script-location",
                    str(src),
                ]
            )
            (tmp / READY_MARK).write_text(str(src) + "\n")
            # `python -m` finds pyvenv.cfg beside bin/python, so the rename is safe
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _run(argv: list[str]) -> None:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False, cwd="/"
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-1500:]
        raise RuntimeError(f"guest venv: {' '.join(argv)} exited {done.returncode}:\n{tail}")


def main() -> None:
    """`python -m cua_rl.desktop.providers.local.guest_env [VM_GUEST_DIR]`: build it,
    print its path."""
    src = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else guest_source_dir()
    if src is None or not (src / "pyproject.toml").is_file():
        sys.exit(f"guest venv: no guest source directory ({src}): pass the path of vm/guest")
    try:
        print(ensure_guest_venv(src))
    except RuntimeError as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
