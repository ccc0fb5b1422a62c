"""Mooncake FAST'25 conversation trace → per-block reuse/lifetime table (NOT a Trace).

Any Mooncake-format trace (``conversation_trace.jsonl``, ``toolagent_trace.jsonl``, … under any name)
is read: a file of records ``{timestamp, input_length, output_length, hash_ids}``. The trace has no
session, agent or turn identity — only per-request arrival time, lengths and the
chain of 512-token prefix-block hashes (``hash_ids``) covering the input. Equal ids denote the same
prefix KV block, so per block we can measure how often it is reused and how long it stays live
(first to last use). That is the only lifetime this source supports; it cannot be turned into the
per-request trace contract (no context chains to split into segments), so the adapter returns
tables: ``AdapterResult.table`` (one row per block) and ``extra['requests']`` (:func:`request_table`,
one row per request with its prefix-hit blocks).

Columns of the block table: ``trace`` (the file), ``block_id``; ``uses`` (requests whose chain contains it);
``reuses`` = uses − 1; ``first_ms``/``last_ms`` (trace clock, ms); ``lifetime_s`` = (last − first)/1000;
``position`` (index in the chain at first use; ``positions`` counts the distinct positions seen).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lachesis.traces.adapters import (
    MAX_COUNT,
    AdapterResult,
    count,
    find_files,
    iter_jsonl,
    read_each,
    require_data,
    stem,
    unique_names,
)
from lachesis.traces.schema import TraceError

BLOCK_TOKENS = 512  # Mooncake FAST'25 release: hash block size in tokens (PROVENANCE.md)
TABLE_NAME = "blocks"  # ``lachesis adapt`` writes blocks.<fmt> and blocks_requests.<fmt>


def read_requests(path: Path) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Requests (timestamp_ms, input_length, output_length, n_blocks) plus flat block ids and owners."""
    ts, inp, out, n, ids = [], [], [], [], []
    for lineno, rec in iter_jsonl(path):
        where = f"line {lineno}"
        for f in ("timestamp", "input_length", "output_length"):
            count(rec.get(f), path, where, f)
        h = rec.get("hash_ids")
        if not isinstance(h, list) or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < MAX_COUNT
                                              for x in h):
            raise TraceError(str(path), where, "hash_ids",
                             "missing field" if h is None else "expected a list of non-negative integers")
        ts.append(rec["timestamp"])
        inp.append(rec["input_length"])
        out.append(rec["output_length"])
        n.append(len(h))
        ids.extend(h)
    if not ts:
        raise TraceError(str(path), "(file)", "(records)", "no request record")
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


def load(path: Path) -> AdapterResult:
    """Every Mooncake trace file (``*.jsonl[.gz]``) in a file or folder → block and request tables.

    Block ids are local to their file (each file is its own trace), so the tables carry a ``trace``
    column (the file's name, or its path below the folder when names repeat).
    """
    path = Path(path)
    res = AdapterResult(dataset=path.name)
    files = find_files(path, (".jsonl", ".jsonl.gz"), "Mooncake trace")
    names = unique_names(files, path, stem)
    parsed = read_each(res, files, lambda p, part: read_requests(p))
    require_data(res, path, len(parsed), "Mooncake traces")
    blocks, reqs = [], []
    for p, (req, ids, owner) in parsed:
        blocks.append(block_table(req, ids, owner).assign(trace=names[p]))
        reqs.append(request_table(req, ids, owner).assign(trace=names[p]))
        expected = -(-req["input_length"] // BLOCK_TOKENS)
        bad = int((expected != req["n_blocks"]).sum())
        if bad:
            res.note(f"{names[p]}: {bad} requests whose block count differs from ceil(input_length/{BLOCK_TOKENS})")
    res.table = pd.concat(blocks, ignore_index=True)
    res.extra["requests"] = pd.concat(reqs, ignore_index=True)
    res.note(f"{len(res.extra['requests'])} requests, {len(res.table)} distinct blocks; no sessions, so no Trace")
    return res
