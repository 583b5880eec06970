"""Archive metrics, following OSWorld's `compare_archive` (`metrics/chrome.py`) and
`compare_zip_files` (`metrics/vscode.py`).

`compare_archive` unpacks both archives next to the result file and scores the
members with another registered metric chosen by `file_type`, so it covers
whatever formats the registry does (pdf and docx come from the office family).
"""

from __future__ import annotations

import difflib
import io
import logging
import os
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cua_rl.eval_libraries import require
from cua_rl.evaluation.registry import METRICS, Finding, get_metric, metric

log = logging.getLogger(__name__)

PathLike = str | Path | None

ARCHIVE_MEMBER_METRICS = {
    "text": "compare_text_file",
    "pdf": "compare_pdfs",
    "docx": "compare_docx_files",
    "ppt": "compare_pptx_files",
    "image": "compare_images",
    "csv": "compare_csv",
    "table": "compare_table",
    "audio": "compare_audios",
    "video": "compare_videos",
}


def _check_archive_options(options: Mapping[str, Any]) -> tuple[list[Finding], list[str]]:
    file_type = options.get("file_type", "text")
    if file_type not in ARCHIVE_MEMBER_METRICS:
        return [(".file_type", f"one of {sorted(ARCHIVE_MEMBER_METRICS)}, got {file_type!r}")], []
    if ARCHIVE_MEMBER_METRICS[file_type] not in METRICS:
        return [], [file_type]
    return [], []


def _unpack(archive: str, folder: Path) -> bool:
    """Unpack into a fresh `folder`; False when the file is not a readable archive."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        if zipfile.is_zipfile(archive):  # zipfile itself drops ".." and absolute names
            shutil.unpack_archive(archive, folder, format="zip")
        else:  # filter="data" refuses tar members that would land outside the folder
            shutil.unpack_archive(archive, folder, filter="data")
    except (shutil.ReadError, ValueError, OSError) as exc:
        log.info("compare_archive: cannot unpack %s: %s", archive, exc)
        return False
    return True


@metric("compare_archive", check_options=_check_archive_options)
def compare_archive(
    pred_path: PathLike,
    gold_path: PathLike,
    *,
    file_path: str = "",
    file_type: str = "text",
    **kwargs: Any,
) -> float:
    """Mean member score when both archives hold the same file names under `file_path`.

    Members pair up in sorted name order and are scored by the metric of
    `file_type` (text, pdf, docx, ppt, image, csv, table, audio, video) with the
    remaining options; differing name lists score 0.
    """
    if not pred_path or not gold_path or not Path(pred_path).is_file():
        return 0.0
    compare = get_metric(ARCHIVE_MEMBER_METRICS[file_type]).func
    pred_folder = Path(os.path.splitext(pred_path)[0] + "_pred")
    gold_folder = Path(os.path.splitext(gold_path)[0] + "_gold")
    if not _unpack(str(pred_path), pred_folder) or not _unpack(str(gold_path), gold_folder):
        return 0.0
    try:
        pred_files = sorted(os.listdir(pred_folder / file_path))
        gold_files = sorted(os.listdir(gold_folder / file_path))
    except (FileNotFoundError, NotADirectoryError):
        return 0.0
    if pred_files != gold_files or not pred_files:
        return 0.0
    score = sum(
        float(
            compare(
                str(pred_folder / file_path / name), str(gold_folder / file_path / name), **kwargs
            )
        )
        for name in pred_files
    )
    return score / len(pred_files)


def _pdf_text(data: bytes) -> str:
    pypdf = require("pypdf", "pypdf", metric="compare_zip_files")
    reader = pypdf.PdfReader(io.BytesIO(data))
    return "".join(page.extract_text() for page in reader.pages)


@metric("compare_zip_files")
def compare_zip_files(actual: PathLike, expected: PathLike) -> float:
    """Same member names; PDF members need a text similarity >= 0.95 (difflib ratio
    of pypdf's text), all other members identical bytes."""
    if not actual or not expected or not Path(actual).is_file():
        return 0.0
    try:
        with zipfile.ZipFile(actual) as got, zipfile.ZipFile(expected) as want:
            names = set(got.namelist())
            if names != set(want.namelist()):
                return 0.0
            for name in names:
                a, b = got.read(name), want.read(name)
                if name.lower().endswith(".pdf"):
                    ratio = difflib.SequenceMatcher(None, _pdf_text(a), _pdf_text(b)).ratio()
                    if ratio < 0.95:
                        return 0.0
                elif a != b:
                    return 0.0
    except zipfile.BadZipFile:
        return 0.0
    return 1.0
