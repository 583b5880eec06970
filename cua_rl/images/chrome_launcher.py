"""The desktop's `google-chrome`: Debian's Chromium run as OSWorld's Chrome.

OSWorld's image has Google Chrome; ours have Chromium. Every cua-rl desktop gets
a `google-chrome` script first on PATH (local desktops: `local.user.chrome_shim`;
images: `images.build`) that execs Chromium's executable under the name `chrome`,
so the browser's processes are called `chrome` as Google Chrome's are (Chromium
sets /proc/PID/comm, which `pkill chrome` matches, to the name of its executable),
and OSWorld's postconfigs `pkill chrome` to make the browser write its profile
before a getter reads it. Debian's /usr/bin/chromium wrapper would exec it as
`chromium`, so the script does what that wrapper does instead: it sources
/etc/chromium.d (the distribution's default flags) and exports CHROME_WRAPPER and
CHROME_DESKTOP. The caller's flags come last, so a task's
`--remote-debugging-port=1337` (which OSWorld forwards to 9222 with socat) is
honoured as given. Stdlib only: the local session launcher imports this.
"""

from __future__ import annotations

CHROME_FLAGS = (
    "--user-data-dir=$HOME/.config/google-chrome",
    "--force-renderer-accessibility",
    "--no-first-run",
    "--no-default-browser-check",
    "--password-store=basic",
    "--no-sandbox",
    "--test-type",
)
"""Chromium flags that make it behave as OSWorld's google-chrome: the profile where
OSWorld's getters look, an accessibility tree for /accessibility, no first-run or
default-browser dialogs covering the page. `--no-sandbox`: Chromium's own sandbox
needs a nested user namespace, which every desktop's sandbox denies (docs/sandbox.md);
the desktop is the sandbox. `--test-type` keeps the "unsupported command-line flag"
bar off the screen, so pages look as on OSWorld's Chrome."""
IMAGE_CHROME_EXE = "/usr/lib/chromium/chrome"
"""In an image: a hard link to Debian's /usr/lib/chromium/chromium, beside its
resources (Chromium names its processes after /proc/self/exe, which a symlink would
resolve to `chromium`)."""


def chrome_launcher(exe: str, wrapper: str) -> str:
    """The `google-chrome` script (module docstring) execing Chromium's executable
    `exe` (named `chrome`); `wrapper` is where the script itself lives."""
    flags = " ".join(f'"{flag}"' for flag in CHROME_FLAGS)
    return (
        "#!/bin/sh\n"
        'CHROMIUM_FLAGS=""\n'
        "for file in /etc/chromium.d/*; do\n"
        '  case "$file" in */README|*.dpkg*) continue ;; esac\n'
        '  [ -f "$file" ] && . "$file"\n'
        "done\n"
        f"export CHROME_WRAPPER={wrapper} CHROME_DESKTOP=chromium.desktop\n"
        f'exec {exe} $CHROMIUM_FLAGS {flags} "$@"\n'
    )
