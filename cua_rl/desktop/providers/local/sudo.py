"""`sudo` on a local desktop: the rootless script every cua-rl desktop gets
(`images.sudo_script`, which says what it does), bound at `SHIM_BIN/sudo`.

A local desktop never grants root, and OSWorld's setups that `sudo apt install`
a tool the host has, or `sudo mkdir` a folder in the home, still run; the host's
package database is bound read-only into the desktop, so `apt install` answers
from the host's packages. Stdlib only: the session launcher imports this.
"""

from __future__ import annotations

from cua_rl.images.sudo_script import SUDO_SCRIPT

SUDO_SHIM = SUDO_SCRIPT
"""The script bound at `SHIM_BIN/sudo` in every local desktop."""
