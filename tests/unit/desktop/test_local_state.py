"""Pure logic of the local provider: display allocation, state files, config."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from cua_rl.desktop.providers.base import DesktopHandle
from cua_rl.desktop.providers.config import ProviderConfig
from cua_rl.desktop.providers.factory import make_provider
from cua_rl.desktop.providers.local import home as lh
from cua_rl.desktop.providers.local import state as st
from cua_rl.desktop.providers.local.config import LocalProviderConfig
from cua_rl.images.default_apps import default_apps_list


@pytest.fixture(autouse=True)
def no_foreign_displays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other X servers on this machine must not change which numbers we get."""
    monkeypatch.setattr(st, "x_displays_in_use", lambda: set())


def display_locked(state_dir: Path, number: int) -> bool:
    """True while some process holds the lock of display :number (the lock file
    `allocate_display` holds)."""
    path = state_dir / "locks" / f"display-{number}.lock"
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_displays_are_distinct_while_locked(tmp_path: Path) -> None:
    locks = [st.allocate_display(tmp_path, 300) for _ in range(3)]
    assert [lock.number for lock in locks] == [300, 301, 302]
    assert display_locked(tmp_path, 301)
    locks[1].release()
    assert not display_locked(tmp_path, 301)
    again = st.allocate_display(tmp_path, 300)
    assert again.number == 301  # the freed number is reused, the held ones are not
    for lock in (locks[0], locks[2], again):
        lock.release()


def test_preferred_display_is_taken_when_free(tmp_path: Path) -> None:
    held = st.allocate_display(tmp_path, 300, prefer=305)
    assert held.number == 305
    other = st.allocate_display(tmp_path, 300, prefer=305)
    assert other.number == 300
    held.release()
    other.release()


def test_displays_used_by_other_x_servers_are_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(st, "x_displays_in_use", lambda: {300, 301})
    lock = st.allocate_display(tmp_path, 300)
    assert lock.number == 302
    lock.release()


def test_x_sockets_are_parsed_from_proc_net_unix() -> None:
    text = (
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "0000: 00000003 00000000 00000000 0001 03 16882 @/tmp/.X11-unix/X77\n"
        "0000: 00000002 00000000 00010000 0001 01 16875 /tmp/.X11-unix/X1024\n"
        "0000: 00000002 00000000 00010000 0001 01 16876 /tmp/.X11-unix/X5.bak\n"
        "0000: 00000002 00000000 00010000 0001 01 16874 /run/dbus/system_bus_socket\n"
    )
    assert st.parse_x_sockets(text) == {77, 1024}


def test_record_round_trip_and_listing(tmp_path: Path) -> None:
    record = st.DesktopRecord(
        id="d-1",
        url="http://127.0.0.1:5000",
        token="t",
        port=5000,
        display=300,
        pid=123,
        pgid=123,
        start_time=42.0,
        mnt_ns="mnt:[1]",
        home="/h",
        log="/l",
    )
    (tmp_path / "d-1").mkdir()
    record.save(tmp_path / "d-1")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "state.json").write_text("{not json")
    (tmp_path / "locks").mkdir()
    assert st.DesktopRecord.load(tmp_path / "d-1") == record
    assert st.list_records(tmp_path) == [record]
    assert st.list_records(tmp_path / "missing") == []


def test_token_file_is_private_and_random(tmp_path: Path) -> None:
    first = st.write_token(tmp_path / "token")
    mode = stat.S_IMODE(os.stat(tmp_path / "token").st_mode)
    assert mode == 0o600
    assert (tmp_path / "token").read_text() == first
    assert st.write_token(tmp_path / "token") != first


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "-x", "x" * 65, "a b"])
def test_bad_desktop_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="desktop id"):
        st.check_desktop_id(bad)


def test_home_template_is_built_once_and_restored(tmp_path: Path) -> None:
    template = lh.ensure_home_template(tmp_path / "tpl")
    for name in ("Desktop", "Documents", "Downloads"):
        assert (template / name).is_dir()
    assert (template / ".config/libreoffice/4/user/registrymodifications.xcu").is_file()
    assert (template / lh.PULSE_CONFIG).read_text() == lh.PULSE_DEFAULT_PA
    (template / "Desktop" / "keep.txt").write_text("kept")
    assert lh.ensure_home_template(tmp_path / "tpl") == template  # not rebuilt
    home = tmp_path / "home"
    lh.restore_home(template, home)
    (home / "Desktop" / "scratch.txt").write_text("x")
    lh.restore_home(template, home)
    assert not (home / "Desktop" / "scratch.txt").exists()
    assert (home / "Desktop" / "keep.txt").read_text() == "kept"


def test_home_template_has_vs_codes_user_directory_as_osworlds_image(tmp_path: Path) -> None:
    # a task's setup writes ~/.config/Code/User/settings.json before it starts `code`
    template = lh.ensure_home_template(tmp_path / "tpl")
    assert (template / ".config/Code/User").is_dir()
    shutil.rmtree(template / ".config/Code")  # a template built before VS Code gains it
    lh.ensure_home_template(template)
    assert (template / ".config/Code/User").is_dir()


def test_free_port_prefers_the_given_port() -> None:
    port = st.free_port()
    assert st.free_port(prefer=port) == port


def test_free_ports_come_from_outside_the_ephemeral_range() -> None:
    from cua_rl.net_ports import ephemeral_range

    low, high = ephemeral_range()
    assert not any(low <= st.free_port() <= high for _ in range(20))


def test_config_defaults_and_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUA_RL_STATE_DIR", str(tmp_path))
    config = LocalProviderConfig()
    assert (config.width, config.height) == (1920, 1080)
    assert config.state_dir == tmp_path
    with pytest.raises(ValidationError):
        LocalProviderConfig(width=10)
    with pytest.raises(ValidationError):
        LocalProviderConfig(wrong_field=1)


def test_provider_union_selects_by_type(tmp_path: Path) -> None:
    adapter = TypeAdapter(ProviderConfig)
    config = adapter.validate_python({"type": "local", "state_dir": str(tmp_path)})
    assert isinstance(config, LocalProviderConfig)
    with pytest.raises(ValidationError, match="vmware"):
        adapter.validate_python({"type": "vmware"})
    provider = make_provider(config)
    assert provider.type == "local"


def test_handle_is_frozen() -> None:
    handle = DesktopHandle("a", "http://x", None, "local")
    with pytest.raises(AttributeError):
        handle.id = "b"  # type: ignore[misc]


def test_missing_namespace_permission_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cua_rl.desktop.providers.local import provider as local
    from cua_rl.errors import DesktopError

    failing = [
        "sh",
        "-c",
        "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1",
        "--",
    ]
    monkeypatch.setattr(local, "UNSHARE", failing)
    provider = local.LocalProvider(LocalProviderConfig(state_dir=tmp_path))
    with pytest.raises(DesktopError, match="CAP_SYS_ADMIN"):
        provider._check_host()


def test_bench_spreadsheet_has_the_requested_shape() -> None:
    import csv
    import io

    from cua_rl.bench.guest import spreadsheet_csv

    rows = list(csv.reader(io.StringIO(spreadsheet_csv(200, 12).decode())))
    assert len(rows) == 201 and {len(r) for r in rows} == {12}
    assert spreadsheet_csv(5, 3) == spreadsheet_csv(5, 3)  # seeded: same screen every run


def test_totem_and_evince_are_the_defaults_as_on_osworlds_image(tmp_path: Path) -> None:
    (tmp_path / "org.gnome.Totem.desktop").write_text(
        "[Desktop Entry]\nName=Videos\n"
        "MimeType=application/ogg;video/mp4;audio/x-wav;video/x-matroska;\n"
    )
    assert default_apps_list(tmp_path) == (
        "[Default Applications]\nvideo/mp4=org.gnome.Totem.desktop\n"
        "video/x-matroska=org.gnome.Totem.desktop\n"
    )
    (tmp_path / "org.gnome.Evince.desktop").write_text(
        "[Desktop Entry]\nMimeType=application/pdf;image/tiff;application/x-bzpdf;\n"
    )
    assert default_apps_list(tmp_path).endswith(
        "video/x-matroska=org.gnome.Totem.desktop\napplication/pdf=org.gnome.Evince.desktop\n"
    )
    (tmp_path / "org.gnome.gedit.desktop").write_text(
        "[Desktop Entry]\nMimeType=text/plain;application/x-zerosize;\n"
    )
    assert default_apps_list(tmp_path).endswith(
        "application/pdf=org.gnome.Evince.desktop\ntext/plain=org.gnome.gedit.desktop\n"
    )
    assert default_apps_list(tmp_path / "absent") is None


def test_an_existing_list_gains_only_the_defaults_it_lacks() -> None:
    ours = "[Default Applications]\nvideo/mp4=totem.desktop\napplication/pdf=evince.desktop\n"
    user = "[Default Applications]\nvideo/mp4=vlc.desktop\n[Added Associations]\nx/y=z\n"
    assert lh.merged_apps_list(user, ours) == (
        "[Default Applications]\napplication/pdf=evince.desktop\nvideo/mp4=vlc.desktop\n"
        "[Added Associations]\nx/y=z\n"
    )
    assert lh.merged_apps_list(ours, ours) is None
    assert lh.merged_apps_list(None, ours) == ours
    assert lh.merged_apps_list("", ours) == (
        "[Default Applications]\nvideo/mp4=totem.desktop\napplication/pdf=evince.desktop\n"
    )


def test_home_template_gains_the_default_apps_list_once(tmp_path: Path) -> None:
    if default_apps_list() is None:
        pytest.skip("Totem is not installed (setup.sh installs it)")
    template = lh.ensure_home_template(tmp_path / "home-template")
    mimeapps = template / ".config" / "mimeapps.list"
    assert "video/mp4=org.gnome.Totem.desktop" in mimeapps.read_text()
    mimeapps.write_text("[Default Applications]\nvideo/mp4=vlc.desktop\n")
    lh.ensure_home_template(template)  # an existing choice (the user's) is kept
    assert "video/mp4=vlc.desktop" in mimeapps.read_text()
    assert "video/mp4=org.gnome.Totem.desktop" not in mimeapps.read_text()
    mimeapps.unlink()  # a template built before the list existed gains it
    lh.ensure_home_template(template)
    assert "org.gnome.Totem.desktop" in mimeapps.read_text()


def test_other_providers_folders_are_not_desktops(tmp_path: Path) -> None:
    # With $CUA_RL_STATE_DIR set, container/ and qemu/ live beside the local desktops.
    for name in ("container", "qemu", "locks", "d1"):
        (tmp_path / name).mkdir()
    states = st.desktop_states(tmp_path, lambda record: False, now=time.time() + 10**6)
    assert [s.id for s in states] == ["d1"]


def test_an_older_template_gains_the_pulse_config_and_keeps_its_own(tmp_path: Path) -> None:
    template = tmp_path / "tpl"
    (template / "Desktop").mkdir(parents=True)  # built before the PulseAudio config
    lh.ensure_home_template(template)
    assert (template / lh.PULSE_CONFIG).read_text() == lh.PULSE_DEFAULT_PA
    (template / lh.PULSE_CONFIG).write_text("load-module module-null-sink\n")
    lh.ensure_home_template(template)  # a config of the template's own stands
    assert (template / lh.PULSE_CONFIG).read_text() == "load-module module-null-sink\n"
