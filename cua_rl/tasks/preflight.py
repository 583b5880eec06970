"""Preflight: what each task needs (assets, apps, credentials, root, the
internet) and whether it can run on a given provider with a given asset cache.

A task that cannot run is listed under exactly one reason, its first blocker in
`REASON_ORDER`, so the counts add up to the task total. The checks read only
the task JSON, the host's PATH and the cache: nothing starts, nothing downloads.

What counts as what (docs/osworld-local.md explains the local provider's side):
- an *asset* is a file URL the setup or the evaluator fetches through the
  FileCache (`download` files, `cloud_file` paths, the empty History database
  of `update_browse_history`, and any hub `/resolve/` link); it blocks the task
  until the cache holds it;
- any other http(s) URL in the setup or the evaluator means the task needs the
  internet (pages to open, URLs the agent must reach), and so does any URL in the
  instruction, a hub link included: the agent itself has to fetch it from inside
  the desktop ("clone the repo https://...", "download the image from ..."), where
  the cache cannot help; it blocks the task only where the provider's desktops
  have no network (`has_network` of its config: docker on its default network and
  aws have one, local has one only with `network: true`);
- `googledrive`/`login` steps and the `googledrive_file` getter need credentials;
- `sudo` in a command needs root, which local desktops never grant: their `sudo`
  only runs commands as the user and answers `apt install` from the host's
  packages (`rootless_sudo`), so only a task that needs more is `needs_root`;
- `local_gap`: tasks whose need shows only in what they ask (install a package
  from the internet, a system service, sound hardware), found when their golden
  solutions were written, are listed with the reason in `local_gaps.json` beside
  this module and are not runnable on local desktops.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cua_rl.desktop.file_cache import FileCache, local_path
from cua_rl.desktop.setup_steps.chrome import EMPTY_HISTORY_URL
from cua_rl.tasks.capabilities import (
    HostCapabilities,
    capabilities_for,
    image_capabilities,
    local_capabilities,
    local_gaps,
)
from cua_rl.types import TaskVariant

__all__ = [
    "HostCapabilities",
    "Preflight",
    "TaskNeeds",
    "capabilities_for",
    "describe",
    "first_blocker",
    "image_capabilities",
    "local_capabilities",
    "local_gaps",
    "preflight",
    "task_needs",
]

REASON_ORDER = (
    "unimplemented",
    "unsupported_app",
    "local_gap",
    "credentials",
    "needs_root",
    "network",
    "assets_uncached",
)
"""Blockers in the order they are checked; a task is filed under its first."""

APP_EXECUTABLES = (
    "google-chrome",
    "socat",
    "thunderbird",
    "gimp",
    "vlc",
    "libreoffice",
    "soffice",
    "code",
    "nautilus",
    "gnome-terminal",
    "gedit",
)
"""Executables a task's commands start that decide whether it can run."""

DOMAIN_APPS: dict[str, str] = {
    "chrome": "google-chrome",
    "gimp": "gimp",
    "vlc": "vlc",
    "thunderbird": "thunderbird",
    "vs_code": "code",
    "libreoffice_calc": "libreoffice",
    "libreoffice_impress": "libreoffice",
    "libreoffice_writer": "libreoffice",
}
"""The app a domain's tasks drive, whether or not the setup starts it."""

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
"""Hosts inside the desktop (a task's own servers, Chrome's DevTools): no internet."""
TERMINAL_HOTKEY = re.compile(r"hotkey\(\s*['\"]ctrl['\"],\s*['\"]alt['\"],\s*['\"]t['\"]")
"""GNOME's shortcut for a terminal: tasks that press it need gnome-terminal."""
WINDOW_APPS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Terminal$"), "gnome-terminal"),
    (re.compile(r" - gedit$"), "gedit"),
)
"""Window names that only one app gives (activate_window waits for them)."""
CREDENTIAL_STEPS = frozenset({"googledrive", "login"})
CREDENTIAL_GETTERS = frozenset({"googledrive_file"})
_URL = re.compile(r"https?://[^\s\"'<>\\]+")
_SUDO = re.compile(r"(^|[\s;&|(])sudo\s")
_ASSET_PATH = re.compile(r"/resolve/")


@dataclass(frozen=True, slots=True)
class TaskNeeds:
    """What one task needs from the machine it runs on."""

    assets: tuple[str, ...] = ()
    apps: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()
    root: tuple[str, ...] = ()
    """Commands that use sudo (whole: `rootless_sudo` reads them)."""
    network: tuple[str, ...] = ()
    """URLs that are not assets: pages the task opens or the agent must reach."""


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value] if value is not None else []


def _command_words(command: Any) -> list[str]:
    """The executable of a command (argv or shell string), env assignments skipped."""
    text = command if isinstance(command, str) else " ".join(map(str, _as_list(command)))
    words = []
    for part in re.split(r"[;&|\n]+", text):
        tokens = [t for t in part.split() if "=" not in t or t.startswith(("-", "/"))]
        if tokens:
            words.append(tokens[0].rsplit("/", 1)[-1])
    return words


def _getters(evaluator: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        g
        for key in ("result", "expected")
        for g in _as_list(evaluator.get(key))
        if isinstance(g, dict)
    ]


def task_needs(task: TaskVariant) -> TaskNeeds:
    """Read a task's needs from its setup steps and evaluator (see the module docstring)."""
    steps = [*task.config, *_as_list(task.evaluator.get("postconfig"))]
    assets: list[str] = []
    apps: list[str] = []
    creds: list[str] = []
    root: list[str] = []
    for step in steps:
        kind, params = step.get("type", ""), step.get("parameters") or {}
        if kind == "download":
            assets += [
                f.get("url", "") for f in _as_list(params.get("files")) if isinstance(f, dict)
            ]
        elif kind == "update_browse_history":
            assets.append(EMPTY_HISTORY_URL)
        elif kind in CREDENTIAL_STEPS:
            creds.append(f"setup step {kind!r}")
        if kind in ("launch", "execute", "command", "execute_with_verification"):
            command = params.get("command")
            apps += [w for w in _command_words(command) if w in APP_EXECUTABLES]
            if any(TERMINAL_HOTKEY.search(text) for text in _strings(command)):
                apps.append("gnome-terminal")
            if any(_SUDO.search(s) for s in _strings(command)):
                root.append(" ".join(map(str, _as_list(command))))
        if kind == "activate_window":
            name = str(params.get("window_name", ""))
            apps += [app for pattern, app in WINDOW_APPS if pattern.search(name)]
    for getter in _getters(task.evaluator):
        if getter.get("type") == "cloud_file":
            assets += [u for u in _as_list(getter.get("path")) if isinstance(u, str)]
        if getter.get("type") in CREDENTIAL_GETTERS:
            creds.append(f"getter {getter['type']!r}")
    if task.domain in DOMAIN_APPS:
        apps.append(DOMAIN_APPS[task.domain])
    # Every other URL: hub file links are assets too; the rest needs the internet.
    # update_browse_history only writes its URLs into a database: no traffic.
    scanned = [s for s in task.config if s.get("type") != "update_browse_history"]
    found = [
        u.rstrip(".,)") for text in _strings([scanned, task.evaluator]) for u in _URL.findall(text)
    ]
    network: list[str] = []
    for url in found:
        if url in assets or urlsplit(url).hostname in LOOPBACK:
            continue
        if _ASSET_PATH.search(urlsplit(url).path):
            assets.append(url)
        else:
            network.append(url)
    network += [
        u.rstrip(".,)")
        for u in _URL.findall(task.instruction)
        if urlsplit(u.rstrip(".,)")).hostname not in LOOPBACK
    ]
    return TaskNeeds(
        tuple(dict.fromkeys(a for a in assets if a)),
        tuple(dict.fromkeys(apps)),
        tuple(creds),
        tuple(root),
        tuple(dict.fromkeys(network)),
    )


def first_blocker(
    task: TaskVariant,
    needs: TaskNeeds,
    host: HostCapabilities,
    cache: FileCache,
    unimplemented: Iterable[str] = (),
) -> tuple[str, str] | None:
    """(reason, detail) of the first thing that stops `task` here, or None if it can run."""
    names = list(unimplemented)
    if names:
        return "unimplemented", ", ".join(names)
    missing = [a for a in needs.apps if not host.has_app(a)]
    if missing:
        app = missing[0]
        why = host.missing_why.get(app, f"`{app}` not found")
        return f"unsupported_app:{app}", why
    if task.task_id in host.gaps:
        return "local_gap", host.gaps[task.task_id]
    if needs.credentials:
        return "credentials", "; ".join(needs.credentials)
    if needs.root and not host.root:
        problems = [host.sudo_problem(c) if host.sudo_problem else c[:120] for c in needs.root]
        if any(problems):
            return "needs_root", next(p for p in problems if p)
    if needs.network and not host.network:
        return "network", needs.network[0]
    uncached = [u for u in needs.assets if not asset_ready(cache, u)]
    if uncached:
        return "assets_uncached", f"{len(uncached)} file(s), first {uncached[0]}"
    return None


def asset_ready(cache: FileCache, url: str) -> bool:
    """Cached (http/https), or an existing local file (file:// URLs and paths)."""
    if urlsplit(url).scheme.lower() in ("http", "https"):
        return cache.cached(url) is not None
    local = local_path(url)
    return local is not None and local.is_file()


@dataclass
class Preflight:
    """The verdict over a task set."""

    total: int = 0
    runnable: list[str] = field(default_factory=list)
    not_runnable: dict[str, list[str]] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    """Task id -> what blocks it (one line)."""
    needs: dict[str, TaskNeeds] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The `--json` shape: total, runnable count, not_runnable {reason: [ids]}."""
        return {
            "total": self.total,
            "runnable": len(self.runnable),
            "not_runnable": self.not_runnable,
        }


def preflight(
    tasks: Iterable[TaskVariant],
    host: HostCapabilities,
    cache: FileCache,
    unimplemented: dict[str, list[str]] | None = None,
) -> Preflight:
    """Check every task (see the module docstring); the lists keep the input order."""
    result = Preflight()
    for task in tasks:
        result.total += 1
        needs = task_needs(task)
        result.needs[task.task_id] = needs
        blocker = first_blocker(
            task, needs, host, cache, (unimplemented or {}).get(task.task_id, ())
        )
        if blocker is None:
            result.runnable.append(task.task_id)
            continue
        reason, detail = blocker
        result.not_runnable.setdefault(reason, []).append(task.task_id)
        result.details[task.task_id] = f"{reason}: {detail}"
    order = {r: i for i, r in enumerate(REASON_ORDER)}
    result.not_runnable = dict(
        sorted(
            result.not_runnable.items(), key=lambda kv: (order.get(kv[0].split(":")[0], 99), kv[0])
        )
    )
    return result


def describe(needs: TaskNeeds) -> str:
    """One line of what a task needs (for the per-task listing)."""
    return json.dumps(
        {
            k: len(v) if k == "assets" else list(v)
            for k, v in (
                ("assets", needs.assets),
                ("apps", needs.apps),
                ("credentials", needs.credentials),
                ("root", needs.root),
                ("network", needs.network[:3]),
            )
            if v
        }
    )
