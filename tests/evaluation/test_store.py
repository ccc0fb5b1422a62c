"""The evaluation cache's entries (lachesis.evaluation.store): a folder where an entry or its close record belongs
is refused at the read, naming it, before anything runs."""

from __future__ import annotations

import pytest

from lachesis.evaluation import plancache, store


def test_a_cache_entry_path_that_is_a_folder_is_refused_naming_it(tmp_path, monkeypatch) -> None:
    """A folder where an entry belongs would be recomputed and then fail to be written, every time: refused at
    the read, before anything runs, naming the path."""
    from lachesis.evaluation import sweep
    from lachesis.evaluation.grid import Point
    from lachesis.node import simulator
    from lachesis.node.capacity import SearchParams

    p, params = Point("tau3", "1/7", "Qwen3-235B-A22B", "tight", "hbm_first", scale=0.02), SearchParams()
    key = store.point_key(p, plancache.point_fingerprint(p), params)
    entry = store.entry_path(tmp_path, key)
    entry.mkdir()
    monkeypatch.setattr(simulator, "simulate_windows", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    for read in (lambda: sweep.evaluate_point(p, params, tmp_path), lambda: sweep.cached_entry(p, tmp_path, params)):
        with pytest.raises(IsADirectoryError) as e:
            read()
        assert e.value.filename == str(entry) and "not a file" in str(e.value)
    sidecar = store.closes_path(tmp_path, key)
    sidecar.mkdir()
    with pytest.raises(IsADirectoryError, match="not a file"):
        store.read_closes(sidecar, key, "fp")
