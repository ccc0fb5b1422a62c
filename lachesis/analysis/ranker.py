"""Spawn-time worker lifetime ranker (§3.5, §4 predictive path).

:class:`SpawnRanker` turns a worker's spawn signal into features and fits a ridge regression on log
T_norm, read only for the order it induces; :func:`oof_predictions` gives the simulator a rank key per
worker from the ridge, a model that never saw its session; :func:`compare_rankers` sets a gradient-boosted
alternative beside it on the same folds (Fig. 7; beyond the paper, never the predictive path's).  Features,
scoring, the worker-lifetime and context-length assumptions and why ranks are the same on every machine:
docs/design.md §4.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from threadpoolctl import threadpool_limits

from lachesis.analysis.stats import kendall_tau  # Kendall τ-b (scipy.stats.kendalltau)

if TYPE_CHECKING:
    from lachesis.analysis.segments import Segments
    from lachesis.traces.trace import Trace

#: Numeric spawn-signal columns (lengths and session position).
NUMERIC_FEATURES = ("instruction_words", "instruction_chars", "context_tokens", "n_tools",
                    "spawn_index", "lead_request_index", "lead_tokens_before")
#: Hashed bag-of-words width per text field.  ASSUMPTION: 2**12 buckets; collisions are rare at
#: the vocabulary size of spawn instructions, and the width is not tuned to any result.
HASH_FEATURES = 2 ** 12
RIDGE_ALPHA = 1.0  # ASSUMPTION: sklearn's default regularization; not tuned to the τ result.
#: Conjugate-gradient tolerance of the ridge solve (docs/design.md §4): tight enough that predictions
#: agree to ~1e-12 across BLAS kernels, at no measurable cost (CG converges in tens of iterations).
RIDGE_TOL = 1e-12
#: Predictions (log seconds) are rounded to 1e-9, 1000x above the ~1e-12 machine noise; a 1e-9 step
#: in log lifetime is a 1e-7 % lifetime difference, far below anything a ranking can use.
RANK_DECIMALS = 9


# ------------------------------------------------------------------------------------------------
# Spawn signal
# ------------------------------------------------------------------------------------------------


def _context_tokens(ctx: Any) -> float:
    """Token count of a spawn record's context (a count, a numeric string, or text)."""
    if isinstance(ctx, (int, float, np.integer, np.floating)) and not isinstance(ctx, bool):
        return float(ctx)
    s = "" if ctx is None else str(ctx)
    st = s.strip()
    if st.isdigit():
        return float(st)
    return float(len(s.split()))


def _context_text(ctx: Any) -> str:
    """The words of a textual context ("" when the record gives only a token count)."""
    if ctx is None or isinstance(ctx, (int, float, np.integer, np.floating)):
        return ""
    s = str(ctx)
    return "" if s.strip().isdigit() else s


def spawn_signal(spawns: pd.DataFrame, requests: pd.DataFrame | None = None) -> pd.DataFrame:
    """The spawn signal of each spawn record: its text, tools and position in the session.

    ``requests`` (the trace's request table) gives the position relative to the lead: how many of
    the parent's requests precede the spawning request (inclusive) and how many KV tokens the
    parent had written by then — both known at spawn time.  Without it those two are 0.
    """
    sp = spawns.reset_index(drop=True)
    out = pd.DataFrame({
        "agent_id": sp["agent_id"].astype(str),
        "session_id": sp["session_id"].astype(str),
        "instruction": sp["instruction"].fillna("").astype(str),
        "context_text": [_context_text(c) for c in sp["context"]],
        # a spawn granted no tools gets the token NO_TOOLS, so the indicator block is never empty
        "tools_text": [" ".join(str(t) for t in (v if isinstance(v, (list, tuple, np.ndarray)) else [])) or NO_TOOLS
                       for v in sp["tools"]],
    })
    out["instruction_words"] = out["instruction"].str.split().str.len().astype(float)
    out["instruction_chars"] = out["instruction"].str.len().astype(float)
    out["context_tokens"] = [_context_tokens(c) for c in sp["context"]]
    out["n_tools"] = [float(len(v)) if isinstance(v, (list, tuple, np.ndarray)) else 0.0 for v in sp["tools"]]
    out["spawn_index"] = pd.to_numeric(sp["spawn_index"]).astype(float)
    out["lead_request_index"] = 0.0
    out["lead_tokens_before"] = 0.0
    if requests is not None and len(requests) and "spawn_request_id" in sp.columns:
        r = requests[["request_id", "agent_id", "input_tokens", "output_tokens", "matched_prefix_tokens"]].copy()
        r["_pos"] = r.groupby("agent_id", sort=False).cumcount() + 1
        w = (r["input_tokens"] + r["output_tokens"] - r["matched_prefix_tokens"]).astype(float)
        r["_cum"] = w.groupby(r["agent_id"], sort=False).cumsum()
        pos = r.set_index("request_id")[["_pos", "_cum"]]
        j = pos.reindex(sp["spawn_request_id"].astype(str))
        out["lead_request_index"] = j["_pos"].fillna(0).to_numpy(dtype=float)
        out["lead_tokens_before"] = j["_cum"].fillna(0).to_numpy(dtype=float)
    return out


NO_TOOLS = "<no-tools>"


def _log1p(x: Any) -> Any:
    return np.log1p(np.asarray(x, dtype=float))


def _features(n_hash: int = HASH_FEATURES) -> ColumnTransformer:
    """Spawn signal -> features: log lengths/positions, tool indicators, hashed words."""
    numeric = Pipeline([("log", FunctionTransformer(_log1p, feature_names_out="one-to-one")),
                        ("scale", StandardScaler())])
    words = dict(alternate_sign=False, norm="l2", n_features=n_hash, ngram_range=(1, 1))
    return ColumnTransformer([
        ("numeric", numeric, list(NUMERIC_FEATURES)),
        ("tools", CountVectorizer(token_pattern=r"[^ ]+", lowercase=False, binary=True), "tools_text"),
        ("instruction_bow", HashingVectorizer(**words), "instruction"),
        ("context_bow", HashingVectorizer(**words), "context_text"),
    ], sparse_threshold=1.0)


def ridge_model() -> Pipeline:
    """The paper's predictor: ridge regression on log lifetime over the spawn signal."""
    return Pipeline([("features", _features()),
                     ("ridge", Ridge(alpha=RIDGE_ALPHA, solver="sparse_cg", tol=RIDGE_TOL))])


def boosted_model(seed: int = 0) -> Pipeline:
    """Alternative predictor: gradient-boosted trees on the same signal (narrower word hash).

    ASSUMPTION: 2**6 hash buckets per text field (trees need dense input, so the hash is
    narrower), 100 boosting rounds of depth-limited trees, early stopping off (deterministic);
    fixed a priori, not tuned to the τ result.
    """
    return Pipeline([("features", _features(2 ** 6)), ("dense", FunctionTransformer(_dense, accept_sparse=True)),
                     ("hgb", HistGradientBoostingRegressor(max_iter=100, learning_rate=0.1, max_leaf_nodes=15,
                                                           min_samples_leaf=20, early_stopping=False,
                                                           random_state=seed))])


def _dense(X: Any) -> np.ndarray:
    return X.toarray() if hasattr(X, "toarray") else np.asarray(X)


@dataclass
class SpawnRanker:
    """Ranks workers by a lifetime predicted from their spawn signal (lower key = shorter-lived)."""

    make_model: Callable[[], Pipeline] = ridge_model
    model_: Pipeline | None = field(default=None, init=False, repr=False)

    def fit(self, spawns_df: pd.DataFrame, t_norm: np.ndarray | pd.Series) -> "SpawnRanker":
        """Fit on spawn records (or their :func:`spawn_signal`) and true T_norm (seconds, > 0).

        Pass ``spawn_signal(spawns, trace.requests)`` (as :func:`worker_table` does) to include the
        position relative to the lead's requests; raw spawn records leave those two features 0, so
        fit and score on the same kind of frame."""
        X = _as_signal(spawns_df)
        y = np.asarray(t_norm, dtype=float)
        if len(y) != len(X):
            raise ValueError(f"SpawnRanker.fit: {len(X)} spawn records but {len(y)} lifetimes")
        if not np.all(np.isfinite(y)) or np.any(y < 0):
            bad = int(np.flatnonzero(~np.isfinite(y) | (y < 0))[0])
            raise ValueError(f"SpawnRanker.fit: record {bad} (agent_id={X['agent_id'].iloc[bad]!r}): "
                             f"field 't_norm': must be finite and >= 0, got {y[bad]!r}")
        self.model_ = self.make_model().fit(X, np.log(np.maximum(y, 1e-3)))
        return self

    def score(self, spawns_df: pd.DataFrame) -> np.ndarray:
        """Predicted rank keys (log lifetime rounded to RANK_DECIMALS; only the order is meaningful)."""
        if self.model_ is None:
            raise RuntimeError("SpawnRanker.score called before fit")
        return np.round(np.asarray(self.model_.predict(_as_signal(spawns_df)), dtype=float), RANK_DECIMALS)


def _as_signal(df: pd.DataFrame) -> pd.DataFrame:
    return df if set(NUMERIC_FEATURES).issubset(df.columns) else spawn_signal(df)


# ------------------------------------------------------------------------------------------------
# Worker table and grouped cross-validation
# ------------------------------------------------------------------------------------------------


def _segments_frame(segments: Segments | pd.DataFrame) -> pd.DataFrame:
    return segments.segments if hasattr(segments, "segments") else segments


def worker_lifetimes(segments: Segments | pd.DataFrame) -> pd.DataFrame:
    """One row per worker agent: session_id, T_norm span and summed write volume (docs/design.md §4)."""
    seg = _segments_frame(segments)
    w = seg[seg["seg_class"] == "worker"]
    keys = ["agent_id", "session_id"] + (["group"] if "group" in w.columns else [])
    agg = w.groupby(keys, sort=False).agg(
        t_first=("t_first_write_s", "min"), t_last=("t_last_read_s", "max"),
        tokens_written=("tokens_written", "sum")).reset_index()
    agg["t_norm_s"] = agg["t_last"] - agg["t_first"]
    return agg.drop(columns=["t_first", "t_last"])


def worker_table(trace: Trace, segments: Segments | pd.DataFrame) -> pd.DataFrame:
    """One row per worker: its spawn signal, benchmark, T_norm and write volume (docs/design.md §4)."""
    agg = worker_lifetimes(segments).set_index("agent_id")
    sp = trace.spawns
    sp = sp[sp["role"] == "worker"]
    missing = sorted(set(agg.index) - set(sp["agent_id"]))
    if missing:
        raise ValueError(f"{getattr(trace, 'source', '<trace>')}: worker segment of agent {missing[0]!r} "
                         "has no spawn record (field 'agent_id')")
    sp = sp[sp["agent_id"].isin(agg.index)].reset_index(drop=True)
    sig = spawn_signal(sp, trace.requests)
    bench = trace.requests.drop_duplicates("agent_id").set_index("agent_id")
    sig["benchmark"] = (bench["benchmark"].reindex(sig["agent_id"]).to_numpy()
                        if "benchmark" in bench.columns else "")
    sig["t_norm_s"] = agg["t_norm_s"].reindex(sig["agent_id"]).to_numpy(dtype=float)
    sig["tokens_written"] = agg["tokens_written"].reindex(sig["agent_id"]).to_numpy(dtype=np.int64)
    return sig


def session_folds(sessions: pd.Series | np.ndarray, n_splits: int = 5, seed: int = 0) -> np.ndarray:
    """Fold id of each row; all rows of a session share a fold (shuffled GroupKFold, seeded)."""
    groups = np.asarray(sessions).astype(str)
    n_groups = len(np.unique(groups))
    if n_groups < n_splits:
        raise ValueError(f"grouped CV needs >= {n_splits} sessions with workers, got {n_groups}")
    fold = np.full(len(groups), -1, dtype=np.int64)
    gkf = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    for f, (_, test) in enumerate(gkf.split(np.zeros(len(groups)), groups=groups)):
        fold[test] = f
    return fold


def _oof(table: pd.DataFrame, folds: np.ndarray, make_model: Callable[[], Pipeline]) -> np.ndarray:
    """Out-of-fold predictions.  Single-threaded BLAS/OpenMP: on a shared 2-core machine
    OpenMP spin-waiting made the boosted trees >10x slower, and results do not depend on it."""
    pred = np.full(len(table), np.nan)
    with threadpool_limits(1):
        for f in np.unique(folds):
            tr, te = folds != f, folds == f
            r = SpawnRanker(make_model).fit(table[tr], table["t_norm_s"].to_numpy()[tr])
            pred[te] = r.score(table[te])
    return pred


def cross_validate(trace: Trace, segments: Segments | pd.DataFrame, n_splits: int = 5, seed: int = 0,
                   make_model: Callable[[], Pipeline] = ridge_model) -> pd.DataFrame:
    """Out-of-fold predictions per worker (agent_id, session_id, benchmark, t_norm_s,
    tokens_written, pred, fold), folds grouped by session."""
    table = worker_table(trace, segments)
    folds = session_folds(table["session_id"], n_splits, seed)
    pred = _oof(table, folds, make_model)
    out = table[["agent_id", "session_id", "benchmark", "t_norm_s", "tokens_written"]].copy()
    out["pred"], out["fold"] = pred, folds
    return out


def oof_predictions(trace: Trace, segments: Segments | pd.DataFrame, seed: int = 0) -> pd.Series:
    """Out-of-fold rank key per worker (indexed by agent_id) from the paper's ranker, the ridge regression (§3.5:
    "a linear model over that signal, fitted by ridge regression"), on :func:`compare_rankers`'s folds."""
    cv = cross_validate(trace, segments, seed=seed)
    return cv.set_index("agent_id")["pred"]


#: the folds of the grouped cross-validation (docs/design.md §4): a trace needs this many sessions with workers
FOLDS = 5


def sessions_with_workers(trace: Trace) -> int:
    """How many sessions of the trace have a worker (the groups the ranker's folds split)."""
    r = trace.requests
    return int(r.loc[r["role"] == "worker", "session_id"].nunique())


def rank_keys(trace: Trace, segments: Segments | pd.DataFrame, seed: int = 0) -> pd.Series:
    """The key the predictive path ranks each worker agent by (§4; lower = shorter-lived): its
    out-of-fold prediction (:func:`oof_predictions`); empty when the trace has no worker.

    Degenerate (stated, no knob): with fewer than :data:`FOLDS` sessions with workers no out-of-fold fit
    exists, so every worker's key is NaN: the predictive path admits them unranked, in the order they open
    (NaN last, ties in open order, docs/design.md §5)."""
    if trace.spawns is None or len(trace.spawns) == 0 or not (trace.requests["role"] == "worker").any():
        return pd.Series(dtype=float, name="pred")
    if sessions_with_workers(trace) < FOLDS:
        workers = pd.unique(trace.requests.loc[trace.requests["role"] == "worker", "agent_id"])
        return pd.Series(np.nan, index=pd.Index(workers, name="agent_id"), name="pred")
    return oof_predictions(trace, segments, seed)


@dataclass
class RankerComparison:
    """Two rankers' out-of-fold predictions on identical folds and which one wins."""

    oof: pd.DataFrame  # worker table + fold + one column per model ("ridge", "boosted")
    tau: dict[str, float]
    winner: str


def compare_rankers(trace: Trace, segments: Segments | pd.DataFrame, n_splits: int = 5,
                    seed: int = 0) -> RankerComparison:
    """Ridge (the paper's ranker, the one the predictive path uses) against gradient-boosted trees (beyond the
    paper) on the same session-grouped folds; ``winner`` names the one with the higher out-of-fold Kendall τ."""
    table = worker_table(trace, segments)
    folds = session_folds(table["session_id"], n_splits, seed)
    out = table[["agent_id", "session_id", "benchmark", "t_norm_s", "tokens_written"]].copy()
    out["fold"] = folds
    models = {"ridge": ridge_model, "boosted": lambda: boosted_model(seed)}
    tau = {}
    for name, mk in models.items():
        out[name] = _oof(table, folds, mk)
        tau[name] = kendall_tau(out[name], out["t_norm_s"])
    winner = "boosted" if tau["boosted"] > tau["ridge"] else "ridge"
    return RankerComparison(out, tau, winner)
