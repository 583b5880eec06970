"""What a local desktop sees of the host's /etc: an allowlist (docs/sandbox.md).

/etc holds the host's configuration, and with it what is none of a desktop's
business: password hashes, sudoers, SSH keys, the engine's and package managers'
settings (registries, proxies, credentials), service configs. It used to be bound
whole with a denylist of secrets masked, which had to grow with every host; now the
sandbox's /etc is built from nothing, like the rest of its tree: each entry below
that exists on the host is bound read-only at its own path (a link stays a link),
and nothing else of /etc exists inside. The root of the sandbox is remounted
read-only, so nothing can be created beside them.

The list is what the desktop's own programs and the apps of the `full` profile
(Chromium, LibreOffice, GIMP, VLC, Thunderbird, VS Code, GNOME Terminal, Nautilus,
gedit, the session's Xvfb, D-Bus and openbox, the guest's Python) read: user and
name lookup, the dynamic loader, locale and time zone, the shell's startup files,
fonts, GTK, dconf, D-Bus, X11 and XDG settings, `alternatives` (the links behind
`x-www-browser`, `editor`, `java`...), certificates, each app's own directory, and
the package database's config (`dpkg -l`, the desktop's `sudo`). `hostname` and
`resolv.conf` come only with `network: true` (a desktop that shares the host's
network resolves names as the host does). Entries may be glob patterns (`java-*`).
Stdlib only: the launcher imports it.
"""

from __future__ import annotations

import glob
import os

ETC_ALLOWED = (
    # accounts, name lookup, the loader, locale and time
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "protocols",
    "services",
    "networks",
    "rpc",
    "ethertypes",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "locale.alias",
    "locale.gen",
    "locale.conf",
    "localtime",
    "timezone",
    "default/locale",
    "default/keyboard",
    "environment",
    "machine-id",
    "os-release",
    "lsb-release",
    "debian_version",
    "issue",
    "issue.net",
    "mtab",
    "shells",
    "xattr.conf",
    # shells and terminals
    "profile",
    "profile.d",
    "bash.bashrc",
    "bash_completion",
    "bash_completion.d",
    "inputrc",
    "terminfo",
    "vim",
    "emacs",
    "nanorc",
    "manpath.config",
    "groff",
    # the session: X11, D-Bus, XDG, GTK, fonts, sound, graphics
    "X11",
    "dbus-1",
    "xdg/autostart",
    "xdg/openbox",
    "xdg/menus",
    "xdg/user-dirs.conf",
    "xdg/user-dirs.defaults",
    "xdg/gtk-2.0",
    "xdg/gtk-3.0",
    "xdg/mimeapps.list",
    "gtk-2.0",
    "gtk-3.0",
    "dconf",
    "fonts",
    "alternatives",
    "mime.types",
    "mailcap",
    "magic",
    "magic.mime",
    "pulse",
    "alsa",
    "asound.conf",
    "openal",
    "vulkan",
    "glvnd",
    "drirc",
    "vdpau_wrapper.cfg",
    "sensors3.conf",
    "sensors.d",
    "at-spi2",
    # certificates (apps check them; there is no network)
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    # the apps' own settings
    "chromium",
    "chromium.d",
    "opt",
    "libreoffice",
    "gimp",
    "vlc",
    "thunderbird",
    "java-*",
    "ImageMagick-*",
    "ghostscript",
    "dictionaries-common",
    "papersize",
    "libpaper.d",
    "xml",
    "sgml",
    "perl",
    "python3",
    "python3.*",
    "iproute2",
    # the package database's config: `dpkg -l`, the desktop's `sudo`
    "dpkg",
)
"""Paths relative to /etc a desktop sees, when the host has them (module doc)."""
ETC_WITH_NETWORK = ("hostname", "resolv.conf")
"""Added for desktops that share the host's network (`network: true`)."""


def etc_entries(network: bool = False, etc: str = "/etc") -> list[str]:
    """The host paths under `etc` a desktop sees, sorted, globs expanded, only those
    that exist (a dangling link counts: it stays a link)."""
    found: set[str] = set()
    for entry in (*ETC_ALLOWED, *(ETC_WITH_NETWORK if network else ())):
        pattern = os.path.join(etc, entry)
        paths = glob.glob(pattern) if glob.has_magic(entry) else [pattern]
        found.update(p for p in paths if os.path.lexists(p))
    return sorted(found)


def etc_args(network: bool = False, etc: str = "/etc") -> list[str]:
    """bwrap arguments that build the desktop's /etc from the allowlist: a link as a
    link (its target as it is), anything else bound read-only at its own path."""
    argv: list[str] = ["--dir", "/etc"]
    for path in etc_entries(network, etc):
        inside = "/etc/" + os.path.relpath(path, etc)
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), inside]
        else:
            argv += ["--ro-bind", path, inside]
    return argv
