"""lachesis.io: atomic writes (a full disk named by the file it was writing), output folders written whole, and the
package's one JSON coercer (its NaN policy)."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import full_disk, snapshot
from fixture_paths import TAU2_SOURCE as SRC

from lachesis import io
from lachesis.cli import main
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


# -- output folders written whole (the helpers the adapter and corpus tests read too) -----------------


def test_a_folder_the_command_did_not_write_is_refused_untouched(tmp_path, capsys) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for argv in (["adapt", "tau2", str(SRC), "--out", str(mine)],
                 ["corpus", "--scale", "0.02", "--workloads", "bfcl_base", "--out", str(mine)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "replaced whole" in err[0], err
        assert snapshot(mine) == {"notes.txt": b"keep me"}


def test_replace_folder_mode_is_that_of_mkdir(tmp_path) -> None:
    out = io.replace_folder(tmp_path / "x", lambda t: (t / "a.json").write_text("{}"), lambda f: "never")
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask


def test_a_full_disk_names_the_file_being_written(tmp_path, capsys, monkeypatch) -> None:
    """ENOSPC from a write names no file; the error raised names the file the write was for."""
    target = tmp_path / "figs" / "fig09_grid.csv"
    with pytest.raises(OSError) as e:
        io.atomic_write(target, full_disk)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(target), e.value
    assert str(target) in str(e.value) and not list(target.parent.iterdir())  # no temporary file left
    # through the command line: one line, the path and the reason
    real = io.atomic_write
    monkeypatch.setattr(io, "atomic_write", lambda path, write: real(path, full_disk))
    trace = tmp_path / "t"
    trace.mkdir()
    (trace / "requests.jsonl").write_text(json.dumps(dict(
        session_id="s", request_id="r0", agent_id="a", parent_agent_id=None, role="single", turn=0, input_tokens=10,
        matched_prefix_tokens=0, output_tokens=5, reasoning_tokens=0, tool_names=[], n_observations=0)) + "\n")
    out = tmp_path / "seg.csv"
    assert main(["segments", str(trace), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"lachesis segments: error: {out}: No space left on device"], err


def test_an_error_that_names_its_file_keeps_it(tmp_path) -> None:
    other = tmp_path / "elsewhere"

    def fails(tmp):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(other))

    with pytest.raises(FileNotFoundError) as e:
        io.atomic_write(tmp_path / "x.json", fails)
    assert e.value.filename == str(other)


def test_a_set_of_files_is_replaced_whole_or_not_at_all(tmp_path) -> None:
    (tmp_path / "a.csv").write_text("old")
    (tmp_path / "a.png").write_text("old")

    def half(tmp: Path) -> list[Path]:
        (tmp / "a.csv").write_text("new")
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp / "a.png"))

    with pytest.raises(OSError, match="no file of the set was replaced") as e:
        io.replace_files(tmp_path, half)
    assert e.value.filename == str(tmp_path / "a.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "a.png"]
    assert (tmp_path / "a.csv").read_text() == "old"

    def whole(tmp: Path) -> list[Path]:
        for n in ("a.csv", "a.png"):
            (tmp / n).write_text("new")
        return [tmp / "a.csv", tmp / "a.png"]

    assert io.replace_files(tmp_path, whole) == [tmp_path / "a.csv", tmp_path / "a.png"]
    assert [p.read_text() for p in sorted(tmp_path.iterdir())] == ["new", "new"]


def test_one_holder_of_an_exclusive_lock_at_a_time(tmp_path) -> None:
    lock = tmp_path / ".x.lock"
    with io.exclusive(lock, "x.csv"):
        assert lock.read_text() == str(os.getpid())
        with pytest.raises(ValueError, match=rf"x.csv: another process \(pid {os.getpid()}\) is writing it now"):
            with io.exclusive(lock, "x.csv"):
                pass
    assert not lock.exists()
    with io.exclusive(lock, "x.csv"):  # free again
        pass
