"""The run store's WAL stays bounded under a long run with a reader open
(`store/wal.py`, run by the store upkeep after every policy update)."""

import threading
from functools import partial
from pathlib import Path

from cua_rl.store.run_store import DB_NAME, RunStore
from cua_rl.store.wal import checkpoint_wal
from cua_rl.types import Action, Step, Trajectory, TrajectoryStatus

STEPS = 10
TOKENS = tuple(range(400))  # ~2 kB of token ids and logprobs per step, as a real policy's


def _traj(tid: str) -> Trajectory:
    steps = tuple(
        Step(
            index=i,
            screenshot_before="a.png",
            screenshot_after="b.png",
            response="r" * 300,
            actions=(Action(kind="left_click", coordinate=(1, 2)),),
            parse_error=None,
            code="",
            token_ids=TOKENS,
            logprobs=tuple(-0.1 for _ in TOKENS),
            policy_version=0,
        )
        for i in range(STEPS)
    )
    return Trajectory(
        id=tid, variant_id="t1:default", steps=steps, status=TrajectoryStatus.FINISHED, score=1.0
    )


def _checkpoint(store: RunStore) -> tuple[int, int, int]:
    return store.query(partial(checkpoint_wal, limit_bytes=8 * 1024 * 1024))


def _wal(run: Path) -> int:
    wal = run / f"{DB_NAME}-wal"
    return wal.stat().st_size if wal.exists() else 0


def test_wal_is_checkpointed_with_a_reader_open(tmp_path: Path) -> None:
    writer = RunStore(tmp_path)
    reader = RunStore.read_only(tmp_path)  # the viewer / runs show, polling all along
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            reader.summary()
            stop.wait(0.005)

    polling = threading.Thread(target=poll)
    polling.start()
    largest = 0
    try:
        for update in range(20):  # 20 updates of 10 trajectories (~ 10 MB of rows)
            for k in range(10):
                writer.save_trajectory(_traj(f"u{update}-{k}"))
            largest = max(largest, _wal(tmp_path))
            _checkpoint(writer)
    finally:
        stop.set()
        polling.join()
    db = (tmp_path / DB_NAME).stat().st_size
    print(f"database {db / 1e6:.1f} MB, largest WAL {largest / 1e6:.1f} MB")
    # SQLite's own autocheckpoint alone leaves a 4 MB WAL here (measured), and one
    # that long readers made larger stays at its largest
    assert db > 8e6 and largest < 2e6 and _wal(tmp_path) == 0
    # a reader that holds one snapshot for long pins the WAL; once it lets go, the
    # next checkpoint empties it
    reader._db.execute("BEGIN")
    reader._db.execute("SELECT count(*) FROM steps").fetchone()
    for k in range(20):
        writer.save_trajectory(_traj(f"pinned-{k}"))
    busy, _, _ = _checkpoint(writer)
    assert busy == 1 and _wal(tmp_path) > 0.5e6
    reader._db.execute("COMMIT")
    assert _checkpoint(writer)[0] == 0 and _wal(tmp_path) == 0
    reader.close()
    writer.close()
