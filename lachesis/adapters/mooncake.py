"""Mooncake FAST'25 conversation trace → per-block reuse/lifetime table (NOT a Trace).

The trace has no session, agent or turn identity — only per-request arrival time, lengths and the
chain of 512-token prefix-block hashes (``hash_ids``) covering the input. Equal ids denote the same
prefix KV block, so per block we can measure how often it is reused and how long it stays live
(first to last use). That is the only lifetime this source supports; it cannot be turned into the
per-request trace contract (no context chains to split into segments), so the adapter returns
tables: ``AdapterResult.table`` (one row per block) and ``extra['requests']`` (:func:`request_table`,
one row per request with its prefix-hit blocks).

Columns of the block table: ``block_id``; ``uses`` (requests whose chain contains it);
``reuses`` = uses − 1; ``first_ms``/``last_ms`` (trace clock, ms); ``lifetime_s`` = (last − first)/1000;
``position`` (index in the chain at first use; ``positions`` counts the distinct positions seen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..trace import TraceError
from . import AdapterResult, iter_jsonl

BLOCK_TOKENS = 512  # Mooncake FAST'25 release: hash block size in tokens (PROVENANCE.md)
FILE = "conversation_trace.jsonl"


def read_requests(path: Path) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Requests (timestamp_ms, input_length, output_length, n_blocks) plus flat block ids and owners."""
    ts, inp, out, n, ids = [], [], [], [], []
    for lineno, rec in iter_jsonl(path):
        for f in ("timestamp", "input_length", "output_length"):
            v = rec.get(f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise TraceError(str(path), f"line {lineno}", f, "missing field" if v is None
                                 else f"expected a non-negative integer, got {v!r}")
        h = rec.get("hash_ids")
        if not isinstance(h, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in h):
            raise TraceError(str(path), f"line {lineno}", "hash_ids",
                             "missing field" if h is None else "expected a list of integers")
        ts.append(rec["timestamp"]); inp.append(rec["input_length"]); out.append(rec["output_length"])
        n.append(len(h)); ids.extend(h)
    req = pd.DataFrame(dict(timestamp_ms=np.asarray(ts, np.int64), input_length=np.asarray(inp, np.int64),
                            output_length=np.asarray(out, np.int64), n_blocks=np.asarray(n, np.int64)))
    owner = np.repeat(np.arange(len(req)), req["n_blocks"].to_numpy())
    return req, np.asarray(ids, np.int64), owner


def block_table(req: pd.DataFrame, ids: np.ndarray, owner: np.ndarray) -> pd.DataFrame:
    """Per-block reuse count and lifetime (vectorized over all block occurrences)."""
    starts = np.concatenate([[0], np.cumsum(req["n_blocks"].to_numpy())[:-1]])
    pos = np.arange(len(ids)) - np.repeat(starts, req["n_blocks"].to_numpy())
    occ = pd.DataFrame(dict(block_id=ids, t=req["timestamp_ms"].to_numpy()[owner], pos=pos))
    g = occ.groupby("block_id", sort=True)
    tab = g.agg(uses=("t", "size"), first_ms=("t", "min"), last_ms=("t", "max"), position=("pos", "first"),
                positions=("pos", "nunique")).reset_index()
    tab["reuses"] = tab["uses"] - 1
    tab["lifetime_s"] = (tab["last_ms"] - tab["first_ms"]) / 1000.0
    return tab


def request_table(req: pd.DataFrame, ids: np.ndarray, owner: np.ndarray) -> pd.DataFrame:
    """Per request: blocks, and the leading blocks already seen in an earlier request (prefix hit)."""
    first_owner = pd.Series(owner).groupby(ids).transform("min").to_numpy()
    seen = first_owner < owner
    hit = pd.Series(seen.astype(np.int64)).groupby(owner).cumprod().groupby(owner).sum()
    out = req.copy()
    out["prefix_hit_blocks"] = hit.reindex(range(len(req)), fill_value=0).to_numpy()
    out["prefix_hit_tokens"] = np.minimum(out["prefix_hit_blocks"] * BLOCK_TOKENS, out["input_length"])
    return out


def load(root: Path) -> AdapterResult:
    """``conversation_trace.jsonl`` → block table (and request count/consistency notes)."""
    root = Path(root)
    path = root / FILE if (root / FILE).exists() else root
    res = AdapterResult(dataset=root.name)
    req, ids, owner = read_requests(path)
    res.table = block_table(req, ids, owner)
    expected = -(-req["input_length"] // BLOCK_TOKENS)
    bad = int((expected != req["n_blocks"]).sum())
    res.notes.append(f"{len(req)} requests, {len(res.table)} distinct blocks; no sessions, so no Trace")
    if bad:
        res.notes.append(f"{bad} requests whose block count differs from ceil(input_length/{BLOCK_TOKENS})")
    res.extra["requests"] = request_table(req, ids, owner)
    return res
