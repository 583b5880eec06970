"""The agent of a fleet host (`image_kind: fleet-host`): runs ON the EC2 instance.

Standard library only: the aws provider embeds this file's text in the instance's
user data (aws/fleet.py) and the host runs it with the system `python3`, so it
works before (and without) any cua-rl install on the host.

It does two things, nothing else:
- per desktop slot `i`, a TLS listener on `0.0.0.0:<guest_port + i>` with that
  slot's own certificate, piping bytes to the slot container's guest socket
  (`<state>/slot-<i>/run/guest.sock`). The container has `--network none`, so
  this is the only way in; its key stays on the host, out of the desktop's reach;
- a control endpoint on `<control_port>` (its own certificate, pinned by the
  provider; bearer token checked in constant time) with three operations, no
  body, no query:
  - `POST /slots/<i>/reset`: replaces slot i's container with a new one from the
    image (`cua-fleet-desktop <i>`); 200 when the engine started it, 500 with the
    command's output tail otherwise;
  - `POST /claim/<desktop id>`: leases a free slot to that desktop. The agent is
    the one place every process of a run (on any machine) asks, and it decides
    one request at a time, so two claimers never get the same slot. 200
    `{"slot": i}` (the slot that desktop already holds, if any: a retried claim
    whose answer was lost gets the same slot), 409 when every slot is leased
    or the host is closed;
  - `POST /slots/<i>/release/<desktop id>`: a new container in the slot, then the
    lease is freed; 409 when another desktop holds it (never frees another's); a
    slot whose new container fails to start is retired (`-`), never leased again.
    When no slot is leased any more the host closes (claims get 409) and the
    answer says `"closed": true`: the releasing process terminates the host.
  Leases are kept in `<state>/leases.json` (written atomically on each change),
  so an agent restarted by systemd keeps them; slot 0 starts leased to the
  desktop the host was launched for (`leases` in the config).

Run: `python3 fleet_agent.py CONFIG.json` where the file holds `slots`,
`guest_port`, `control_port`, `state_dir`, `tls_dir`, `desktop_command`, `bind`
and `leases` (slot -> desktop id at launch).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import re
import socket
import ssl
import stat
import sys
from pathlib import Path
from typing import Any

RESET = re.compile(r"^POST /slots/(\d{1,3})/reset HTTP/1\.[01]$")
HOLDER = r"([A-Za-z0-9][A-Za-z0-9_.-]{0,63})"
"""A desktop id, as the provider checks it (`check_desktop_id`)."""
CLAIM = re.compile(rf"^POST /claim/{HOLDER} HTTP/1\.[01]$")
RELEASE = re.compile(rf"^POST /slots/(\d{{1,3}})/release/{HOLDER} HTTP/1\.[01]$")
RETIRED = "-"
MAX_HEAD = 8192
COMMAND_TIMEOUT_S = 120.0


def tls_context(directory: Path, name: str) -> ssl.SSLContext:
    """A server context with `<name>.crt`/`<name>.key` from `directory` (TLS 1.2+)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(directory / f"{name}.crt", directory / f"{name}.key")
    return context


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


def connect_no_follow(socket_path: Path) -> socket.socket:
    """A connected Unix socket to `socket_path` itself, never through a link.

    The slot's run dir is bind-mounted into the desktop. It is root's (the image's
    root init binds the socket there, then drops to `user`), so nothing the agent
    runs can plant anything in it; the agent, root itself, still never trusts it: a
    `guest.sock` swapped for a symlink to the engine's socket would be followed. So
    the path is opened O_PATH|O_NOFOLLOW, checked to be a socket, and that inode is
    connected through /proc/self/fd (the same check as cua_rl.desktop.unix_forward,
    repeated here because this file runs alone)."""
    fd = os.open(socket_path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise OSError(f"{socket_path} is not a socket (a symlink is never followed)")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(5.0)
            sock.connect(f"/proc/self/fd/{fd}")
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        os.close(fd)


def forwarder(socket_path: Path) -> Any:
    """A connection handler piping a TLS client to the slot's guest socket."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sock = await asyncio.wait_for(asyncio.to_thread(connect_no_follow, socket_path), 6.0)
            up_reader, up_writer = await asyncio.open_unix_connection(sock=sock)
        except (OSError, TimeoutError):
            writer.close()  # the container is (re)starting: the client retries
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


def _answer(writer: asyncio.StreamWriter, status: str, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    writer.write(
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )


class Leases:
    """slot -> desktop id (or RETIRED) of this host, persisted on every change.
    Only the event loop touches it, and no method awaits between reading and
    writing, so each claim or release is atomic. Once a release leaves no slot
    leased, the host is closed: it leases nothing more (the releasing process
    terminates it), so a claim can never land on a host about to end."""

    def __init__(self, path: Path, slots: int, initial: dict[str, str]) -> None:
        self.path, self.slots = path, slots
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            saved = {"held": initial, "closed": False}
        self.held = {
            int(slot): str(holder)
            for slot, holder in saved["held"].items()
            if str(slot).isdigit() and int(slot) < slots
        }
        self.closed = bool(saved.get("closed"))
        self._save()

    def claim(self, holder: str) -> int | None:
        """The slot leased to `holder` (its old one, else the lowest free), or None."""
        for slot, current in self.held.items():
            if current == holder:
                return slot
        free = [slot for slot in range(self.slots) if slot not in self.held]
        if not free or self.closed:
            return None
        self.held[free[0]] = holder
        self._save()
        return free[0]

    def holder(self, slot: int) -> str | None:
        return self.held.get(slot)

    def end(self, slot: int, retire: bool) -> None:
        """Free the slot, or retire it for good; close the host when none is leased."""
        if retire:
            self.held[slot] = RETIRED
        else:
            self.held.pop(slot, None)
        self.closed = all(holder == RETIRED for holder in self.held.values())
        self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps(
                {"held": {str(k): v for k, v in sorted(self.held.items())}, "closed": self.closed}
            )
        )
        tmp.replace(self.path)


def controller(
    config: dict[str, Any], token: str, locks: dict[int, asyncio.Lock], leases: Leases
) -> Any:
    """The control endpoint's handler: authenticated reset, claim and release only."""

    async def route(line: str) -> tuple[str, dict[str, Any]]:
        if match := CLAIM.match(line):
            slot = leases.claim(match.group(1))
            if slot is None:
                return "409 Conflict", {
                    "error": "closed" if leases.closed else "every slot is leased"
                }
            return "200 OK", {"slot": slot, "holder": match.group(1)}
        match = RESET.match(line) or RELEASE.match(line)
        slot = int(match.group(1)) if match else -1
        if slot not in locks:
            return "404 Not Found", {
                "error": "only POST /slots/<0.."
                f"{len(locks) - 1}>/reset, /slots/<i>/release/<id> "
                "and /claim/<id> exist"
            }
        holder = match.group(2) if match and match.re is RELEASE else None
        async with locks[slot]:  # two changes of one slot never interleave
            if holder is not None and leases.holder(slot) not in (holder, None):
                return "409 Conflict", {"slot": slot, "error": "leased to another desktop"}
            code, output = await run_desktop(config["desktop_command"], slot)
            if holder is not None and leases.holder(slot) == holder:
                leases.end(slot, retire=code != 0)
        if code == 0:
            return "200 OK", {"slot": slot, "reset": True, "closed": leases.closed}
        return "500 Internal Server Error", {
            "slot": slot,
            "error": f"exit {code}",
            "output": output,
            "closed": leases.closed,
        }

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
            ConnectionError,
            OSError,
        ):
            writer.close()
            return
        try:
            lines = head[:MAX_HEAD].decode("latin-1").split("\r\n")
            auth = next(
                (
                    line.split(":", 1)[1].strip()
                    for line in lines[1:]
                    if line.lower().startswith("authorization:")
                ),
                "",
            )
            if not hmac.compare_digest(auth.encode(), f"Bearer {token}".encode()):
                _answer(writer, "401 Unauthorized", {"error": "bad or missing token"})
                return
            _answer(writer, *await route(lines[0]))
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    return handle


async def run_desktop(command: list[str], slot: int) -> tuple[int, str]:
    """Run `command + [slot]` (a new container for the slot); its exit code and the
    tail of its output; killed after COMMAND_TIMEOUT_S."""
    process = await asyncio.create_subprocess_exec(
        *command, str(slot), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), COMMAND_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        return -1, f"timed out after {COMMAND_TIMEOUT_S:.0f} s"
    return process.returncode or 0, output.decode(errors="replace")[-2000:]


async def serve(config: dict[str, Any]) -> None:
    """Listen on every slot's port and the control port until cancelled."""
    tls_dir, state_dir = Path(config["tls_dir"]), Path(config["state_dir"])
    token = (tls_dir / "control.token").read_text().strip()
    bind = config.get("bind", "0.0.0.0")
    slots = range(int(config["slots"]))
    servers = [
        await asyncio.start_server(
            forwarder(state_dir / f"slot-{i}" / "run" / "guest.sock"),
            bind,
            int(config["guest_port"]) + i,
            ssl=tls_context(tls_dir, f"slot-{i}"),
        )
        for i in slots
    ]
    locks = {i: asyncio.Lock() for i in slots}
    leases = Leases(state_dir / "leases.json", len(slots), dict(config.get("leases", {})))
    servers.append(
        await asyncio.start_server(
            controller(config, token, locks, leases),
            bind,
            int(config["control_port"]),
            ssl=tls_context(tls_dir, "control"),
        )
    )
    print(
        f"cua-fleet-agent: {len(slots)} desktops from port {config['guest_port']}, "
        f"control on {config['control_port']}",
        flush=True,
    )
    try:
        await asyncio.Event().wait()
    finally:
        for server in servers:
            server.close()


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: fleet_agent.py CONFIG.json")
    try:
        config = json.loads(Path(argv[1]).read_text())
    except (OSError, ValueError) as exc:
        sys.exit(f"cua-fleet-agent: cannot read {argv[1]}: {exc}")
    asyncio.run(serve(config))


if __name__ == "__main__":
    main(sys.argv)
