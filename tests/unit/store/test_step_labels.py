"""Step labels stored as `step_labels` events: the writer's shape, the reader's checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cua_rl.store.run_store import RunStore
from cua_rl.store.schema import STEP_LABELS
from cua_rl.store.step_labels import StoredLabels, read_step_labels, write_step_labels


def test_written_labels_read_back_and_a_relabel_replaces(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    write_step_labels(store, "t1", [1, -1, None], "person:ann")
    write_step_labels(store, "t2", [-1], "golden-path")
    write_step_labels(store, "t1", [1, 1, None], "person:bob")  # later row wins
    store.close()
    read = read_step_labels(RunStore.read_only(tmp_path))
    assert read.rejected == []
    assert read.by_trajectory == {
        "t1": StoredLabels((1, 1, None), "person:bob"),
        "t2": StoredLabels((-1,), "golden-path"),
    }
    rows = RunStore.read_only(tmp_path).events(STEP_LABELS)
    assert rows[0]["subject"] == "t1"
    assert rows[0]["data"] == {"labels": [1, -1, None], "source": "person:ann"}


@pytest.mark.parametrize(
    "labels, source", [([1, 2], "x"), ([True], "x"), ("1,-1", "x"), ([1], ""), ([1], None)]
)
def test_the_writer_refuses_what_is_not_a_label(tmp_path: Path, labels, source) -> None:
    store = RunStore(tmp_path)
    with pytest.raises(ValueError, match="step labels of t1"):
        write_step_labels(store, "t1", labels, source)
    assert store.events(STEP_LABELS) == []


def test_a_malformed_row_costs_its_trajectory_only(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    write_step_labels(store, "good", [1], "judge")
    store.add_event(STEP_LABELS, "bad", {"labels": [1, 0.5], "source": "judge"})
    store.add_event(STEP_LABELS, "worse", {"labels": [1]})
    store._db.execute(
        "INSERT INTO events(run_id, kind, subject, data_json, created_at) "
        "VALUES (?, ?, 'broken', '{not json', 0)",
        (store.run_id, STEP_LABELS),
    )
    store.close()
    read = read_step_labels(RunStore.read_only(tmp_path))
    assert list(read.by_trajectory) == ["good"]
    assert len(read.rejected) == 3
    assert "events row 2 (step_labels of 'bad')" in read.rejected[0]
    assert '"labels"[1] must be 1, -1 or null, got 0.5' in read.rejected[0]
    assert '"source" must be a non-empty string' in read.rejected[1]
    assert "not JSON" in read.rejected[2]
    assert all("run.sqlite" in line for line in read.rejected)
    json.dumps(read.rejected)  # plain strings, fit for a report
