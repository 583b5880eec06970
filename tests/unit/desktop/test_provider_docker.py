"""The docker provider against a fake `docker` CLI (no engine can run here).

The fake, first on PATH, records every argv and keeps containers as JSON files;
`run` starts a real HTTP server on the published guest port (serving /healthz
and /platform), so start/reset/health go through the real GuestClient.
FAKE_DOCKER_MODE=exit makes containers exit at once, =nodaemon fails `version`.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from pathlib import Path

import pytest

from cua_rl.desktop.providers import vm_host
from cua_rl.desktop.providers.container.docker import DockerProvider, parse_ports
from cua_rl.desktop.providers.container.docker_config import DockerProviderConfig
from cua_rl.errors import DesktopError

FAKE_DOCKER = r"""
import json, os, signal, socket, subprocess, sys
from pathlib import Path

state = Path(os.environ["FAKE_DOCKER_DIR"])
mode = os.environ.get("FAKE_DOCKER_MODE", "ok")
args = sys.argv[1:]
with open(state / "calls.jsonl", "a") as f:
    f.write(json.dumps(args) + "\n")
boxes = state / "containers"
boxes.mkdir(exist_ok=True)

def load(name):
    path = boxes / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None

def status(box):
    if box.get("pid") is None:
        return "exited"
    try:
        os.kill(box["pid"], 0)
        return "running"
    except OSError:
        return "exited"

def missing(name):
    sys.stderr.write(f"Error response from daemon: No such container: {name}\n")
    sys.exit(1)

cmd = args[0]
if cmd == "version":
    if mode == "nodaemon":
        sys.stderr.write("Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
                         " Is the docker daemon running?\n")
        sys.exit(1)
    print("28.2.2")
elif cmd == "run":
    name = args[args.index("--name") + 1]
    label = args[args.index("--label") + 1].split("=", 1)
    ports = {}
    for i, a in enumerate(args):
        if a == "-p":
            host, _, cport = args[i + 1].split(":")
            with socket.socket() as s:
                s.bind((host, 0))
                ports[cport] = [host, s.getsockname()[1]]
    pid = None
    if mode == "ok":
        pid = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(ports["5000"][1]), "--bind",
             ports["5000"][0], "--directory", str(state / "www")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True).pid
    (boxes / f"{name}.json").write_text(json.dumps(
        {"name": name, "label": label, "ports": ports, "pid": pid}))
    print("f" * 64)
elif cmd == "inspect":
    box = load(args[-1])
    if box is None:
        missing(args[-1])
    print(status(box))
elif cmd == "port":
    box = load(args[-1]) or missing(args[-1])
    for cport, (host, hport) in box["ports"].items():
        print(f"{cport}/tcp -> {host}:{hport}")
elif cmd == "ps":
    for path in sorted(boxes.glob("*.json")):
        box = json.loads(path.read_text())
        ports = ", ".join(f"{h}:{p}->{c}/tcp" for c, (h, p) in box["ports"].items())
        print(f"{box['label'][1]}\t{box['name']}\t{status(box)}\t{ports}")
elif cmd == "logs":
    box = load(args[-1]) or missing(args[-1])
    print("BdsDxe: failed to load Boot0001 from PciRoot(0x0)")
    sys.stderr.write("qemu: could not access KVM kernel module: Permission denied\n")
elif cmd == "rm":
    box = load(args[-1]) or missing(args[-1])
    if box.get("pid"):
        try:
            os.killpg(box["pid"], signal.SIGKILL)
        except OSError:
            pass
    (boxes / f"{args[-1]}.json").unlink()
else:
    sys.stderr.write(f"fake docker: unexpected command {args}\n")
    sys.exit(2)
"""


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fake `docker` first on PATH; yields its state dir; kills leftover servers."""
    bindir, state = tmp_path / "bin", tmp_path / "docker-state"
    bindir.mkdir()
    (state / "www").mkdir(parents=True)
    (state / "www" / "healthz").write_text("ok")
    (state / "www" / "platform").write_text("Linux")
    script = bindir / "docker"
    script.write_text(f"#!{sys.executable}\n{FAKE_DOCKER}")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_DIR", str(state))
    yield state
    for path in (state / "containers").glob("*.json"):
        pid = json.loads(path.read_text()).get("pid")
        if pid:
            try:
                os.killpg(pid, 9)
            except OSError:
                pass


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "Ubuntu.qcow2"
    path.write_bytes(b"QFI\xfb")
    return path


def calls(state: Path) -> list[list[str]]:
    return [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]


def config(image: Path, **kwargs) -> DockerProviderConfig:
    return DockerProviderConfig(image=image, ready_timeout_s=20, state_poll_s=0.2, **kwargs)


def test_run_argv_mounts_image_read_only_and_publishes_ports_on_free_host_ports() -> None:
    provider = DockerProvider(DockerProviderConfig(ram="8G", cpus=2, extra_args=["--rm"]))
    argv = provider.run_argv("d-1", "/img/Ubuntu.qcow2", kvm=True)
    assert argv[:5] == ["docker", "run", "--detach", "--name", "cua-rl-d-1"]
    assert argv[-2:] == ["--rm", "happysixd/osworld-docker"]
    joined = " ".join(argv)
    assert "-v /img/Ubuntu.qcow2:/System.qcow2:ro" in joined
    assert "--device /dev/kvm" in joined and "KVM=N" not in joined
    assert "--label cua-rl.desktop=d-1" in joined
    assert "-e RAM_SIZE=8G" in joined and "-e CPU_CORES=2" in joined
    for port in (5000, 8006, 9222, 8080):
        assert f"-p 127.0.0.1::{port}" in joined
    no_kvm = provider.run_argv("d-1", "/img/Ubuntu.qcow2", kvm=False)
    assert "--device" not in no_kvm and "KVM=N" in no_kvm


def test_parse_ports_reads_docker_port_and_ps_formats() -> None:
    assert parse_ports(
        "5000/tcp -> 127.0.0.1:49153\n8006/tcp -> 0.0.0.0:49154\n8006/tcp -> [::]:49154\n"
    ) == {5000: 49153, 8006: 49154}
    assert parse_ports("127.0.0.1:41000->5000/tcp, 127.0.0.1:41001->9222/tcp") == {
        5000: 41000,
        9222: 41001,
    }
    assert parse_ports("") == {}


async def test_lifecycle_start_list_reset_stop(fake_docker: Path, image: Path) -> None:
    provider = DockerProvider(config(image, kvm="off"))
    try:
        handle = await provider.start("d-1")
        assert handle.url.startswith("http://127.0.0.1:") and handle.token is None
        assert handle.info["container"] == "cua-rl-d-1" and handle.info["kvm"] is False
        assert {"vnc_url", "cdp_port", "vlc_port"} <= handle.info.keys()
        assert await provider.health(handle)
        assert [h.id for h in await provider.list()] == ["d-1"]
        assert (await provider.get("d-1")).url == handle.url

        with pytest.raises(DesktopError, match="already running"):
            await provider.start("d-1")

        new = await provider.reset(handle)
        assert await provider.health(new) and "reset_s" in new.info
        ops = [c[0] for c in calls(fake_docker)]
        last_rm = len(ops) - 1 - ops[::-1].index("rm")
        assert "run" in ops[last_rm:], "reset must recreate the container after removing it"

        await provider.stop(new)
        assert await provider.list() == []
        assert not await provider.health(new)
        await provider.stop(new)  # idempotent: the container is already gone
    finally:
        await provider.close()


async def test_container_that_exits_fails_with_its_logs_and_is_removed(
    fake_docker: Path, image: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_DOCKER_MODE", "exit")
    provider = DockerProvider(config(image))
    with pytest.raises(DesktopError) as caught:
        await provider.start("d-2")
    message = str(caught.value)
    assert "cua-rl-d-2 is exited" in message and "could not access KVM" in message
    assert not (fake_docker / "containers" / "cua-rl-d-2.json").exists()
    await provider.close()


async def test_missing_docker_cli_is_a_clear_error(
    image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker anywhere
    with pytest.raises(DesktopError, match=r"`docker` not found on PATH; install Docker"):
        await DockerProvider(config(image)).start("d-1")


async def test_unreachable_engine_is_a_clear_error(
    fake_docker: Path, image: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_DOCKER_MODE", "nodaemon")
    with pytest.raises(DesktopError, match="engine is not reachable.*Cannot connect"):
        await DockerProvider(config(image)).start("d-1")
    assert [c[0] for c in calls(fake_docker)] == ["version"]


async def test_missing_image_names_the_path_and_how_to_get_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "Ubuntu.qcow2"
    with pytest.raises(DesktopError) as caught:
        await DockerProvider(config(missing)).start("d-1")
    assert str(missing) in str(caught.value) and "huggingface.co" in str(caught.value)


async def test_no_kvm_runs_emulated_with_a_warning(
    fake_docker: Path,
    image: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(vm_host, "KVM_DEVICE", tmp_path / "no-kvm")
    provider = DockerProvider(config(image))
    with caplog.at_level(logging.WARNING):
        handle = await provider.start("d-3")
    assert handle.info["kvm"] is False and "without KVM" in caplog.text
    run = next(c for c in calls(fake_docker) if c[0] == "run")
    assert "KVM=N" in run and "/dev/kvm" not in run
    with pytest.raises(DesktopError, match="kvm=on"):
        vm_host.use_kvm("on", "docker")
    await provider.stop(handle)
    await provider.close()
