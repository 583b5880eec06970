"""The escape suite: plays the agent on a real desktop, through the guest's own
authenticated `/execute` (what a policy's actions become), and asserts that
each way out of the desktop fails (issue 19; docs/sandbox.md).

Two desktops per provider (A is the agent's, B its neighbour) and, on the host,
a marker variable in the launcher's environment, a file in /root, the checkout,
the state dir with B's token, and a stand-in model server on 127.0.0.1 whose
`/update_weights` counts the requests that reach it. Parametrized by provider:
`local` (bubblewrap), `container` (the session's minimal docker image) and `qemu`
(the minimal qcow2 under QEMU: two TCG boots, 77 s for its checks on an idle machine
here; `CUA_RL_ESCAPE_QEMU=0` leaves it out). What each provider shares, and the last
qemu run: docs/sandbox.md. The last two tests are not escapes: one shares the two VMs'
boot to fork a group's setup (`fleet.fork_groups`, 20-40 s under TCG), the other runs
`check_provider` with the agent's desktop as its first (the providers' conformance
check; aws runs it in aws/test_aws_osworld.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio
from tests_support import escape_attacks
from tests_support.escape_probes import (
    HOST_NOISE_MB,
    desktop_memory_peak,
    disk_used,
    engine_log,
    host_root_process,
    listeners,
    local_socket_dir,
    processes_in_pid_namespace,
    screenshot_p99,
    shared_socket_dir,
)
from tests_support.escape_scene import CHECKOUT, MARKER_VAR, PROVIDERS, Scene, open_scene, port_of
from tests_support.escape_variants import (
    neighbours_vm_cannot_be_signalled,
    planted_run_dir_does_not_break_the_reset,
)

from cua_rl.desktop import attack_scripts
from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.local.etc_view import etc_entries
from cua_rl.desktop.providers.local.log import DESKTOP_OUTPUT_CAP
from cua_rl.desktop.providers.local.sandbox import DEV_SHM_BYTES
from cua_rl.errors import GuestError

pytestmark = [pytest.mark.desktop, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=sorted(PROVIDERS))
async def scene(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Scene]:
    async with open_scene(
        request, request.param, tmp_path_factory.mktemp("escape") / "state"
    ) as opened:
        yield opened


async def test_the_agent_runs_unprivileged_in_its_own_world(scene: Scene) -> None:
    rc, out = await scene.run(
        "id -u; id -un; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done"
    )
    uid, name, *cmdlines = out.splitlines()
    assert rc == 0 and name == "user" and uid != "0", out
    # Its own PID namespace: nothing of the host (this pytest run, the launcher, the
    # container engine) in sight.
    seen = "\n".join(cmdlines)
    programs = {Path(line.split()[0]).name for line in cmdlines if line.strip()}
    assert programs and not programs & {
        "dockerd",
        "containerd",
        "containerd-shim-runc-v2",
        "pytest",
    }, programs
    assert "pytest" not in seen and "cua_rl." not in seen, seen


async def test_the_launchers_environment_is_not_readable(scene: Scene) -> None:
    rc, out = await scene.run(
        f"env; echo ${MARKER_VAR}; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"
    )
    assert scene.marker not in out
    rc, out = await scene.run("env")
    inside = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    # None of these comes from the launcher (an image may set its own PYTHONPATH:
    # the container image points it at its guest package, never at the checkout).
    leaked = {
        name: value
        for name, value in inside.items()
        if name in {"PYTHONPATH", "VIRTUAL_ENV", "CUA_RL_STATE_DIR", "PYENV_ROOT"}
        and (value == os.environ.get(name) or str(CHECKOUT) in value or name != "PYTHONPATH")
    }
    assert not leaked, leaked


async def test_the_checkout_is_neither_readable_nor_writable(scene: Scene) -> None:
    probe = CHECKOUT / f".cua-escape-{secrets.token_hex(4)}"
    rc, out = await scene.run(
        f"ls {shlex.quote(str(CHECKOUT))} && echo LISTED; "
        f"cat {shlex.quote(str(CHECKOUT / 'pyproject.toml'))} && echo READ; "
        f"echo x > {shlex.quote(str(probe))} && echo WROTE"
    )
    assert not {"LISTED", "READ", "WROTE"} & set(out.split()), out
    assert not probe.exists()
    # The guest's own upload route: refused, or (checkout under /tmp) written into
    # the desktop's private /tmp; either way nothing reaches the host's checkout.
    with contextlib.suppress(GuestError):
        await scene.agent.upload_file(str(probe), b"x")
    assert not probe.exists()


async def test_root_is_neither_readable_nor_writable(scene: Scene) -> None:
    probe = Path("/root") / f".cua-escape-w-{secrets.token_hex(4)}"
    rc, out = await scene.run(f"cat {scene.root_file}; ls -a /root; echo x > {probe} && echo WROTE")
    assert scene.marker not in out and "WROTE" not in out, out
    assert not probe.exists()
    # Absent (local: no /root at all) or refused (container: the image's own /root,
    # root-only); never the host's file.
    with contextlib.suppress(GuestError):
        assert await scene.agent.get_file(str(scene.root_file)) is None


async def test_system_dirs_are_read_only_and_secrets_masked(scene: Scene) -> None:
    rc, out = await scene.run(
        "touch /usr/escape /etc/escape /escape && echo WROTE; cat /etc/shadow /etc/gshadow"
    )
    assert "WROTE" not in out and "root:" not in out, out
    if scene.provider.type == "local":  # /etc is an allowlist (issue 48; local/etc_view.py)
        rc, out = await scene.run("cat /etc/apt/apt.conf.d/* /etc/xdg/pip/* 2>/dev/null | wc -c")
        assert out.strip() == "0", out
        rc, out = await scene.run("ls -A /etc")
        inside = set(out.split())
        allowed = {Path(p).relative_to("/etc").parts[0] for p in etc_entries()}
        assert {"passwd", "fonts", "alternatives"} <= inside <= allowed, inside - allowed
        assert not inside & {
            "shadow",
            "sudoers",
            "ssh",
            "docker",
            "apt",
            "pip.conf",
            "hostname",
            "gitconfig",
            "security",
        }, inside
    assert not any(
        await asyncio.to_thread(
            lambda: [Path(p).exists() for p in ("/usr/escape", "/etc/escape", "/escape")]
        )
    )


async def test_dev_takes_no_large_write(scene: Scene) -> None:
    """A local desktop's /dev was bwrap's unsized tmpfs, writable from inside: now it
    is read-only, and /dev/shm has a size of its own (issue 48)."""
    rc, out = await scene.run(
        "dd if=/dev/zero of=/dev/cua-fill bs=1M count=200 "
        "2>/dev/null && echo WROTE; rm -f /dev/cua-fill; "
        "dd if=/dev/zero of=/dev/shm/cua-fill bs=1M count=300 2>/dev/null;"
        " du -m /dev/shm/cua-fill; rm -f /dev/shm/cua-fill"
    )
    assert "WROTE" not in out, out
    if scene.provider.type == "local":
        held = int(out.split()[-2]) if out.split()[-1:] == ["/dev/shm/cua-fill"] else -1
        assert 0 < held <= DEV_SHM_BYTES >> 20, out


async def test_the_state_dir_and_the_neighbours_token_are_out_of_reach(scene: Scene) -> None:
    token_b = scene.b.token
    rc, out = await scene.run(
        f"ls -a {scene.state_dir} {scene.state_dir}/neighbour-b && echo LISTED; "
        f"cat {scene.state_dir}/neighbour-b/token; "
        f"grep -rs {token_b} /home /tmp /run /var /opt && echo FOUND"
    )
    assert token_b not in out and "LISTED" not in out and "FOUND" not in out, out
    # Its own home holds only its own files.
    rc, out = await scene.run("ls -a /home")
    assert out.split() == [".", "..", "user"], out


async def test_the_neighbours_processes_cannot_be_signalled(scene: Scene) -> None:
    if scene.provider.type == "qemu":
        return await neighbours_vm_cannot_be_signalled(scene)
    root = await host_root_process(scene.b)
    guests = [
        p for p in [root, *root.children(recursive=True)] if "cua_guest" in " ".join(p.cmdline())
    ]
    assert guests, "the neighbour's guest process was not found on the host"
    pids = " ".join(str(p.pid) for p in guests)
    rc, out = await scene.run(f"kill -KILL {pids} && echo KILLED")
    assert "KILLED" not in out, out
    assert all(p.is_running() for p in guests)
    # ...and on the host they run as the desktop user, not root.
    assert {p.uids().real for p in guests} != {0}
    assert await scene.provider.health(scene.b)


async def test_host_loopback_and_the_neighbour_are_unreachable(scene: Scene) -> None:
    targets = {"model": scene.model_port, "guest-b": port_of(scene.b.url)}
    if scene.b.info.get("cdp_port"):
        targets["cdp-b"] = scene.b.info["cdp_port"]
    hosts = ["127.0.0.1", "localhost"]
    hosts += sorted(
        {
            addr.address
            for addrs in psutil.net_if_addrs().values()
            for addr in addrs
            if addr.family.name == "AF_INET" and not addr.address.startswith("127.")
        }
    )
    if scene.provider.type == "qemu":  # user-mode networking's aliases of the host
        hosts += ["10.0.2.2", "10.0.2.3"]
    # Any TCP connection counts (a 401 from the neighbour's guest is still a way in).
    connect = "; ".join(
        f"python3 -c 'import socket; socket.create_connection((\"{host}\", {port}), 3)' "
        f"2>/dev/null && echo REACHED-{name}-{host}"
        for name, port in targets.items()
        for host in hosts
    )
    post = (
        "python3 -c 'import urllib.request as u; u.urlopen(u.Request("
        f'"http://127.0.0.1:{scene.model_port}/update_weights", data=b"{{}}"), '
        "timeout=3)' 2>/dev/null && echo REACHED-update_weights"
    )
    script = f"{connect}; {post}"
    rc, out = await scene.run(script)
    assert "REACHED" not in out, out
    assert scene.model_hits == []
    assert await scene.provider.health(scene.b)


async def test_links_planted_in_the_shared_socket_dir_are_not_followed(scene: Scene) -> None:
    if scene.provider.type == "qemu":
        pytest.skip("qemu: no host directory is shared with a VM (nothing to plant in)")
    if scene.provider.type == "local":
        pytest.skip(
            "local: no socket directory is shared with the sandbox (it gets the "
            "listening descriptors); test_the_socket_dir_cannot_be_changed_from_inside"
        )
    if scene.provider.type == "container":
        pytest.skip(
            "container: the run dir is root's, so nothing can be planted in it; "
            "test_the_container_channel_cannot_be_taken_over"
        )
    # The agent swaps its guest socket for a link to a host socket (a trap standing
    # in for the engine's or another desktop's) and its token for a link to a host
    # secret; the host must neither connect through the one nor read the other.
    trap_hits: list[int] = []

    async def trap(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        trap_hits.append(1)
        writer.close()

    trap_dir = await asyncio.to_thread(tempfile.mkdtemp, prefix="cua-escape-trap-")
    os.chmod(trap_dir, 0o755)
    trap_sock = Path(trap_dir) / "trap.sock"
    server = await asyncio.start_unix_server(trap, path=str(trap_sock))
    os.chmod(trap_sock, 0o777)  # reachable by the host forwarder, whatever user it runs as
    shared = shared_socket_dir(scene.a)
    script = (
        f"cd /run/cua && mv guest.sock guest.sock.real && ln -s {trap_sock} guest.sock"
        f" && {{ mv token token.real 2>/dev/null; ln -s {scene.root_file} token; }}"
        " && sleep 4; rm -f guest.sock; mv guest.sock.real guest.sock;"
        " [ -e token.real ] && rm -f token && mv token.real token; true"
    )
    planted = asyncio.create_task(scene.run(script))
    try:
        deadline = asyncio.get_running_loop().time() + 3
        while not (shared / "guest.sock").is_symlink():
            assert asyncio.get_running_loop().time() < deadline, "the link was never planted"
            await asyncio.sleep(0.05)
        with contextlib.suppress(OSError, TimeoutError):
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port_of(scene.a.url)), 3
            )
            writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
            await asyncio.wait_for(reader.read(), 3)
            writer.close()
        listed = {h.id: h.token for h in await scene.provider.list()}
        assert listed[scene.a.id] != scene.marker
    finally:
        await planted
        server.close()
        await server.wait_closed()
        await asyncio.to_thread(shutil.rmtree, trap_dir, True)
    assert await scene.provider.health(scene.a), "the agent's desktop did not come back"
    assert trap_hits == []


async def test_the_socket_dir_cannot_be_changed_from_inside(scene: Scene) -> None:
    if scene.provider.type == "container":
        return await planted_run_dir_does_not_break_the_reset(scene)
    if scene.provider.type != "local":
        pytest.skip(f"{scene.provider.type}: no host directory is shared with a VM")
    # Inside, /run is the sandbox's own tmpfs: the agent may create /run/cua there,
    # but the launcher's socket directory is in no mount the sandbox has.
    rc, out = await scene.run(escape_attacks.plant())
    assert attack_scripts.report(out, "plant"), out
    sock_dir = local_socket_dir(scene.a)
    entries = await asyncio.to_thread(lambda: sorted(p.name for p in sock_dir.iterdir()))
    assert entries == ["cdp.sock", "guest.sock"], entries
    st = await asyncio.to_thread(sock_dir.stat)
    assert (st.st_uid, st.st_mode & 0o777) == (0, 0o755)
    # The planted directory (issue 29's reproduction) does not break the reset.
    handle = await scene.provider.reset(scene.a)
    assert await scene.provider.health(handle)
    scene.a, scene.agent = handle, scene.provider.client(handle)


async def test_the_container_channel_cannot_be_taken_over(scene: Scene) -> None:
    """Issue 29 (4): the agent renames guest.sock, plants files, a directory and a
    link beside it and binds its own listener there; all of it fails (the run dir is
    root's, the socket the root init's), the host still talks to the real guest,
    only the guest holds the listening socket, and the agent killing its guest only
    kills its desktop, which the reset brings back."""
    if scene.provider.type != "container":
        pytest.skip(
            f"{scene.provider.type}: test_the_socket_dir_cannot_be_changed_from_inside"
            if scene.provider.type == "local"
            else "qemu: no directory is shared"
        )
    rc, out = await scene.run(escape_attacks.takeover())
    found = attack_scripts.report(out, "takeover")
    assert found.get("done") == "1" and found["made"] == "", out
    run_dir = Path(scene.a.info["run_dir"])
    entries = await asyncio.to_thread(lambda: sorted(p.name for p in run_dir.iterdir()))
    # the guest's socket and Chromium's DevTools' (issue 50), both the root init's
    assert entries == ["cdp.sock", "guest.sock", "token"], entries
    marker = secrets.token_hex(8)
    await scene.agent.upload_file("/tmp/real-guest", marker.encode())
    assert await scene.agent.get_file("/tmp/real-guest") == marker.encode()
    holders = await listeners(scene.a)
    assert len(holders) == 1 and "cua_guest --listen-fd 3" in holders[0], holders
    # Killing the guest gives the agent nothing: the path stays root's, the desktop dies.
    await scene.run(
        '(sleep 0.3; g=cua_; g="${g}guest --listen-fd"; for p in /proc/[0-9]*; '
        "do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in *\"-m $g\"*) "
        "kill -9 ${p#/proc/};; esac; done) >/dev/null 2>&1 &"
    )
    deadline = asyncio.get_running_loop().time() + 30
    while await scene.provider.health(scene.a):
        assert asyncio.get_running_loop().time() < deadline, "the guest was not killed"
        await asyncio.sleep(0.2)
    handle = await scene.provider.reset(scene.a)
    assert await scene.provider.health(handle)
    scene.a, scene.agent = handle, scene.provider.client(handle)
    assert await scene.agent.get_file("/tmp/real-guest") is None


async def test_a_log_flood_stays_inside_the_desktop(scene: Scene) -> None:
    if scene.provider.type == "qemu":
        pytest.skip("qemu: its output goes to the VM's console, not to a host file")
    if scene.provider.type == "container":  # the engine's json-file log, rotated at 1 MiB
        log = await engine_log(scene.a)
        await scene.agent.act(escape_attacks.act_log_flood(mib=20), timeout=30)
        rc, out = await scene.run(escape_attacks.log_flood(mib=20))
        assert int(attack_scripts.report(out, "log_flood").get("targets", 0)) >= 1, out
        size = (await asyncio.to_thread(log.stat)).st_size
        assert size <= (1 << 20) + 65536, f"engine log is {size} bytes"
        assert await scene.provider.health(scene.a)
        return
    log = Path(scene.a.info["log"])
    before = (await asyncio.to_thread(log.stat)).st_size
    # pidfd_getfd is denied by the seccomp filter; with it allowed (a desktop without
    # the filter) the flood reaches the launcher's pipe and the cap holds it.
    await scene.agent.act(escape_attacks.act_log_flood(mib=20), timeout=30)
    rc, out = await scene.run(escape_attacks.log_flood(mib=20))
    assert attack_scripts.report(out, "log_flood"), out
    grown = (await asyncio.to_thread(log.stat)).st_size - before
    assert grown <= DESKTOP_OUTPUT_CAP + 4096, f"session log grew {grown} bytes"
    assert await scene.provider.health(scene.a)


async def test_hostile_programs_hit_the_desktops_limits_not_the_hosts(scene: Scene) -> None:
    if scene.provider.type == "qemu":
        pytest.skip(
            "qemu: bounded by construction (the VM's -m, -smp and disk size; "
            "docs/sandbox.md, Limits)"
        )
    limits = scene.a.info["limits"]
    assert limits, scene.a.info
    if scene.provider.type == "local":
        assert limits["cgroup"] in ("v1", "v2"), scene.a.info
    else:  # the engine's limits, and nothing writable but its tmpfs mounts
        assert limits["root"] == "read-only" and limits["run_dir"].startswith("tmpfs"), limits
    neighbour = scene.provider.client(scene.b)
    baseline = await screenshot_p99(neighbour)
    _, ns = await scene.run("readlink /proc/self/ns/pid")
    ns = ns.strip()
    assert ns.startswith("pid:["), ns
    pids_before = await asyncio.to_thread(processes_in_pid_namespace, ns)
    # the state dir's file system, and the engine's (its overlay and logs)
    disks = [scene.state_dir, Path("/var/lib/docker")]
    disk_before = disk_used(disks)
    mem_before = psutil.virtual_memory().available
    peak = {"pids": 0, "mem_drop": 0}

    async def watch() -> None:
        while True:
            in_ns = await asyncio.to_thread(processes_in_pid_namespace, ns)
            peak["pids"] = max(peak["pids"], in_ns - pids_before)
            peak["mem_drop"] = max(peak["mem_drop"], mem_before - psutil.virtual_memory().available)
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    try:
        rc, out = await scene.run(
            attack_scripts.fork_loop(max_procs=limits["pids"] + 500, seconds=8)
        )
        started = int(attack_scripts.report(out, "fork_loop")["started"])
        during = await screenshot_p99(neighbour, 10)
        rc, out = await scene.run(
            attack_scripts.disk_fill("/home/user/fill", limits["home_mb"] + 256)
            + attack_scripts.disk_fill("/tmp/fill", limits["tmp_mb"] + 256)
            + attack_scripts.disk_fill("/var/tmp/fill", 64)
            + attack_scripts.disk_fill("/fill", 64)
        )
        home_mib, tmp_mib, var_tmp_mib, root_mib = (
            int(attack_scripts.report(line, "disk_fill")["written_mib"])
            for line in out.splitlines()
            if line.startswith("HOSTILE")
        )
        disk_growth = disk_used(disks) - disk_before
        rc, out = await scene.run(attack_scripts.memory_hog(limits["memory_mb"] + 512, seconds=1))
        held = int(attack_scripts.report(out, "memory_hog")["held_mib"])
    finally:
        watcher.cancel()
    print(
        f"\nlimits {limits}: fork loop started {started}, "
        f"its PID namespace +{peak['pids']} on the host; "
        f"disk fill home {home_mib} MiB, /tmp {tmp_mib} MiB, / {root_mib} MiB, "
        f"host disk +{disk_growth >> 20} MiB; "
        f"memory hog held {held} MiB, host available -{peak['mem_drop'] >> 20} MiB; "
        f"neighbour screenshot max {baseline * 1000:.0f} ms -> {during * 1000:.0f} ms"
    )
    assert started < limits["pids"] and peak["pids"] <= limits["pids"], (started, peak)
    assert home_mib <= limits["home_mb"] and tmp_mib <= limits["tmp_mb"], out
    assert var_tmp_mib == 64 and root_mib == 0, out  # /var/tmp is a tmpfs; / is read-only
    assert disk_growth <= (limits["home_mb"] + limits["tmp_mb"]) << 20, disk_growth
    assert held < limits["memory_mb"], out  # OOM-killed inside the desktop
    # The desktop's own peak is exact; the host's available memory also moves with
    # whatever else runs on the machine (other test runs here), hence the margin.
    assert await desktop_memory_peak(scene.a) <= limits["memory_mb"] << 20
    assert peak["mem_drop"] <= (limits["memory_mb"] + HOST_NOISE_MB) << 20, peak
    assert during <= max(2 * baseline, 0.5), (baseline, during)
    assert await scene.provider.health(scene.a) and await scene.provider.health(scene.b)


async def test_seccomp_denies_what_desktop_apps_do_not_need(scene: Scene) -> None:
    """Local desktops' filter and container desktops' profile, made from one deny list
    (local/seccomp.py, container/seccomp.py): ptrace of a sibling process, io_uring
    setup, pidfd_getfd, bpf, keyctl, mount and process_vm_readv each get EPERM (the
    engine's default profile allowed the first two in containers)."""
    if scene.provider.type == "qemu":
        pytest.skip("qemu: the VM's own kernel (docs/sandbox.md)")
    rc, out = await scene.run(escape_attacks.denied_calls())
    errors = attack_scripts.report(out, "denied_calls")
    print(f"\n{scene.provider.type}: errno of each call {errors}")
    assert {"ptrace", "io_uring_setup"} <= errors.keys(), out
    assert errors and all(v == "1" for v in errors.values()), out  # EPERM each


async def test_no_nested_user_namespace(scene: Scene) -> None:
    if scene.provider.type == "qemu":
        pytest.skip("qemu: the VM's own kernel (the agent is not root in it)")
    rc, out = await scene.run(escape_attacks.nested_userns())
    assert attack_scripts.report(out, "nested_userns").get("rc") != "0", out


async def test_killing_everything_it_can_leaves_the_neighbour_alive(scene: Scene) -> None:
    # Last on purpose: the agent's own desktop does not survive this.
    try:
        await scene.agent.execute("kill -KILL -1", shell=True, timeout=10)
    except Exception:  # noqa: BLE001 - its guest dies with the rest, mid-answer
        pass
    assert await scene.provider.health(scene.b)
    assert scene.model_hits == []


async def test_a_group_starts_from_one_setup_forked(scene: Scene, tmp_path: Path) -> None:
    """`fleet.fork_groups` on the two VMs (after the kill above: every rollout starts
    from a reset or a restore): the click target's multi-step setup runs once, its
    fork point is restored for each of 4 rollouts (2 per VM), each first screen is the
    fresh setup's within a small tolerance, the no-op evaluation scores what a fresh
    setup scores, a click on a restored desktop is seen by the restored app, and the
    fork point is deleted once the group is done (docs/desktops.md, forks)."""
    from tests_support.fork_group import pixel_difference, run_fork_group

    if (reason := scene.provider.fork_support()) is not None:
        pytest.skip(f"{scene.provider.type}: {reason}")
    a, b = [await scene.provider.get(h.id) for h in (scene.a, scene.b)]
    run = await run_fork_group(scene.provider, [a, b], tmp_path)
    print(
        f"\nfresh setup {run.fresh_setup_s:.1f} s; group of 4 from one setup "
        f"{run.group_s:.1f} s; {run.counts}"
    )
    assert run.counts["fork_saved"] == 1 and run.counts["fork_restored"] == 4, run.counts
    for slot, shot in run.shots.items():
        mean, changed = pixel_difference(run.fresh_shot, shot)
        assert mean < 1.0 and changed < 0.01, (slot, mean, changed)
    assert run.fresh_score == 0.0
    assert run.scores == {0: 0.0, 1: 0.0, 2: 0.0, 3: 1.0}, run.scores
    assert run.forks_left == []
    for handle in (scene.a, scene.b):
        assert await scene.provider.health(await scene.provider.get(handle.id))


async def test_the_provider_passes_check_provider(scene: Scene) -> None:
    """Last: `check_provider` on the scene's provider, its first desktop the agent's
    (reset first, whatever the escapes left; a boot saved on qemu) and its second
    started by an owner process the check kills with SIGKILL (docs/providers.md)."""
    from cua_rl.desktop import check_provider
    from cua_rl.desktop.conformance import CHECKS

    async def booted(handle: DesktopHandle) -> None:
        async with handle.guest_client() as client:
            assert (await client.screenshot())[:8] == b"\x89PNG\r\n\x1a\n"
            who = await client.execute(["id", "-un"])
            assert who.ok and who.output.strip() == "user", who
            if scene.provider.type == "qemu":  # the minimal qcow2 at its own size
                assert await client.screen_size() == (1920, 1080)
                assert handle.info["snapshot"], "the booted desktop was not snapshotted"

    first = await scene.provider.get(scene.a.id)
    report = await check_provider(
        scene.provider, first=first, timeout_s=900, cleanup_deadline_s=60, on_started=booted
    )
    print(f"\ncheck_provider({scene.provider.type}): {report.seconds}")
    report.raise_if_failed()
    assert report.passed == [CHECKS[0], "started", *CHECKS[1:]]
