"""The writers of asset stand-ins, one per file type (tests_support/asset_files.py
chooses which and where): each makes a small well-formed file of its type, so the
app or library that opens the real asset opens the stand-in too."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import struct
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path


def _xlsx(path: Path) -> None:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.append(["Name", "Value"])
    sheet.append(["a", 1])
    book.save(path)


def _docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_paragraph("Stand-in document.")
    document.save(str(path))


def _pptx(path: Path) -> None:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Stand-in slide"
    deck.save(str(path))


def _image(fmt: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        from PIL import Image

        Image.new("RGB", (64, 48), (200, 80, 40)).save(path, format=fmt)

    return write


def media(args: list[str]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-y", *args, str(path)], check=True, timeout=60
        )

    return write


def _text(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text)


def _zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("README.txt", "stand-in archive\n")


_ODF_BODY = {
    "text": "<office:text><text:p>Stand-in document.</text:p></office:text>",
    "spreadsheet": '<office:spreadsheet><table:table table:name="Sheet1">'
    '<table:table-row><table:table-cell office:value-type="string">'
    "<text:p>a</text:p></table:table-cell></table:table-row></table:table>"
    "</office:spreadsheet>",
}


def _odf(kind: str) -> Callable[[Path], None]:
    mimetype = f"application/vnd.oasis.opendocument.{kind}"
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
    )

    def write(path: Path) -> None:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(zipfile.ZipInfo("mimetype"), mimetype)  # stored, first
            archive.writestr(
                "content.xml",
                f'<?xml version="1.0" encoding="UTF-8"?>'
                f'<office:document-content {ns} office:version="1.2">'
                f"<office:body>{_ODF_BODY[kind]}</office:body>"
                "</office:document-content>",
                zipfile.ZIP_DEFLATED,
            )
            archive.writestr(
                "META-INF/manifest.xml",
                '<?xml version="1.0" encoding="UTF-8"?>'
                '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:'
                'opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
                f'<manifest:file-entry manifest:full-path="/" '
                f'manifest:media-type="{mimetype}"/>'
                '<manifest:file-entry manifest:full-path="content.xml" '
                'manifest:media-type="text/xml"/></manifest:manifest>',
                zipfile.ZIP_DEFLATED,
            )

    return write


def _tar(mode: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        data = b"stand-in\n"
        with tarfile.open(path, mode) as archive:
            info = tarfile.TarInfo("standin/README.txt")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))

    return write


SPECIAL_KINDS = {"thunderbird-profile": "/thunderbird-profile.tar.gz"}
"""Kind -> URL path suffix of the stand-ins with their own writer."""


CHROMIUMS = ("chromium", "chromium-browser", "google-chrome")


def _sqlite(path: Path) -> None:
    """Chrome's empty History database, as the real asset is: written by Chromium
    itself when it is installed. A database without Chromium's `meta` table is
    razed when the browser starts (a postconfig's `pkill chrome` and relaunch),
    which dropped the visits the setup had added and let a "delete the YouTube
    history" task pass untouched. Without Chromium: the two tables setup steps fill."""
    chromium = next((found for name in CHROMIUMS if (found := shutil.which(name))), None)
    if chromium is not None:
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(
                [
                    chromium,
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    f"--user-data-dir={profile}",
                    f"--screenshot={profile}/shot.png",
                    "about:blank",
                ],
                capture_output=True,
                timeout=120,
                check=False,
            )
            history = Path(profile) / "Default" / "History"
            if history.is_file():
                with sqlite3.connect(history) as src, sqlite3.connect(path) as dst:
                    src.backup(dst)
                src.close()
                dst.close()
                return
    with sqlite3.connect(path) as db:  # Chrome's History tables that setup steps fill
        db.execute(
            "CREATE TABLE urls (id INTEGER PRIMARY KEY AUTOINCREMENT, url LONGVARCHAR, "
            "title LONGVARCHAR, visit_count INTEGER DEFAULT 0, typed_count INTEGER "
            "DEFAULT 0, last_visit_time INTEGER, hidden INTEGER DEFAULT 0)"
        )
        db.execute(
            "CREATE TABLE visits (id INTEGER PRIMARY KEY AUTOINCREMENT, url INTEGER, "
            "visit_time INTEGER, from_visit INTEGER, transition INTEGER, segment_id "
            "INTEGER, visit_duration INTEGER)"
        )
    db.close()


def _xcf(path: Path) -> None:
    # GIMP's native format: header, no properties, no layers, no channels.
    path.write_bytes(
        b"gimp xcf file\0"
        + struct.pack(">III", 64, 48, 0)
        + struct.pack(">II", 0, 0)
        + struct.pack(">II", 0, 0)
    )


def opaque_bytes(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 4)


WRITERS: dict[str, Callable[[Path], None]] = {
    "xlsx": _xlsx,
    "docx": _docx,
    "pptx": _pptx,
    "pdf": _image("PDF"),
    "png": _image("PNG"),
    "jpg": _image("JPEG"),
    "jpeg": _image("JPEG"),
    "gif": _image("GIF"),
    "webp": _image("WEBP"),
    "mp3": media(["-f", "lavfi", "-i", "sine=frequency=440:duration=1"]),
    "wav": media(["-f", "lavfi", "-i", "sine=frequency=440:duration=1"]),
    "mp4": media(["-f", "lavfi", "-i", "color=c=blue:s=160x120:d=1", "-pix_fmt", "yuv420p"]),
    "txt": _text("stand-in text\n"),
    "md": _text("# Stand-in\n"),
    "csv": _text("a,b\n1,2\n"),
    "json": _text(json.dumps({"standin": True}) + "\n"),
    "py": _text("print('stand-in')\n"),
    "sh": _text("#!/bin/sh\necho stand-in\n"),
    "html": _text("<html><body>x</body></html>\n"),
    "css": _text("body { color: black; }\n"),
    "tex": _text("\\documentclass{article}\n"),
    "bib": _text("@misc{x, title={x}}\n"),
    "srt": _text("1\n00:00:00,000 --> 00:00:01,000\nx\n"),
    "eml": _text("From: a@example.com\nTo: b@example.com\nSubject: x\n\nbody\n"),
    "code-workspace": _text('{"folders": []}\n'),
    "zip": _zip,
    "whl": _zip,
    "vsix": _zip,
    "epub": _zip,
    "odt": _odf("text"),
    "ods": _odf("spreadsheet"),
    "gz": _tar("w:gz"),
    "xz": _tar("w:xz"),
    "sqlite": _sqlite,
    "xcf": _xcf,
}
"""Extension -> writer; anything else gets opaque bytes (bin, raw, data, ppt, xls)."""
