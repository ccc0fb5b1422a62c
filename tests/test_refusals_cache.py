"""The sweep cache's ranker sidecar (``<key>.rank.json``) is verified against its content digest."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lachesis import plancache, ranker, store
from lachesis.segments import prepare


@pytest.fixture(scope="module")
def prep():
    return prepare("multi_agent", 0.02, 0)


def _no_refit(monkeypatch) -> None:
    monkeypatch.setattr(ranker, "rank_keys", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refitted")))


def _edit(path, **changes) -> None:
    body = json.loads(path.read_text())
    body.update({k: (v(body[k]) if callable(v) else v) for k, v in changes.items()})
    path.write_text(json.dumps(body))


@pytest.mark.slow
@pytest.mark.parametrize("edit", [
    dict(values=lambda vs: [v * 0.5 for v in vs]),                     # the keys moved, the key kept
    dict(values=lambda vs: vs[::-1]),                                  # the order among agents changed
    dict(agents=lambda ag: ag[1:] + ag[:1]),                           # keys moved to other agents
    dict(digest=None),                                                 # the digest dropped
    dict(values=lambda vs: vs[:-1]),                                   # a value lost
])
def test_an_edited_sidecar_with_its_key_kept_is_refitted(tmp_path, prep, monkeypatch, edit) -> None:
    fitted = plancache.rank_keys_cached(prep, tmp_path)
    (path,) = tmp_path.glob("*.rank.json")
    _edit(path, **edit)
    with pytest.warns(store.CacheWarning, match="digest|values"):
        again = plancache.rank_keys_cached(prep, tmp_path)
    pd.testing.assert_series_equal(again, fitted)  # the fit, not the edit
    _no_refit(monkeypatch)  # and the refit was written back intact: read now without a warning
    pd.testing.assert_series_equal(plancache.rank_keys_cached(prep, tmp_path), fitted)


def test_an_intact_sidecar_is_read_without_a_refit(tmp_path, prep, monkeypatch) -> None:
    fitted = plancache.rank_keys_cached(prep, tmp_path)
    (path,) = tmp_path.glob("*.rank.json")
    assert json.loads(path.read_text())["digest"]
    _no_refit(monkeypatch)
    pd.testing.assert_series_equal(plancache.rank_keys_cached(prep, tmp_path), fitted)
