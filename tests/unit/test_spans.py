"""The span recorder (`cua_rl/spans.py`): off it writes nothing, on it writes one
well-formed JSON line per span per process, and a crash keeps what was flushed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cua_rl import spans
from cua_rl.report.loop_profile import load_spans

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _recorder_off() -> Iterator[None]:
    """The recorder is process-wide: no test leaves it on for the next."""
    spans.close()
    yield
    spans.close()


def _lines(run_dir: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted((run_dir / "spans").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_off_it_records_nothing_and_writes_nothing(tmp_path: Path) -> None:
    assert not spans.enabled()
    with spans.span("policy_call", tid="t") as span:
        span.set(replica="r0")

    async def episode() -> None:
        async with spans.span("act", tid="t"):
            await asyncio.sleep(0)

    asyncio.run(episode())
    spans.span("lease_wait").begin().end()
    spans.record("learner_step", 1.0, 2.0, role="policy")
    spans.mark("pool", name="policy", replicas=2)
    spans.mark_once("k", "fleet", actors=1)
    spans.flush()
    with spans.recording(None):
        spans.mark("fleet", actors=3)
    assert list(tmp_path.iterdir()) == []


async def test_on_it_writes_one_line_per_span_with_wall_clock_times(tmp_path: Path) -> None:
    before = time.time()
    with spans.recording(tmp_path):
        assert spans.enabled()
        with spans.span("policy_call", tid="t1", step=0) as span:
            span.set(replica="r0")
        async with spans.span("act", tid="t1"):
            await asyncio.sleep(0.01)
        waiting = spans.span("lease_wait", actor=3).begin()
        waiting.end()
        spans.record("learner_step", 5.0, 7.5, role="policy", samples=4)
        spans.mark_once(("pool", "prm"), "pool", name="prm", replicas=2)
        spans.mark_once(("pool", "prm"), "pool", name="prm", replicas=2)  # once only
        with pytest.raises(ValueError), spans.span("evaluate", tid="t1"):
            raise ValueError("evaluator broke")
    assert not spans.enabled()
    lines = _lines(tmp_path)
    assert [s["kind"] for s in lines] == [
        "policy_call",
        "act",
        "lease_wait",
        "learner_step",
        "pool",
        "evaluate",
    ]
    assert all(s["pid"] == os.getpid() for s in lines)
    call, act, lease, step, pool, failed = lines
    assert call["tid"] == "t1" and call["step"] == 0 and call["replica"] == "r0"
    assert before <= call["start"] <= call["end"] <= time.time()
    assert act["end"] - act["start"] >= 0.009
    assert lease["actor"] == 3 and "error" not in lease
    assert (step["start"], step["end"], step["samples"]) == (5.0, 7.5, 4)
    assert pool["start"] == pool["end"] and pool["replicas"] == 2
    assert failed["error"] == "ValueError"
    assert (tmp_path / "spans" / f"spans-{os.getpid()}.jsonl").is_file()


def test_a_nested_recording_leaves_the_outer_one_on(tmp_path: Path) -> None:
    with spans.recording(tmp_path / "outer"):
        with spans.recording(tmp_path / "inner"):
            spans.mark("fleet", actors=1)
        assert spans.enabled()
        spans.mark("fleet", actors=2)
    assert [s["actors"] for s in _lines(tmp_path / "outer")] == [1, 2]
    assert not (tmp_path / "inner").exists()


def test_lines_are_flushed_by_count_and_by_age(tmp_path: Path) -> None:
    spans.configure(tmp_path, flush_lines=3, flush_s=3600)
    for _ in range(4):
        spans.mark("tick")
    assert len(_lines(tmp_path)) == 3  # the fourth waits in the buffer
    spans.configure(tmp_path / "aged", flush_lines=1000, flush_s=0.0)
    spans.mark("tick")
    assert len(_lines(tmp_path / "aged")) == 1
    spans.close()
    assert len(_lines(tmp_path)) == 4  # the earlier recorder flushed when replaced


CHILD = """
import os, signal, sys
from pathlib import Path
from cua_rl import spans
spans.configure(Path(sys.argv[1]), flush_lines=10, flush_s=3600)
for i in range(25):
    with spans.span("policy_call", tid=f"t{i}", step=i):
        pass
if sys.argv[2] == "crash":
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no atexit: the last 5 are lost
"""


def test_processes_write_their_own_files_and_a_crash_keeps_the_flushed_lines(
    tmp_path: Path,
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    runs = [
        subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path), mode], env=env, timeout=60, check=False
        )
        for mode in ("crash", "exit")
    ]
    assert runs[0].returncode == -signal.SIGKILL and runs[1].returncode == 0
    files = sorted((tmp_path / "spans").glob("spans-*.jsonl"))
    assert len(files) == 2
    with files[0].open("a") as torn:  # a process killed in the middle of a write
        torn.write('{"kind": "act", "start": 1.0, "en')
    by_pid: dict[int, list[dict]] = {}
    for span in load_spans(tmp_path):
        assert {"kind", "start", "end", "pid", "tid", "step"} <= span.keys()
        assert span["start"] <= span["end"]
        by_pid.setdefault(span["pid"], []).append(span)
    assert sorted(len(v) for v in by_pid.values()) == [20, 25]  # flushed by tens; at exit


def test_a_forked_child_does_not_write_into_the_parents_file(tmp_path: Path) -> None:
    spans.configure(tmp_path, flush_lines=1000, flush_s=3600)
    spans.mark("parent")
    pid = os.fork()
    if pid == 0:  # the child: records nothing, flushes nothing of the parent's buffer
        code = 0 if not spans.enabled() else 1
        spans.mark("child")
        spans.close()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    spans.close()
    assert [s["kind"] for s in _lines(tmp_path)] == ["parent"]


def test_a_full_span_file_rotates_and_the_reader_reads_both(tmp_path: Path) -> None:
    """`metrics.spans_max_mb`: a process keeps its latest spans in at most two files."""
    spans.configure(tmp_path, flush_lines=10, max_bytes=4000)
    for i in range(200):
        spans.record("policy_call", 1.0 + i, 2.0 + i, i=i)
    spans.close()
    files = sorted(p.name for p in (tmp_path / spans.SPANS_DIR).iterdir())
    assert files == [f"spans-{os.getpid()}.1.jsonl", f"spans-{os.getpid()}.jsonl"]
    assert all((tmp_path / spans.SPANS_DIR / f).stat().st_size < 4000 + 2000 for f in files)
    kept = [s["i"] for s in load_spans(tmp_path)]
    assert kept == sorted(kept) and kept[-1] == 199 and 20 <= len(kept) < 200
