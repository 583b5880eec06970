"""`check_provider`: one conformance check that every desktop provider passes, ours
or a user's, in the spirit of Gymnasium's `env_checker`.

It drives the provider only through its contract (`DesktopProvider`) and the guest
protocol: two desktops, one started here and one by an owner process it then kills
with SIGKILL, and reports one line per failed check (`ProviderReport`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import IO, Any

from cua_rl.desktop.client import GuestClient
from cua_rl.desktop.conformance import leftovers
from cua_rl.desktop.conformance.owner import HANDLE_PREFIX, MARK_ENV
from cua_rl.desktop.conformance.report import CHECKS, ProviderReport
from cua_rl.desktop.providers.base import DesktopHandle, DesktopProvider
from cua_rl.errors import GuestError

PROTECTED: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("GET", "/platform", {}),
    ("GET", "/screenshot", {}),
    ("POST", "/execute", {"json": {"command": ["true"], "shell": False}}),
)
"""Guest routes that must refuse a request without the desktop's token."""
LIMIT_KEYS = ("memory_mb", "cpus", "pids", "ttl_s")


class _Fail(Exception):
    """One check's failure, with why (internal)."""


def _expect(condition: object, why: str) -> None:
    if not condition:
        raise _Fail(why)


async def _run(
    report: ProviderReport, name: str, wanted: set[str], body: Callable[[], Awaitable[Any]]
) -> Any:
    """Run one check: its failure (or error) becomes a line of the report."""
    if name not in wanted:
        return None
    began = time.monotonic()
    try:
        result = await body()
    except _Fail as exc:
        report.fail(name, str(exc))
        return None
    except Exception as exc:  # a provider's error is a finding, not the check's crash
        report.fail(name, f"{type(exc).__name__}: {exc}")
        return None
    finally:
        report.seconds[name] = round(time.monotonic() - began, 2)
    report.passed.append(name)
    return result if result is not None else True


async def check_provider(
    provider: DesktopProvider,
    *,
    prefix: str = "check",
    checks: Iterable[str] = CHECKS,
    timeout_s: float = 600.0,
    cleanup_deadline_s: float = 60.0,
    on_started: Callable[[DesktopHandle], Awaitable[None]] | None = None,
    first: DesktopHandle | None = None,
) -> ProviderReport:
    """Check that `provider` keeps the desktop provider contract; a `ProviderReport`
    with one line per failed check (`report.raise_if_failed()` turns it into an error).

    Checks (`checks` picks some): `start` (a desktop starts, is healthy and listed),
    `auth` (the guest's routes answer with the handle's token and refuse, 401 or 403,
    a request without it or with a wrong one), `isolation` (a file written on one
    desktop is not seen on the other), `limits` (the handle reports what a desktop may
    use: `info["limits"]`, positive numbers), `reset` (the written file is gone and
    the desktop healthy), `cleanup` (after the owner process that started a desktop
    is killed by SIGKILL, nothing of that desktop remains within
    `cleanup_deadline_s`: neither what `provider.remains` reports nor any process
    the owner started) and `stop` (the desktop stops, nothing remains, stop again is
    a no-op).

    The cleanup check rebuilds the provider in a subprocess from its class and its
    `config` (a pydantic model): a user's provider needs both. A provider whose
    desktops do not die with their owner says how they go instead (`orphans`); the
    check then starts the second desktop here and notes that. Desktop ids are
    `{prefix}-a` and `{prefix}-b`; whatever the check started is stopped at the end.
    `on_started(handle)`, when given, runs on the first desktop after the start check
    (a caller's own assertions share that boot; its failure is the `started` line).
    `first`, a desktop of this provider the caller already runs, is reset and used as
    the first desktop instead of starting one (a boot saved on slow providers); the
    check stops it like the rest.
    """
    wanted = set(checks)
    report = ProviderReport(provider.type)
    ids = (f"{prefix}-a", f"{prefix}-b")
    owner = _Owner(provider, ids[1]) if ("cleanup" in wanted and provider.orphans is None) else None
    if provider.orphans is not None and "cleanup" in wanted:
        report.notes.append(f"cleanup: not bound to an owner: {provider.orphans}")
    started: list[DesktopHandle | BaseException] = []
    try:
        if owner is not None and (why := owner.spawn()) is not None:
            report.fail("cleanup", why)
            owner = None
        started[:] = await asyncio.gather(
            _bounded(
                provider.start(ids[0]) if first is None else provider.reset(first),
                timeout_s,
                "start" if first is None else "reset of `first`",
            ),
            owner.handle(timeout_s)
            if owner is not None
            else _bounded(provider.start(ids[1]), timeout_s, "start"),
            return_exceptions=True,
        )
        a, b = started
        for handle in (a, b):
            if isinstance(handle, _Fail):
                report.fail("start", str(handle))
            elif isinstance(handle, BaseException):
                report.fail("start", f"{type(handle).__name__}: {handle}")
        if isinstance(a, DesktopHandle) and isinstance(b, DesktopHandle):
            await _on_two(
                provider, report, wanted, started, owner, cleanup_deadline_s, on_started, a, b
            )
        return report
    finally:
        await asyncio.shield(_tidy(provider, started, owner))


async def _on_two(
    provider: DesktopProvider,
    report: ProviderReport,
    wanted: set[str],
    started: list[DesktopHandle | BaseException],
    owner: _Owner | None,
    cleanup_deadline_s: float,
    on_started: Callable[[DesktopHandle], Awaitable[None]] | None,
    a: DesktopHandle,
    b: DesktopHandle,
) -> None:
    """The checks once both desktops run (`started[0]` follows `a` through its reset)."""
    await _run(report, "start", wanted, lambda: _started(provider, a, b))
    if on_started is not None:
        await _run(report, "started", {"started"}, lambda: on_started(a))
    await _run(report, "auth", wanted, lambda: _auth(provider, a))
    await _run(report, "isolation", wanted, lambda: _isolation(provider, a, b))
    await _run(report, "limits", wanted, lambda: _limits(a))
    reset = await _run(report, "reset", wanted, lambda: _reset(provider, a))
    fresh = reset if isinstance(reset, DesktopHandle) else a
    started[0] = fresh
    if owner is not None:
        await _run(report, "cleanup", wanted, lambda: owner.kill_and_wait(b, cleanup_deadline_s))
    await _run(report, "stop", wanted, lambda: _stop(provider, fresh))


async def _bounded(step: Awaitable[DesktopHandle], timeout_s: float, what: str) -> DesktopHandle:
    try:
        return await asyncio.wait_for(step, timeout_s)
    except TimeoutError:
        raise _Fail(f"{what} did not finish within {timeout_s:.0f} s") from None


async def _started(provider: DesktopProvider, *handles: DesktopHandle) -> None:
    listed = [h.id for h in await provider.list()]
    for handle in handles:
        _expect(
            handle.provider == provider.type,
            f"handle says provider {handle.provider!r}, expected {provider.type!r}",
        )
        _expect(handle.url, f"handle of {handle.id!r} has no guest url")
        _expect(await provider.health(handle), f"desktop {handle.id!r} is not healthy after start")
        _expect(handle.id in listed, f"desktop {handle.id!r} not in list() ({listed})")


async def _auth(provider: DesktopProvider, a: DesktopHandle) -> None:
    _expect(a.token, "the handle carries no token: its guest answers anyone")
    async with a.guest_client(timeout=30.0) as client:
        await client.platform()  # with the token: answers
    for label, token in (
        ("without a token", None),
        ("with a wrong token", secrets.token_urlsafe(24)),
    ):
        async with GuestClient(
            a.url, token, timeout=30.0, tls_fingerprint=a.tls_fingerprint, ca_file=a.tls_ca_file
        ) as bare:
            for method, route, extra in PROTECTED:
                try:  # the client's one request path (caps, TLS pin), 401/403 as success
                    await bare.status_of(method, route, ok_statuses=(401, 403), **extra)
                except GuestError as exc:
                    status = re.search(r"HTTP (\d{3})", str(exc))
                    raise _Fail(
                        f"{method} {route} {label} answered "
                        f"{status.group(1) if status else str(exc)[:120]} "
                        "(expected 401 or 403)"
                    ) from None


async def _isolation(provider: DesktopProvider, a: DesktopHandle, b: DesktopHandle) -> None:
    mark = secrets.token_hex(8).encode()
    async with a.guest_client() as ca, b.guest_client() as cb:
        home = (await ca.desktop_path()).rstrip("/")
        for path in (f"/tmp/cua-check-{mark.decode()}", f"{home}/cua-check-{mark.decode()}"):
            await ca.upload_file(path, mark)
            _expect(
                await ca.get_file(path) == mark,
                f"{path} written on {a.id!r} does not read back there",
            )
            _expect(
                await cb.get_file(path) is None, f"{path} written on {a.id!r} is seen on {b.id!r}"
            )


async def _limits(a: DesktopHandle) -> None:
    limits = a.info.get("limits")
    _expect(
        isinstance(limits, dict) and limits,
        "the handle reports no limits (info['limits'] should say what a desktop may use)",
    )
    assert isinstance(limits, dict)
    numbers = {k: limits[k] for k in LIMIT_KEYS if k in limits}
    _expect(numbers, f"info['limits'] has none of {', '.join(LIMIT_KEYS)}: {limits}")
    bad = {
        k: v
        for k, v in numbers.items()
        if not isinstance(v, int | float) or isinstance(v, bool) or v <= 0
    }
    _expect(not bad, f"info['limits'] has values that are not positive numbers: {bad}")


async def _reset(provider: DesktopProvider, a: DesktopHandle) -> DesktopHandle:
    async with a.guest_client() as client:
        path = f"{(await client.desktop_path()).rstrip('/')}/cua-check-reset"
        await client.upload_file(path, b"before reset")
    new = await provider.reset(a)
    _expect(new.id == a.id, f"reset returned desktop {new.id!r} for {a.id!r}")
    _expect(await provider.health(new), f"desktop {a.id!r} is not healthy after reset")
    async with new.guest_client() as client:
        _expect(await client.get_file(path) is None, f"{path} survived the reset")
    return new


async def _stop(provider: DesktopProvider, a: DesktopHandle) -> None:
    await provider.stop(a)
    _expect(not await provider.health(a), f"desktop {a.id!r} is healthy after stop")
    remains = await provider.remains(a)
    _expect(not remains, f"after stop, {', '.join(remains)} remain")
    _expect(
        a.id not in [h.id for h in await provider.list()],
        f"desktop {a.id!r} still listed after stop",
    )
    await provider.stop(a)  # idempotent: raises nothing


async def _tidy(
    provider: DesktopProvider, started: list[DesktopHandle | BaseException], owner: _Owner | None
) -> None:
    """Stop what the check started, whatever failed (errors here are not findings)."""
    if owner is not None:
        owner.kill()
    for handle in started:
        if isinstance(handle, DesktopHandle):
            try:
                await provider.stop(handle)
            except Exception:  # noqa: BLE001 - best effort after the report is made
                pass
    if owner is not None:
        leftovers.kill_all(leftovers.marked(MARK_ENV, owner.mark))
        owner.log.close()


class _Owner:
    """The owner process of the cleanup check (conformance/owner.py)."""

    def __init__(self, provider: DesktopProvider, desktop_id: str) -> None:
        self.provider = provider
        self.desktop_id = desktop_id
        self.mark = secrets.token_hex(8)
        self.proc: subprocess.Popen[str] | None = None
        self.log = tempfile.TemporaryFile("w+")

    def spawn(self) -> str | None:
        """Start the owner; why not, when the provider cannot be rebuilt in it."""
        cls = type(self.provider)
        config = getattr(self.provider, "config", None)
        if config is None or not hasattr(config, "model_dump_json"):
            return "the provider has no pydantic `config` to rebuild it in an owner process"
        env = {
            **os.environ,
            MARK_ENV: self.mark,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cua_rl.desktop.conformance.owner",
                f"{cls.__module__}:{cls.__qualname__}",
                config.model_dump_json(),
                self.desktop_id,
            ],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
        )
        return None

    async def handle(self, timeout_s: float) -> DesktopHandle:
        """The owner's desktop, from its `HANDLE_PREFIX` line (other output, a
        provider's own prints, is passed over)."""
        assert self.proc is not None and self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(
                asyncio.to_thread(_handle_line, self.proc.stdout), timeout_s
            )
        except TimeoutError:
            self.kill()
            raise _Fail(
                f"the owner process did not start {self.desktop_id!r} within "
                f"{timeout_s:.0f} s{self._tail()}"
            ) from None
        if line is None:
            self.proc.wait(10)
            raise _Fail(
                f"the owner process exited with {self.proc.returncode} before its "
                f"desktop started{self._tail()}"
            )
        try:
            return DesktopHandle(**json.loads(line))
        except (ValueError, TypeError) as exc:
            raise _Fail(f"the owner process printed no handle ({exc}): {line[:200]!r}") from None

    def _tail(self) -> str:
        self.log.seek(0)
        return f": {self.log.read()[-600:]}"

    async def kill_and_wait(self, b: DesktopHandle, deadline_s: float) -> None:
        before = leftovers.marked(MARK_ENV, self.mark)
        _expect(
            before or await self.provider.remains(b),
            "nothing of the owner's desktop "
            "was found before the kill (remains() is empty and no process is marked)",
        )
        self.kill()
        end = time.monotonic() + deadline_s
        while True:
            procs = leftovers.marked(MARK_ENV, self.mark)
            remains = await self.provider.remains(b)
            if not procs and not remains:
                return
            if time.monotonic() >= end:
                what = [*remains, *(f"process {leftovers.describe(p)}" for p in procs)]
                raise _Fail(
                    f"{deadline_s:.0f} s after the owner's SIGKILL, {', '.join(what)} remain"
                )
            await asyncio.sleep(0.2)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _handle_line(stdout: IO[str], max_lines: int = 10_000) -> str | None:
    """The JSON after `HANDLE_PREFIX` on the owner's stdout; None at its end."""
    for _ in range(max_lines):
        line = stdout.readline()
        if not line:
            return None
        if line.startswith(HANDLE_PREFIX):
            return line[len(HANDLE_PREFIX) :]
    return None
