"""`bench soak`'s sampler on a real process tree (a parent with two sleeping
children): it sees every process with its RSS, fds, threads and children, sizes
the run directory by part, and what is left alive after the parent is gone is
found (`RunProcess.leftovers`, what `processes_left` is made of)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from cua_rl.bench.faults.watched_run import RunProcess, poll_until, server_pattern
from cua_rl.bench.soak.sampler import (
    Sampler,
    attribute_to_servers,
    load_samples,
    process_label,
    run_dir_sizes,
    take_sample,
)
from cua_rl.runtime.telemetry.replica_logs import ReplicaLogs

PARENT = (
    "import subprocess, sys, time\n"
    "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
    " for _ in range(2)]\n"
    "files = [open(sys.argv[1]) for _ in range(20)]\n"
    "time.sleep(60)\n"
)
"""A parent holding 20 more open files than usual and two sleeping children
(each bounded to 60 s, should the test die before it kills them)."""


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[subprocess.Popen]:
    target = tmp_path / "held.txt"
    target.write_text("x")
    proc = subprocess.Popen([sys.executable, "-c", PARENT, str(target)], start_new_session=True)
    try:
        assert poll_until(lambda: len(psutil.Process(proc.pid).children()) == 2, 30, 0.1)
        # the parent opened its files once its children exist and python is running
        assert poll_until(lambda: psutil.Process(proc.pid).num_fds() >= 20, 30, 0.1)
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "screenshots" / "ab").mkdir(parents=True)
    (run / "logs").mkdir()
    (run / "run.sqlite").write_bytes(b"\0" * 1024 * 1024)
    (run / "run.sqlite-wal").write_bytes(b"\0" * 512 * 1024)
    (run / "screenshots" / "ab" / "cafe").write_bytes(b"\0" * 2 * 1024 * 1024)
    (run / "logs" / "policy-0.log").write_text(
        "12:00 WARNING hf engine serving tiny on 127.0.0.1:4242\n" + "x" * 40000 + "\n"
        "12:01 INFO weights updated to version 1 from {'host': '127.0.0.1', 'port': 555}\n"
    )
    (run / "logs" / "prm-0.log").write_text(  # vLLM's way of naming its port
        "Triton is installed\n(APIServer pid=1) INFO non-default args: {'host': '127.0.0.1', "
        "'port': 30864, 'model': 'm'}\n(APIServer pid=1) INFO Starting vLLM server on "
        "http://127.0.0.1:30864\n"
    )
    (run / "config.yaml").write_text("a: 1\n" * 5000)
    return run


def test_a_sample_sees_every_process_of_the_tree_and_the_run_dir(
    tmp_path: Path, tree: subprocess.Popen
) -> None:
    run = _run_dir(tmp_path)
    sample = take_sample(tree.pid, run, time.time())
    procs = {p["pid"]: p for p in sample["processes"]}
    kids = [c.pid for c in psutil.Process(tree.pid).children()]
    assert set(procs) == {tree.pid, *kids}
    assert procs[tree.pid]["children"] == 2 and all(procs[k]["children"] == 0 for k in kids)
    assert procs[tree.pid]["fds"] >= 20 + 3
    assert all(p["rss_mb"] > 1 and p["threads"] >= 1 for p in procs.values())
    name = procs[tree.pid]["name"]
    assert name.startswith("python") and name.endswith(f"#{tree.pid}")
    sizes = sample["run_dir_mb"]
    assert sizes["store"] == pytest.approx(1.5, abs=0.01)
    assert sizes["screenshots"] == pytest.approx(2.0, abs=0.01)
    assert sizes["logs"] > 0.03 and sizes["other"] > 0
    assert sizes["total"] == pytest.approx(
        sum(v for k, v in sizes.items() if k != "total"), abs=0.01
    )
    assert sample["host"]["mem_available_mb"] > 0 and sample["host"]["disk_free_mb"] > 0
    assert run_dir_sizes(tmp_path / "absent")["total"] == 0


def test_the_sampler_thread_appends_json_lines_until_stopped(
    tmp_path: Path, tree: subprocess.Popen
) -> None:
    out = tmp_path / "samples.jsonl"
    sampler = Sampler(tree.pid, _run_dir(tmp_path), out, interval_s=0.5)
    sampler.start()
    try:
        assert poll_until(lambda: sampler.samples >= 2, 30, 0.1)
    finally:
        sampler.stop()
    assert not sampler.is_alive()
    samples = load_samples(out)
    assert len(samples) == sampler.samples >= 2
    assert samples[0]["t"] <= samples[-1]["t"]
    assert len(sampler.seen) == 3 and all(json.dumps(s) for s in samples)
    assert all(started > 0 for _, started in sampler.seen.values())


def test_what_outlives_the_run_is_found(tmp_path: Path, tree: subprocess.Popen) -> None:
    run = RunProcess("train", tmp_path / "run", tmp_path / "desktops", proc=tree)
    (tmp_path / "desktops").mkdir()
    kids = {p.pid for p in run.descendants()}
    assert len(kids) == 2
    os.kill(tree.pid, signal.SIGKILL)  # the parent dies, its children live on
    tree.wait(10)
    left = run.leftovers(grace_s=0)
    assert set(left["processes"]) == kids and left["desktops"] == []
    for pid in kids:
        os.kill(pid, signal.SIGKILL)
    assert poll_until(lambda: run.leftovers(grace_s=0)["processes"] == {}, 10, 0.1)


def test_processes_are_named_by_what_they_are(tmp_path: Path) -> None:
    ports = ReplicaLogs(_run_dir(tmp_path)).scan()
    assert ports == {4242: "policy-0", 30864: "prm-0"}  # not a weight update's port
    assert (
        process_label(
            [sys.executable, "-m", "cua_rl.cli", "serve", "--engine", "hf", "--port", "4242"], ports
        )
        == "model-server:policy-0"
    )
    vllm = [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "m",
        "--host",
        "127.0.0.1",
        "--port",
        "30864",
    ]
    assert process_label(vllm, ports) == "model-server:prm-0"
    assert process_label([*vllm[:-1], "99"], ports) == "model-server:99"
    assert re.search(server_pattern(30864), " ".join(vllm))
    assert re.search(
        server_pattern(4242),
        "python -m cua_rl.cli serve --engine hf --model m --port 4242 --threads 1",
    )
    assert not re.search(server_pattern(4242), " ".join(vllm))
    assert process_label(["Xvfb", ":12", "-screen"], ports) == "xvfb"
    assert process_label(["python", "-m", "cua_guest", "--listen-fd", "3"], ports) == "guest"
    assert process_label(["python", "-m", "cua_guest.act_child"], ports) == "guest-act"
    assert process_label(["python", "-m", "cua_rl.learner.rank_process"], ports) == "learner-rank"
    assert process_label(["python", "-m", "cua_rl.cli", "train", "--preset", "q"], ports) == "run"
    assert process_label(["VLLM::Worker"], ports) == "vllm-worker"
    # a sandbox's arguments name the programs it runs: it is a sandbox all the same
    assert (
        process_label(
            [
                "bwrap",
                "--setenv",
                "DISPLAY",
                ":200",
                "/bin/bash",
                "-c",
                "Xvfb :200 & python -m cua_guest",
            ],
            ports,
        )
        == "desktop-sandbox"
    )
    assert process_label(["/bin/bash", "-c", "Xvfb :1 &"], ports) == "shell"


def test_a_model_server_s_helpers_are_named_after_its_pool() -> None:
    procs = [
        {"pid": 1, "ppid": 0, "name": "run#1"},
        {"pid": 2, "ppid": 1, "name": "model-server:policy-0#2"},
        {"pid": 3, "ppid": 2, "name": "vllm-enginecore#3"},
        {"pid": 4, "ppid": 3, "name": "vllm-worker#4"},
        {"pid": 5, "ppid": 1, "name": "guest#5"},
    ]
    attribute_to_servers(procs)
    assert [p["name"] for p in procs] == [
        "run#1",
        "model-server:policy-0#2",
        "vllm-enginecore:policy-0#3",
        "vllm-worker:policy-0#4",
        "guest#5",
    ]


def test_a_reused_pid_is_not_the_run_s_process(tmp_path: Path) -> None:
    """Over a long run, pids of ended processes are reused by others: a process is
    the run's only while its start time is the one seen."""
    run = RunProcess("train", tmp_path / "run", tmp_path / "desktops")
    me = psutil.Process(os.getpid())
    run.remember(me.pid, "an ended process", me.create_time() - 3600)
    assert not run.is_ours(me.pid)
    (tmp_path / "desktops").mkdir()
    assert run.leftovers(grace_s=0)["processes"] == {}
    run.remember(me.pid, "pytest", me.create_time())  # seen again, started later: replaced
    assert run.is_ours(me.pid) and run.seen[me.pid] == "pytest"
    run.remember(me.pid, "older", me.create_time() - 10)  # an older identity never wins
    assert run.seen[me.pid] == "pytest"
    # the same process seen again after its exec (first seen with its parent's line)
    run.remember(me.pid, "python -m vllm.entrypoints.openai.api_server --port 1", me.create_time())
    assert run.seen[me.pid] == "python -m vllm.entrypoints.openai.api_server --port 1"


def test_a_resumed_run_s_replica_is_found_on_its_new_port(tmp_path: Path) -> None:
    """A resumed run appends to the same replica log with a new port; a line still
    being written is read once it is whole."""
    run = _run_dir(tmp_path)
    logs = ReplicaLogs(run)
    assert logs.scan("policy") == {4242: "policy-0"}
    with (run / "logs" / "policy-0.log").open("a") as f:
        f.write("13:00 WARNING hf engine serving exports/policy-resume-v3 on 127.0.")
        f.flush()
        assert logs.scan("policy") == {4242: "policy-0"}
        f.write("0.1:5151\n")
    assert logs.scan("policy") == {5151: "policy-0"}
    assert logs.scan() == {5151: "policy-0", 30864: "prm-0"}
    assert ReplicaLogs(run).scan("prm") == {30864: "prm-0"}
