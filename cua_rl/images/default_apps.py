"""The default apps of OSWorld's Ubuntu image, as a mimeapps.list.

Both a built image (`build`) and a local desktop's home template
(`desktop.providers.local.home`) get it, so it lives here, below desktop/
(docs/architecture.md, "Layers"): the image's contents are data the providers read.
"""

from __future__ import annotations

from pathlib import Path

APPLICATIONS = Path("/usr/share/applications")
DEFAULT_GROUP = "[Default Applications]"
DEFAULT_APPS = (
    ("org.gnome.Totem.desktop", "video/"),
    ("org.gnome.Evince.desktop", "application/pdf"),
    ("org.gnome.gedit.desktop", "text/plain"),
)
"""(desktop file, MIME type prefix) of the defaults on OSWorld's Ubuntu image: GNOME's
video player ("Videos") for every video type it handles, Evince for PDFs, gedit for
plain text (a task opens a .txt and waits for its "<file> (~/Desktop) - gedit" window)."""


def default_apps_list(applications: Path = APPLICATIONS) -> str | None:
    """A mimeapps.list making OSWorld's default apps the defaults here (`DEFAULT_APPS`).

    Without it, VLC was the only video player and so the default, and a task that
    asks the agent to make VLC the default passed untouched; PDFs opened in whatever
    claimed them first. An app that is not installed is left out (xdg-mime skips
    defaults whose desktop file does not exist); None when none is."""
    lines = []
    for desktop, prefix in DEFAULT_APPS:
        try:
            text = (applications / desktop).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        types = next(
            (line.partition("=")[2] for line in text.splitlines() if line.startswith("MimeType=")),
            "",
        )
        lines += [f"{t}={desktop}\n" for t in types.split(";") if t.startswith(prefix)]
    return f"{DEFAULT_GROUP}\n" + "".join(lines) if lines else None
