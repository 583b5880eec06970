"""Which pairs `templates validate PATHS` checks (`cua_rl.tasks.validation.pair_targets`):
a template file, an evaluator file or folder, an authoring folder, or a task id under
--root; anything else is refused with what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from cua_rl.tasks.validation import NotAPairPath, pair_targets


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "templates").mkdir(parents=True)
    (root / "evaluators" / "t1").mkdir(parents=True)
    (root / "templates" / "t1.json").write_text("{}")
    (root / "evaluators" / "t1" / "v.json").write_text("{}")
    return root


def test_every_form_of_path_names_the_same_pair(tmp_path: Path) -> None:
    root = _root(tmp_path)
    expected = [(root, "t1")]
    assert pair_targets((root / "templates" / "t1.json",), None) == expected
    assert pair_targets((root / "evaluators" / "t1" / "v.json",), None) == expected
    assert pair_targets((root / "evaluators" / "t1",), None) == expected
    assert pair_targets((root,), None) == expected
    assert pair_targets((Path("t1"),), root) == expected
    assert pair_targets((root, root / "templates" / "t1.json"), None) == expected  # once


def test_a_path_that_names_no_pair_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotAPairPath, match="expected templates/<id>.json"):
        pair_targets((tmp_path,), None)
