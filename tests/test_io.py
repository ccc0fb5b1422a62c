"""lachesis.io: atomic writes and the package's one JSON coercer (its NaN policy)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from lachesis.io import atomic_write, check_columns, jsonable, read_columns, write_json


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def boom(p):
        p.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert target.read_text() == "old"
    assert [f.name for f in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_write_gives_the_mode_open_would(tmp_path):
    """mkstemp's private 0600 must not leak into results and caches other users read."""
    import os
    import stat

    target = tmp_path / "out.json"
    atomic_write(target, lambda t: t.write_text("{}"))
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    assert stat.S_IMODE(os.stat(target).st_mode) == stat.S_IMODE(os.stat(plain).st_mode)


def test_jsonable_coerces_numpy_and_pandas_values():
    df = pd.DataFrame({"a": [1, 2], "b": [0.5, np.nan]})
    obj = {1: np.int64(3), "f": np.float32(0.25), "ok": np.bool_(True), "arr": np.array([[1, 2], [3, 4]]),
           "t": (1, "x"), "df": df}
    got = jsonable(obj)
    assert got == {"1": 3, "f": 0.25, "ok": True, "arr": [[1, 2], [3, 4]], "t": [1, "x"],
                   "df": [{"a": 1, "b": 0.5}, {"a": 2, "b": None}]}
    assert type(got["1"]) is int and type(got["ok"]) is bool and type(got["f"]) is float
    json.dumps(got, allow_nan=False)  # strict JSON: no numpy type, no NaN left


def test_nan_policy_null_or_keep(tmp_path):
    obj = {"x": float("nan"), "y": [np.float64("nan"), 1.0], "z": np.array([np.nan])}
    assert jsonable(obj) == {"x": None, "y": [None, 1.0], "z": [None]}
    kept = jsonable(obj, nan="keep")
    assert math.isnan(kept["x"]) and math.isnan(kept["y"][0]) and math.isnan(kept["z"][0])
    p = write_json(tmp_path / "a.json", obj, indent=2, sort_keys=True)
    assert json.loads(p.read_text()) == {"x": None, "y": [None, 1.0], "z": [None]}
    assert p.read_text().endswith("}\n")
    back = json.loads(write_json(tmp_path / "b.json", obj, nan="keep").read_text())
    assert math.isnan(back["x"])  # round-trips through Python's json


def test_jsonable_leaves_unknown_objects_for_json_to_reject():
    with pytest.raises(TypeError):
        json.dumps(jsonable({"s": {1, 2}}))


def test_parallel_columns_are_checked_and_read_by_name_and_kind() -> None:
    assert check_columns("R", {"a": np.arange(3), "b": np.zeros(3)}) == 3
    with pytest.raises(ValueError, match="R: field 'b' must be a 1-D array of length 3"):
        check_columns("R", {"a": np.arange(3), "b": np.zeros(2)})
    kinds = {"a": ("iu", np.int32), "t": ("f", np.float64)}
    got = read_columns("R", {"a": np.arange(2, dtype=np.int64), "t": np.ones(2, dtype=np.float32)}, kinds)
    assert got["a"].dtype == np.int32 and got["t"].dtype == np.float64
    with pytest.raises(ValueError, match="R: missing column 't'"):
        read_columns("R", {"a": np.arange(2)}, kinds)
    with pytest.raises(ValueError, match="R: column 'a' must hold integers, got float64"):
        read_columns("R", {"a": np.ones(2), "t": np.ones(2)}, kinds)
