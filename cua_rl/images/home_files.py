"""What a fresh home holds on every cua-rl desktop, as on OSWorld's Ubuntu image.

The image's home has things the apps would not make themselves: the XDG folders,
LibreOffice past its first-run dialogs, VS Code's user directory and PulseAudio's
starting volume. Local desktops copy a template built from these on every reset
(`local.home`); images build their user's home from them (`images.base_build`), so
both providers start a task from the same home. Stdlib only.
"""

from __future__ import annotations

from pathlib import Path

TEMPLATE_DIRS = (
    "Desktop",
    "Documents",
    "Downloads",
    "Music",
    "Pictures",
    "Public",
    "Templates",
    "Videos",
)
"""Home directories every desktop starts with (XDG names apps and OSWorld tasks use)."""
VSCODE_USER_DIR = ".config/Code/User"
"""VS Code's user directory, there on OSWorld's image before any task: a task's
setup writes settings.json into it before it starts `code`."""
LO_REGISTRY_FILE = Path(".config/libreoffice/4/user/registrymodifications.xcu")

# LibreOffice otherwise greets a fresh profile with a "Tip of the Day" dialog that
# covers the document; tasks and benchmarks expect the document itself.
_LO_SETTINGS = (
    ("/org.openoffice.Office.Common/Misc", "ShowTipOfTheDay", "false"),
    ("/org.openoffice.Office.Common/Misc", "FirstRun", "false"),
    ("/org.openoffice.Setup/Office", "ooSetupInstCompleted", "true"),
)
LO_REGISTRY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<oor:items xmlns:oor="http://openoffice.org/2001/registry" '
    'xmlns:xs="http://www.w3.org/2001/XMLSchema" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n'
    + "".join(
        f'<item oor:path="{path}"><prop oor:name="{name}" oor:op="fuse">'
        f"<value>{value}</value></prop></item>\n"
        for path, name, value in _LO_SETTINGS
    )
    + "</oor:items>\n"
)
"""LibreOffice's user registry with its first-run dialogs answered."""

PULSE_CONFIG = Path(".config/pulse/default.pa")
PULSE_DEFAULT_PA = (
    ".include /etc/pulse/default.pa\n"
    "# A desktop without sound hardware gets a null sink at 100 %; OSWorld's\n"
    "# image starts below full volume (a task asks to turn it up to the max),\n"
    "# so it starts at 40 % here:\n"
    "set-sink-volume auto_null 26214\n"
)
"""PulseAudio reads ~/.config/pulse/default.pa instead of the system's when it exists:
the system's, then the starting volume of `module-always-sink`'s null sink."""


def write_home_files(home: Path) -> list[Path]:
    """Create the folders and files above in `home` (an existing file is kept: a
    template's own choice stands); returns every path made, parents included, so
    a caller writing an image can give them to the image's user."""
    made: list[Path] = []

    def mkdir(path: Path) -> None:
        missing = [
            p
            for p in (path, *path.parents)
            if p.is_relative_to(home) and p != home and not p.exists()
        ]
        path.mkdir(parents=True, exist_ok=True)
        made.extend(reversed(missing))

    for name in (*TEMPLATE_DIRS, VSCODE_USER_DIR):
        mkdir(home / name)
    for rel, text in ((LO_REGISTRY_FILE, LO_REGISTRY), (PULSE_CONFIG, PULSE_DEFAULT_PA)):
        target = home / rel
        if not target.exists():
            mkdir(target.parent)
            target.write_text(text)
            made.append(target)
    return made
