"""The two layers: which inputs key which layer, the base cache, the appended top."""

from __future__ import annotations

import io
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from cua_rl.errors import DesktopError
from cua_rl.images import layers
from cua_rl.images import recipe as rc

BASE = rc.Recipe(
    profile="minimal",
    packages=["python3", "xvfb"],
    python={"aiohttp": "3.9"},
    guest_digest="g1",
    script_digest="s1",
)


def test_a_guest_or_script_edit_changes_the_top_key_only() -> None:
    for changed in (replace(BASE, guest_digest="g2"), replace(BASE, script_digest="s2")):
        assert changed.base_key() == BASE.base_key()
        assert changed.key() != BASE.key()


def test_a_package_pin_or_version_change_changes_both_keys() -> None:
    for changed in (
        replace(BASE, packages=["python3", "xvfb", "xterm"]),
        replace(BASE, python={"aiohttp": "3.10"}),
        replace(BASE, version=99),
        replace(BASE, suite="trixie"),
    ):
        assert changed.base_key() != BASE.base_key()
        assert changed.key() != BASE.key()


def _fake_base(recipe: rc.Recipe, out: Path, calls: list[str]) -> dict[str, str]:
    calls.append(recipe.base_key())
    root = out.parent / "root"
    for rel in ("etc/hostname", "usr/local/bin/.keep", "opt/cua-guest/site/dep.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    with tarfile.open(out / "rootfs.tar", "w", format=tarfile.GNU_FORMAT) as tar:
        tar.add(root, arcname=".")
    return {"libc6": "2.36-9"}


def test_the_base_is_built_once_and_rebuilt_on_refresh_or_when_unfinished(tmp_path: Path) -> None:
    calls: list[str] = []
    build = lambda recipe, out: _fake_base(recipe, out, calls)  # noqa: E731
    first = layers.base_layer(BASE, tmp_path, False, build)
    assert first.built_now and first.debian == {"libc6": "2.36-9"}
    again = layers.base_layer(replace(BASE, guest_digest="other"), tmp_path, False, build)
    assert not again.built_now and again.dir == first.dir and len(calls) == 1
    layers.base_layer(BASE, tmp_path, True, build)
    assert len(calls) == 2
    (first.dir / "debian.json").unlink()  # an interrupted build: no marker
    assert layers.base_layer(BASE, tmp_path, False, build).built_now and len(calls) == 3
    assert not list((tmp_path / "base").glob("building-*"))


def _stage(tmp_path: Path, guest: str) -> Path:
    stage = tmp_path / f"stage-{guest}"
    for path, text in (
        (rc.MANIFEST_IN_IMAGE, "{}"),
        (rc.SESSION_SCRIPT_IN_IMAGE, "#!/bin/sh"),
        (f"{rc.GUEST_IN_IMAGE}/cua_guest/__init__.py", guest),
        (f"{rc.BIN_IN_IMAGE}/sudo", "#!/bin/sh"),
    ):
        (stage / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (stage / path.lstrip("/")).write_text(text)
    return stage


def test_the_top_layer_is_appended_without_repeating_base_paths(tmp_path: Path) -> None:
    base = layers.base_layer(BASE, tmp_path, False, lambda r, o: _fake_base(r, o, []))
    out = tmp_path / "image.tar"
    layers.append_top(base.rootfs_tar, _stage(tmp_path, "v1"), out)
    with tarfile.open(out) as tar:
        names = [m.name.removeprefix("./") for m in tar]
        guest = tar.extractfile(f".{rc.GUEST_IN_IMAGE}/cua_guest/__init__.py")
        assert guest is not None and guest.read() == b"v1"
        assert all(m.uid == 0 and m.mtime == 0 for m in tar if "cua_guest" in m.name)
    assert len(names) == len(set(names))  # one entry per path: no shadowed files
    assert {
        "etc/hostname",
        "opt/cua-guest/site/dep.py",
        "usr/local/bin/cua-desktop",
        "etc/cua-image/manifest.json",
        "usr/local/lib/cua-rl/bin/sudo",
    } <= set(names)
    assert base.rootfs_tar.stat().st_size < out.stat().st_size  # the base is untouched
    again = tmp_path / "again.tar"
    layers.append_top(base.rootfs_tar, _stage(tmp_path, "v1"), again)
    assert again.read_bytes() == out.read_bytes()


def test_a_top_layer_missing_a_path_is_refused(tmp_path: Path) -> None:
    stage = _stage(tmp_path, "v1")
    (stage / rc.SESSION_SCRIPT_IN_IMAGE.lstrip("/")).unlink()
    base = tmp_path / "base.tar"
    with tarfile.open(base, "w") as tar:
        tar.addfile(tarfile.TarInfo("./etc"), io.BytesIO())
    with pytest.raises(DesktopError, match="cua-desktop"):
        layers.append_top(base, stage, tmp_path / "out.tar")
