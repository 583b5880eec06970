"""The bucket layout of a weight broadcast: boundaries checked by hand, dtype changes,
oversize tensors, bad entries, and the vLLM side's copy equal to ours."""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

from cua_rl.inference import weight_transfer as wt
from cua_rl.inference.vllm_engine import SIDE_DIR


def _entry(name: str, numel: int, dtype: str = "float32") -> dict[str, Any]:
    return {"name": name, "shape": [numel], "dtype": dtype}


def _side() -> Any:
    sys.path.insert(0, str(SIDE_DIR))
    try:
        import cua_rl_vllm
    finally:
        sys.path.remove(str(SIDE_DIR))
    return cua_rl_vllm


def test_tensors_fill_a_bucket_up_to_its_size_and_no_further() -> None:
    # float32 sizes in bytes: 16, 16, 8, 24, 40, 4
    items = [
        _entry("a", 4),
        _entry("b", 4),
        _entry("c", 2),
        _entry("d", 6),
        _entry("e", 10),
        _entry("f", 1),
    ]
    # 40-byte buckets: a+b+c = 40 fits exactly; d (24) alone as e (40) would overflow;
    # e fills one; f starts the next
    assert wt.bucket_layout(items, 40) == [(0, 3), (3, 4), (4, 5), (5, 6)]
    assert wt.bucket_layout(items, 39) == [(0, 2), (2, 4), (4, 5), (5, 6)]
    assert wt.bucket_layout(items, 1000) == [(0, 6)]


def test_a_dtype_change_starts_a_new_bucket() -> None:
    items = [
        _entry("a", 2),
        _entry("b", 2, "bfloat16"),
        _entry("c", 2, "bfloat16"),
        _entry("d", 2),
        _entry("e", 2, "int64"),
    ]
    assert wt.bucket_layout(items, 1 << 20) == [(0, 1), (1, 3), (3, 4), (4, 5)]


def test_a_tensor_larger_than_a_bucket_is_a_bucket_of_its_own() -> None:
    items = [_entry("small", 2), _entry("huge", 100), _entry("after", 2), _entry("more", 2)]
    assert wt.bucket_layout(items, 32) == [(0, 1), (1, 2), (2, 4)]
    first_huge = [_entry("huge", 100), _entry("x", 1)]
    assert wt.bucket_layout(first_huge, 32) == [(0, 1), (1, 2)]


def test_bucket_size_zero_is_one_tensor_per_broadcast() -> None:
    items = [_entry("a", 1), _entry("b", 1), _entry("c", 1)]
    assert wt.bucket_layout(items, 0) == [(0, 1), (1, 2), (2, 3)]
    assert wt.bucket_layout([], 0) == [] == wt.bucket_layout([], 64)


def test_scalars_and_empty_tensors_count_by_their_elements() -> None:
    items = [
        {"name": "s", "shape": [], "dtype": "float64"},  # 8 bytes
        {"name": "z", "shape": [0, 5], "dtype": "float64"},  # 0 bytes
        {"name": "m", "shape": [2, 3], "dtype": "float64"},
    ]  # 48 bytes
    assert wt.bucket_layout(items, 56) == [(0, 3)]
    assert wt.bucket_layout(items, 55) == [(0, 2), (2, 3)]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "w", "shape": [2], "dtype": "int8"}, "unsupported dtype"),
        ({"name": "w", "shape": [2, -1], "dtype": "float32"}, "non-negative integers"),
        ({"name": "w", "shape": "2", "dtype": "float32"}, "non-negative integers"),
        ({"name": "w", "shape": [True], "dtype": "float32"}, "non-negative integers"),
        ({"shape": [2], "dtype": "float32"}, "expected {name, shape, dtype}"),
        ("w", "expected {name, shape, dtype}"),
    ],
)
def test_a_bad_entry_is_refused_with_its_name(entry: Any, says: str) -> None:
    for size in (0, 64):
        with pytest.raises(ValueError, match=says):
            wt.bucket_layout([_entry("ok", 1), entry], size)


def test_the_vllm_sides_copy_cuts_every_manifest_the_same_way() -> None:
    side = _side()
    rng = random.Random(45)
    dtypes = list(wt._ITEM_BYTES)
    assert side._ITEM_BYTES == wt._ITEM_BYTES
    for _ in range(300):
        items = [
            {
                "name": f"t{i}",
                "dtype": rng.choice(dtypes[:2]) if rng.random() < 0.8 else rng.choice(dtypes),
                "shape": [rng.choice([0, 1, 3, 16, 100, 1000]) for _ in range(rng.randint(0, 3))],
            }
            for i in range(rng.randint(0, 40))
        ]
        for size in (0, 1, 8, 64, 1000, 4096, 1 << 20):
            assert side.bucket_layout(items, size) == wt.bucket_layout(items, size), (items, size)
