"""The per-server state every route reaches through `request.app[GUEST]`."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from cua_guest.accessibility import AtspiRunner
from cua_guest.act_worker import ActWorker
from cua_guest.capture import ScreenCapturer
from cua_guest.limits import GuestLimits
from cua_guest.procs import LaunchedApps
from cua_guest.recording import Recorder
from cua_guest.x11 import X11


@dataclass
class GuestState:
    """Long-lived helpers owned by one server instance."""

    worker: ActWorker
    limits: GuestLimits = field(default_factory=GuestLimits)
    capturer: ScreenCapturer = field(default_factory=ScreenCapturer)
    x11: X11 = field(default_factory=X11)
    launched: LaunchedApps = field(default_factory=LaunchedApps)
    atspi: AtspiRunner = field(default_factory=AtspiRunner)
    recorder: Recorder | None = None

    def __post_init__(self) -> None:
        if self.recorder is None:
            self.recorder = Recorder(self.limits.record_max_s, self.limits.record_fps)


GUEST: web.AppKey[GuestState] = web.AppKey("guest", GuestState)
