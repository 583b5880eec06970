"""Atomic whole-file writes from many threads of one process (two container
desktops starting at once wrote the seccomp profile through one temporary name,
and the second rename failed)."""

from __future__ import annotations

import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cua_rl.atomic_file import write_text_atomic
from cua_rl.desktop.providers.container.seccomp import profile_text, write_profile

WRITERS = 16


def _all_at_once(fn) -> list:
    """Run `fn` in WRITERS threads released together by a barrier."""
    barrier = threading.Barrier(WRITERS)

    def go(i: int):
        barrier.wait(timeout=30)
        return fn(i)

    with ThreadPoolExecutor(WRITERS) as pool:
        return list(pool.map(go, range(WRITERS)))


def test_threads_writing_one_file_all_succeed_and_leave_one_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    texts = [f"writer {i}\n" * 2000 for i in range(WRITERS)]
    for _ in range(20):
        _all_at_once(lambda i: write_text_atomic(target, texts[i], mode=0o644))
        assert target.read_text() in texts  # one writer's whole text, never a mix
        assert [p.name for p in target.parent.iterdir()] == ["state.json"]  # no leftovers
        assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_desktops_starting_together_share_one_seccomp_profile(tmp_path: Path) -> None:
    paths = _all_at_once(lambda _: write_profile(tmp_path))
    assert len(set(paths)) == 1 and paths[0].read_text() == profile_text()
    assert [p.name for p in tmp_path.iterdir()] == [paths[0].name]
