"""A local desktop's /etc is an allowlist (local/etc_view.py): on a stand-in /etc with
secrets beside the allowed entries, only allowed paths are bound, links stay links,
globs match versions, and the host's name and resolver come only with the network."""

from __future__ import annotations

from pathlib import Path

from cua_rl.desktop.providers.local.etc_view import ETC_ALLOWED, etc_args, etc_entries

SECRETS = (
    "shadow",
    "gshadow",
    "sudoers",
    "sudoers.d",
    "ssh",
    "docker",
    "containerd",
    "npmrc",
    "pip.conf",
    "gitconfig",
    "wgetrc",
    "apt",
    "xdg/pip",
    "security",
    "subuid",
    "subgid",
    "pam.d",
    "polkit-1",
    "cron.d",
    "systemd",
    "postgresql",
    "default/docker",
)
"""Host configuration no desktop needs; none may be listed (the old denylist's
entries and more)."""


def _etc(root: Path) -> Path:
    etc = root / "etc"
    for name in (
        *SECRETS,
        "passwd",
        "fonts/fonts.conf",
        "java-17-openjdk/security/x",
        "python3.11/sitecustomize.py",
        "xdg/autostart/a.desktop",
        "xdg/openbox/rc.xml",
        "default/locale",
        "hostname",
        "resolv.conf",
    ):
        path = etc / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text("secret" if name in SECRETS else "ok")
    (etc / "localtime").symlink_to("/usr/share/zoneinfo/Etc/UTC")
    (etc / "mtab").symlink_to("../proc/self/mounts")
    return etc


def test_no_secret_is_on_the_allowlist() -> None:
    for name in SECRETS:
        assert name not in ETC_ALLOWED and not any(
            name.startswith(entry.rstrip("*")) and entry.endswith("*") for entry in ETC_ALLOWED
        )


def test_only_allowed_entries_are_bound_and_links_stay_links(tmp_path: Path) -> None:
    etc = _etc(tmp_path)
    seen = {str(Path(p).relative_to(etc)) for p in etc_entries(etc=str(etc))}
    assert seen == {
        "passwd",
        "fonts",
        "java-17-openjdk",
        "python3.11",
        "xdg/autostart",
        "xdg/openbox",
        "default/locale",
        "localtime",
        "mtab",
    }
    argv = etc_args(etc=str(etc))
    assert argv[:2] == ["--dir", "/etc"]
    links = {argv[i + 2]: argv[i + 1] for i, a in enumerate(argv) if a == "--symlink"}
    assert links == {
        "/etc/localtime": "/usr/share/zoneinfo/Etc/UTC",
        "/etc/mtab": "../proc/self/mounts",
    }
    binds = {argv[i + 2]: argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}
    assert binds["/etc/xdg/openbox"] == str(etc / "xdg" / "openbox")
    assert not any(inside.endswith(tuple(SECRETS)) for inside in binds)
    assert "--bind" not in argv  # read-only, all of it


def test_the_hosts_name_and_resolver_come_with_the_network(tmp_path: Path) -> None:
    etc = _etc(tmp_path)
    networked = {str(Path(p).relative_to(etc)) for p in etc_entries(True, str(etc))}
    alone = {str(Path(p).relative_to(etc)) for p in etc_entries(False, str(etc))}
    assert networked - alone == {"hostname", "resolv.conf"}
