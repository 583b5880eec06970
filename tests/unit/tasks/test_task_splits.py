import json

import pytest

from cua_rl.errors import TaskFormatError
from cua_rl.tasks.splits import build_splits, parse_split, read_split, render_split, split_names

SHIPPED = [
    "osworld-verified",
    "osworld-verified-nogdrive",
    "rlanything-in-domain",
    "rlanything-ood",
]


def test_shipped_splits_have_the_published_sizes():
    assert split_names() == sorted(SHIPPED)
    sizes = {name: len(read_split(name)) for name in SHIPPED}
    assert sizes == {
        "osworld-verified": 369,
        "osworld-verified-nogdrive": 361,
        "rlanything-in-domain": 222,
        "rlanything-ood": 147,
    }
    every = set(read_split("osworld-verified"))
    in_domain, ood = set(read_split("rlanything-in-domain")), set(read_split("rlanything-ood"))
    assert in_domain | ood == every and not in_domain & ood
    assert set(read_split("osworld-verified-nogdrive")) < every


@pytest.mark.shared
def test_shipped_splits_match_the_checkout(osworld_dir):
    for name, ids in build_splits(osworld_dir).items():
        assert read_split(name) == ids, f"regenerate with tools/make_splits.py ({name})"


@pytest.mark.shared
def test_in_domain_split_is_the_rlanything_training_set(openagentrl_dir):
    train = json.loads((openagentrl_dir / "train_nochrome.json").read_text())
    assert set(read_split("rlanything-in-domain")) == {i for ids in train.values() for i in ids}


def test_split_files_allow_comments_and_reject_duplicates(tmp_path):
    assert parse_split("# head\n\na  # inline\nb\n", "s.txt") == ["a", "b"]
    with pytest.raises(TaskFormatError, match=r"s.txt: line 3: expected each id once"):
        parse_split("a\nb\na\n", "s.txt")
    assert parse_split(render_split("x", ["a", "b"]), "x") == ["a", "b"]
    own = tmp_path / "mine.txt"
    own.write_text("a\n")
    assert read_split(str(own)) == ["a"]
    domain_map = tmp_path / "mine.json"
    domain_map.write_text('{"os": ["a", "b"]}')
    assert read_split(str(domain_map)) == ["a", "b"]
    with pytest.raises(TaskFormatError, match="unknown split 'nope'"):
        read_split("nope")
