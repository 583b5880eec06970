"""The agent of a fleet host (`image_kind: fleet-host`): runs ON the EC2 instance.

Standard library only: the aws provider embeds this file's text in the instance's
user data (aws_fleet.py) and the host runs it with the system `python3`, so it
works before (and without) any cua-rl install on the host.

It does two things, nothing else:
- per desktop slot `i`, a TLS listener on `0.0.0.0:<guest_port + i>` with that
  slot's own certificate, piping bytes to the slot container's guest socket
  (`<state>/slot-<i>/run/guest.sock`). The container has `--network none`, so
  this is the only way in; its key stays on the host, out of the desktop's reach;
- a control endpoint on `<control_port>` (its own certificate, pinned by the
  provider; bearer token checked in constant time) with exactly one operation:
  `POST /slots/<i>/reset`, which replaces slot i's container with a new one from
  the image (`cua-fleet-desktop <i>`) and answers 200 when the engine started it,
  500 with the command's output tail otherwise. No other path, no body, no query.

Run: `python3 aws_fleet_agent.py CONFIG.json` where the file holds `slots`,
`guest_port`, `control_port`, `state_dir`, `tls_dir`, `desktop_command`, `bind`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import ssl
import sys
from pathlib import Path
from typing import Any

RESET = re.compile(r"^POST /slots/(\d{1,3})/reset HTTP/1\.[01]$")
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


def forwarder(socket_path: Path) -> Any:
    """A connection handler piping a TLS client to the slot's guest socket."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(socket_path)), 5.0)
        except (OSError, TimeoutError):
            writer.close()  # the container is (re)starting: the client retries
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    return handle


def _answer(writer: asyncio.StreamWriter, status: str, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)


def controller(config: dict[str, Any], token: str, locks: dict[int, asyncio.Lock]) -> Any:
    """The control endpoint's handler: authenticated `POST /slots/<i>/reset` only."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError, OSError):
            writer.close()
            return
        try:
            lines = head[:MAX_HEAD].decode("latin-1").split("\r\n")
            auth = next((line.split(":", 1)[1].strip() for line in lines[1:]
                         if line.lower().startswith("authorization:")), "")
            if not hmac.compare_digest(auth.encode(), f"Bearer {token}".encode()):
                _answer(writer, "401 Unauthorized", {"error": "bad or missing token"})
                return
            match = RESET.match(lines[0])
            slot = int(match.group(1)) if match else -1
            if slot not in locks:
                _answer(writer, "404 Not Found",
                        {"error": f"only POST /slots/<0..{len(locks) - 1}>/reset exists"})
                return
            async with locks[slot]:  # two resets of one slot never interleave
                code, output = await run_desktop(config["desktop_command"], slot)
            if code == 0:
                _answer(writer, "200 OK", {"slot": slot, "reset": True})
            else:
                _answer(writer, "500 Internal Server Error",
                        {"slot": slot, "error": f"exit {code}", "output": output})
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
        *command, str(slot), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
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
    servers = [await asyncio.start_server(
        forwarder(state_dir / f"slot-{i}" / "run" / "guest.sock"), bind,
        int(config["guest_port"]) + i, ssl=tls_context(tls_dir, f"slot-{i}")) for i in slots]
    locks = {i: asyncio.Lock() for i in slots}
    servers.append(await asyncio.start_server(
        controller(config, token, locks), bind, int(config["control_port"]),
        ssl=tls_context(tls_dir, "control")))
    print(f"cua-fleet-agent: {len(slots)} desktops from port {config['guest_port']}, "
          f"control on {config['control_port']}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        for server in servers:
            server.close()


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: aws_fleet_agent.py CONFIG.json")
    try:
        config = json.loads(Path(argv[1]).read_text())
    except (OSError, ValueError) as exc:
        sys.exit(f"cua-fleet-agent: cannot read {argv[1]}: {exc}")
    asyncio.run(serve(config))


if __name__ == "__main__":
    main(sys.argv)
