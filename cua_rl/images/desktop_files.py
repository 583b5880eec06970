"""What an image adds to Debian's packages so its desktops match local ones
(docs/osworld-local.md, "What matches OSWorld's image"): the files the local
provider builds per desktop, written into the image once instead.

- base layer (`patch_base`): openbox's system rc.xml with GNOME's keys
  (`images.openbox_keys`); Chromium's executable under the name `chrome` (a hard
  link beside it, `images.chrome_launcher`);
- top layer (`stage_bin`): `BIN_IN_IMAGE`, first on the session's PATH, with the
  rootless `sudo` (`images.sudo_script`), `python` (Debian's python3, which has the
  guest's packages on its path, as OSWorld's system Python has pyautogui), and in
  images with Chromium and code-server, `google-chrome` and `code`
  (`images.vscode_script`).

The top layer holds only new paths (`images.layers`), so these scripts change
without a base rebuild.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from cua_rl.images.chrome_launcher import IMAGE_CHROME_EXE, chrome_launcher
from cua_rl.images.openbox_keys import with_keys
from cua_rl.images.sudo_script import SUDO_SCRIPT
from cua_rl.images.vscode_script import CODE_SERVER_MOUNT, code_script

BIN_IN_IMAGE = "/usr/local/lib/cua-rl/bin"
"""The desktop's own commands, first on the session's PATH (top layer): the rootless
`sudo`, `python`, `google-chrome`, `code`."""
OPENBOX_RC = Path("etc/xdg/openbox/rc.xml")
CHROMIUM_EXE = "/usr/lib/chromium/chromium"


def patch_base(root: Path) -> list[str]:
    """Write the base layer's additions into the tree at `root`; returns what was done
    (for the build's log)."""
    done = []
    rc_xml = root / OPENBOX_RC
    if rc_xml.is_file():
        rc_xml.write_text(with_keys(rc_xml.read_text()))
        done.append("openbox: Ctrl+Alt+T")
    chromium = root / CHROMIUM_EXE.lstrip("/")
    chrome = root / IMAGE_CHROME_EXE.lstrip("/")
    if chromium.is_file() and not chrome.exists():
        os.link(chromium, chrome)
        done.append(f"{IMAGE_CHROME_EXE} (hard link)")
    return done


def bin_scripts(packages: Collection[str], code_server: bool) -> dict[str, str]:
    """{name: script} of `BIN_IN_IMAGE` for an image of these Debian `packages`, with
    code-server or not (`python` is a link, apart)."""
    scripts = {"sudo": SUDO_SCRIPT}
    if "chromium" in packages:
        scripts["google-chrome"] = chrome_launcher(
            IMAGE_CHROME_EXE, f"{BIN_IN_IMAGE}/google-chrome"
        )
    if code_server:
        scripts["code"] = code_script(root=CODE_SERVER_MOUNT)
    return scripts


def stage_bin(stage: Path, packages: Collection[str], code_server: bool) -> Path:
    """`BIN_IN_IMAGE` in the top layer's staging tree; returns its directory."""
    target = stage / BIN_IN_IMAGE.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    for name, text in bin_scripts(packages, code_server).items():
        (target / name).write_text(text)
        (target / name).chmod(0o755)
    (target / "python").symlink_to("/usr/bin/python3")
    return target
