"""The ranker's keys kept beside the evaluation cache (``<key>.rank.json``, lachesis.evaluation.plancache): read
back only when they match their content digest, refitted when edited, refused when a folder."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lachesis.analysis import ranker
from lachesis.analysis.segments import prepare
from lachesis.evaluation import plancache, store


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


def test_a_ranker_sidecar_that_is_a_folder_is_refused(tmp_path, prep) -> None:
    fitted = plancache.rank_keys_cached(prep, tmp_path)
    (path,) = tmp_path.glob("*.rank.json")
    path.unlink()
    path.mkdir()
    with pytest.raises(IsADirectoryError) as e:
        plancache.rank_keys_cached(prep, tmp_path)
    assert e.value.filename == str(path) and len(fitted)
