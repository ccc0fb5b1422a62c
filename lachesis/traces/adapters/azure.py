"""Azure LLM inference trace 2023 (conversation) → arrival and length statistics (NOT a Trace).

Any CSV with the header ``TIMESTAMP, ContextTokens, GeneratedTokens`` (the conversation and the code
trace, under any name) is read; each holds only those three values per request: no session id, no
prefix hashes, no agent identity. So it yields arrival and length statistics only (a secondary
source): :func:`stats` returns one row per statistic.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lachesis.traces.adapters import (
    MAX_COUNT,
    AdapterResult,
    find_files,
    read_each,
    read_text,
    require_data,
    stem,
    unique_names,
)
from lachesis.traces.schema import TraceError

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
TABLE_NAME = "stats"  # ``lachesis adapt`` writes stats.<fmt>


def read(path: Path) -> pd.DataFrame:
    """The request table, validated: a bad row raises naming the file, the line and the column."""
    import io

    text = read_text(path)
    if not text.strip():
        raise TraceError(str(path), "line 1", COLUMNS[0], "empty file: expected a CSV header " + ",".join(COLUMNS))
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise TraceError(str(path), "(file)", "(csv)", f"not CSV: {' '.join(str(e).split())}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(str(path), "line 1", missing[0], "column missing from the header")
    out = pd.DataFrame(index=df.index)
    out["t"] = pd.to_datetime(df["TIMESTAMP"], format="%Y-%m-%d %H:%M:%S.%f", errors="coerce")
    for c in COLUMNS[1:]:
        out[c] = pd.to_numeric(df[c], errors="coerce")
    if not len(out):
        raise TraceError(str(path), "line 2", COLUMNS[0], "no request row")
    for c, col in (("t", "TIMESTAMP"), ("ContextTokens", "ContextTokens"), ("GeneratedTokens", "GeneratedTokens")):
        bad = out[c].isna().to_numpy().copy()
        if c != "t":  # token counts: whole numbers in [0, MAX_COUNT)
            v = out[c].to_numpy(float)
            with np.errstate(invalid="ignore"):
                bad |= ~((v >= 0) & (v < MAX_COUNT) & (v == np.floor(v)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise TraceError(str(path), f"line {i + 2}", col, f"bad value {df[col].iloc[i]!r}")
    return out


def stats(df: pd.DataFrame) -> pd.DataFrame:
    """Arrival (inter-arrival seconds, rate) and length (context/generated tokens) statistics."""
    t = np.sort(df["t"].to_numpy().astype("datetime64[ns]").astype(np.int64)) / 1e9
    gaps = np.diff(t)
    dur = float(t[-1] - t[0]) if len(t) > 1 else 0.0
    g = gaps if len(gaps) else np.array([np.nan])  # one request: no inter-arrival time
    rows = [("requests", len(df)), ("duration_s", dur), ("rate_per_s", len(df) / dur if dur else np.nan),
            ("interarrival_mean_s", g.mean()), ("interarrival_p50_s", np.median(g)),
            ("interarrival_p99_s", np.percentile(g, 99)), ("interarrival_cv", g.std() / g.mean() if g.mean()
                                                           else np.nan)]
    for c in ("ContextTokens", "GeneratedTokens"):
        v = df[c].to_numpy(float)
        rows += [(f"{c}_mean", v.mean()), (f"{c}_p50", np.median(v)), (f"{c}_p90", np.percentile(v, 90)),
                 (f"{c}_p99", np.percentile(v, 99)), (f"{c}_max", v.max())]
    return pd.DataFrame(rows, columns=["statistic", "value"])


def load(path: Path) -> AdapterResult:
    """Every Azure-format CSV (``*.csv[.gz]`` with the three columns) in a file or folder → statistics,
    one block of rows per file (column ``trace``)."""
    path = Path(path)
    res = AdapterResult(dataset=path.name)
    files = find_files(path, (".csv", ".csv.gz"), "Azure LLM inference trace (CSV)")
    names = unique_names(files, path, stem)
    parsed = read_each(res, files, lambda p, part: stats(read(p)))
    require_data(res, path, len(parsed), "Azure LLM inference traces")
    res.table = pd.concat([st.assign(trace=names[p]) for p, st in parsed], ignore_index=True)
    res.note("arrival and length statistics only: no sessions, prefixes or agents")
    return res
