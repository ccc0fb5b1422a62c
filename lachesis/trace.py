"""The per-request trace contract (DESIGN §2): schema, validation, JSONL/Parquet I/O.

A :class:`Trace` holds two tables:

* ``requests`` — one row per LLM request, columns :data:`REQUEST_COLUMNS` (+ optional ones);
* ``spawns`` — one row per sub-agent spawn record, columns :data:`SPAWN_COLUMNS`.

Every loader validates every row and raises :class:`TraceError` naming the source, the row and
the field; nothing is silently dropped or coerced.  Rows are kept in the order given, which must be
session order (a request's matched prefix refers to its agent's *earlier* requests).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pandas as pd

ROLES = ("single", "lead", "worker", "reviewer")

#: Required request columns and their kind: "str", "int", "list" (list of str), "str?" (nullable).
REQUEST_COLUMNS: dict[str, str] = {
    "session_id": "str",
    "request_id": "str",
    "agent_id": "str",
    "parent_agent_id": "str?",
    "role": "str",
    "turn": "int",
    "input_tokens": "int",
    "matched_prefix_tokens": "int",
    "output_tokens": "int",
    "reasoning_tokens": "int",
    "tool_names": "list",
    "n_observations": "int",
}
OPTIONAL_REQUEST_COLUMNS: dict[str, str] = {
    "t_start": "float",
    "t_end": "float",
    "benchmark": "str",
    "domain": "str",
    "model": "str",
    "observation_tokens": "int",  # tokens of tool results appended after this request
}
SPAWN_COLUMNS: dict[str, str] = {
    "session_id": "str",
    "agent_id": "str",
    "parent_agent_id": "str",
    "role": "str",
    "spawn_request_id": "str",
    "instruction": "str",
    "context": "str",
    "tools": "list",
    "model": "str",
    "spawn_index": "int",
}


class TraceError(ValueError):
    """A trace failed validation: names the source, the record and the field."""

    def __init__(self, source: str, record: object, field: str, problem: str):
        self.source, self.record, self.field, self.problem = source, record, field, problem
        super().__init__(f"{source}: record {record}: field {field!r}: {problem}")


@dataclass
class Trace:
    """A validated trace: per-request rows plus spawn records."""

    requests: pd.DataFrame
    spawns: pd.DataFrame
    source: str = "<memory>"

    @classmethod
    def from_frames(cls, requests: pd.DataFrame, spawns: pd.DataFrame | None = None,
                    source: str = "<memory>") -> "Trace":
        """Validate and wrap two frames (spawns may be omitted for single-agent traces)."""
        spawns = empty_spawns() if spawns is None else spawns
        req = validate_requests(requests, source)
        sp = validate_spawns(spawns, req, source)
        return cls(req, sp, source)

    @property
    def sessions(self) -> np.ndarray:
        return self.requests["session_id"].unique()

    def subset(self, session_ids: Iterable[str]) -> "Trace":
        """The trace restricted to some sessions (already validated, so no re-check)."""
        keep = set(session_ids)
        r = self.requests[self.requests["session_id"].isin(keep)].reset_index(drop=True)
        s = self.spawns[self.spawns["session_id"].isin(keep)].reset_index(drop=True)
        return Trace(r, s, self.source)


def empty_spawns() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64" if k == "int" else "object")
                         for c, k in SPAWN_COLUMNS.items()})


def tokens_written(requests: pd.DataFrame) -> pd.Series:
    """KV tokens each request newly materializes: ``input + output - matched_prefix`` (Appendix B)."""
    return requests["input_tokens"] + requests["output_tokens"] - requests["matched_prefix_tokens"]


def tokens_processed(requests: pd.DataFrame) -> pd.Series:
    """Tokens each request processes: its whole input plus its output (Table 3 column)."""
    return requests["input_tokens"] + requests["output_tokens"]


# ------------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------------


def _row_label(df: pd.DataFrame, pos: int) -> str:
    for key in ("request_id", "agent_id"):
        if key in df.columns:
            return f"{pos} ({key}={df[key].iloc[pos]!r})"
    return str(pos)


def _check_column(df: pd.DataFrame, col: str, kind: str, source: str) -> pd.Series:
    s = df[col]
    nullable = kind.endswith("?")
    kind = kind.rstrip("?")
    isnull = s.isna().to_numpy() if kind != "list" else np.array([v is None for v in s], dtype=bool)
    if not nullable and isnull.any():
        pos = int(np.flatnonzero(isnull)[0])
        raise TraceError(source, _row_label(df, pos), col, "missing value")
    if kind == "str":
        bad = np.array([not (isinstance(v, str) or (nullable and n)) for v, n in zip(s, isnull)])
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise TraceError(source, _row_label(df, pos), col, f"expected a string, got {s.iloc[pos]!r}")
        return s.astype(object)
    if kind in ("int", "float"):
        if s.dtype == object or s.dtype == bool:
            bad = np.array([isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))
                            for v in s])
            if bad.any():
                pos = int(np.flatnonzero(bad)[0])
                raise TraceError(source, _row_label(df, pos), col, f"expected a number, got {s.iloc[pos]!r}")
        vals = pd.to_numeric(s).to_numpy(dtype=float)
        if kind == "int":
            frac = vals != np.floor(vals)
            if frac.any():
                pos = int(np.flatnonzero(frac)[0])
                raise TraceError(source, _row_label(df, pos), col, f"expected an integer, got {vals[pos]!r}")
            neg = vals < 0
            if neg.any():
                pos = int(np.flatnonzero(neg)[0])
                raise TraceError(source, _row_label(df, pos), col, f"must be >= 0, got {int(vals[pos])}")
            return pd.Series(vals.astype(np.int64), index=s.index)
        return pd.Series(vals, index=s.index)
    if kind == "list":
        out = []
        for pos, v in enumerate(s):
            if isinstance(v, np.ndarray):
                v = v.tolist()
            if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
                raise TraceError(source, _row_label(df, pos), col, f"expected a list of strings, got {v!r}")
            out.append(list(v))
        return pd.Series(out, index=s.index, dtype=object)
    raise AssertionError(kind)


def validate_requests(df: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Check every row of a request table against DESIGN §2; return a typed copy."""
    missing = [c for c in REQUEST_COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(source, "(header)", missing[0], f"required column missing (all missing: {missing})")
    df = df.reset_index(drop=True)
    out = pd.DataFrame(index=df.index)
    for col, kind in REQUEST_COLUMNS.items():
        out[col] = _check_column(df, col, kind, source)
    for col, kind in OPTIONAL_REQUEST_COLUMNS.items():
        if col in df.columns:
            # an optional float may hold gaps (NaN); other optional kinds are checked like required ones
            out[col] = _check_float_opt(df, col, source) if kind == "float" else _check_column(df, col, kind + "?", source)
    for col in df.columns:  # keep user extras untouched
        if col not in out.columns:
            out[col] = df[col]

    def fail(mask: np.ndarray, col: str, msg: str) -> None:
        if mask.any():
            pos = int(np.flatnonzero(mask)[0])
            raise TraceError(source, _row_label(out, pos), col, msg.format(**{c: out[c].iloc[pos] for c in out.columns
                                                                               if c in msg}))

    inp, mp = out["input_tokens"].to_numpy(), out["matched_prefix_tokens"].to_numpy()
    outp, rs = out["output_tokens"].to_numpy(), out["reasoning_tokens"].to_numpy()
    fail(mp > inp, "matched_prefix_tokens", "matched prefix {matched_prefix_tokens} exceeds input {input_tokens}")
    fail(rs > outp, "reasoning_tokens", "reasoning {reasoning_tokens} exceeds output {output_tokens}")
    fail(~out["role"].isin(ROLES).to_numpy(), "role", "unknown role {role!r}; expected one of " + str(ROLES))
    dup = out["request_id"].duplicated().to_numpy()
    fail(dup, "request_id", "duplicate request id {request_id!r}")
    if "t_start" in out and "t_end" in out:
        ts, te = out["t_start"].to_numpy(), out["t_end"].to_numpy()
        fail(te < ts, "t_end", "t_end {t_end} precedes t_start {t_start}")

    # agent structure: an agent belongs to one session, has one role; a sub-agent's parent is known
    agents = out.groupby("agent_id", sort=False).agg(
        session_id=("session_id", "first"), n_sessions=("session_id", "nunique"),
        role=("role", "first"), n_roles=("role", "nunique"))
    for col, ncol in (("session_id", "n_sessions"), ("role", "n_roles")):
        bad = agents[agents[ncol] > 1]
        if len(bad):
            aid = bad.index[0]
            pos = int(np.flatnonzero(((out["agent_id"] == aid) & (out[col] != agents.at[aid, col])).to_numpy())[0])
            raise TraceError(source, _row_label(out, pos), col, f"agent {aid!r} appears with more than one {col}")
    parent = out["parent_agent_id"]
    sub = out["role"].isin(("worker", "reviewer")).to_numpy()
    fail(sub & parent.isna().to_numpy(), "parent_agent_id", "a {role} request must name its parent agent")
    fail(~sub & parent.notna().to_numpy(), "parent_agent_id",
         "a {role} request must not name a parent agent (got {parent_agent_id!r})")
    known = set(zip(out["session_id"], out["agent_id"]))
    has_parent = parent.notna().to_numpy()
    unknown = np.array([hp and (s, p) not in known for hp, s, p in zip(has_parent, out["session_id"], parent)])
    fail(unknown, "parent_agent_id", "parent agent {parent_agent_id!r} has no request in session {session_id!r}")
    return out


def _check_float_opt(df: pd.DataFrame, col: str, source: str) -> pd.Series:
    s = df[col]
    vals = pd.to_numeric(s, errors="coerce")
    bad = vals.isna().to_numpy() & s.notna().to_numpy()
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise TraceError(source, _row_label(df, pos), col, f"expected a number, got {s.iloc[pos]!r}")
    return vals.astype(float)


def validate_spawns(df: pd.DataFrame, requests: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Check spawn records: columns, types, and that each names a sub-agent present in the trace."""
    if len(df) == 0 and not set(SPAWN_COLUMNS) <= set(df.columns):
        return empty_spawns()
    missing = [c for c in SPAWN_COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(source + " [spawns]", "(header)", missing[0], f"required column missing (all: {missing})")
    df = df.reset_index(drop=True)
    src = source + " [spawns]"
    out = pd.DataFrame(index=df.index)
    for col, kind in SPAWN_COLUMNS.items():
        if col == "context":  # text or a token count
            bad = np.array([not isinstance(v, (str, int, np.integer)) or isinstance(v, bool) for v in df[col]])
            if bad.any():
                pos = int(np.flatnonzero(bad)[0])
                raise TraceError(src, _row_label(df, pos), col, f"expected text or a token count, got {df[col].iloc[pos]!r}")
            out[col] = df[col].astype(object)
        else:
            out[col] = _check_column(df, col, kind, src)
    for col in df.columns:
        if col not in out.columns:
            out[col] = df[col]
    bad_role = ~out["role"].isin(("worker", "reviewer"))
    if bad_role.any():
        pos = int(np.flatnonzero(bad_role.to_numpy())[0])
        raise TraceError(src, _row_label(out, pos), "role", f"a spawn record's role must be worker or reviewer, got {out['role'].iloc[pos]!r}")
    dup = out["agent_id"].duplicated().to_numpy()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        raise TraceError(src, _row_label(out, pos), "agent_id", "more than one spawn record for this agent")
    agents = requests.drop_duplicates("agent_id").set_index("agent_id")
    # vectorized cross-checks against the agents the requests define (first failing row is reported)
    known = out["agent_id"].isin(agents.index).to_numpy()
    _fail_first(~known, out, src, "agent_id", lambda r: f"spawned agent {r.agent_id!r} has no request in the trace")
    a = agents.reindex(out["agent_id"])
    checks = (("session_id", "session_id", "agent {agent_id!r} runs in session {req!r}"),
              ("parent_agent_id", "parent_agent_id", "requests give parent {req!r}, spawn record {rec!r}"),
              ("role", "role", "requests give role {req!r}, spawn record {rec!r}"))
    for col, acol, msg in checks:
        req_vals, rec_vals = a[acol].to_numpy(dtype=object), out[col].to_numpy(dtype=object)
        bad = req_vals != rec_vals
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise TraceError(src, _row_label(out, pos), col,
                             msg.format(agent_id=out["agent_id"].iloc[pos], req=req_vals[pos], rec=rec_vals[pos]))
    _fail_first(~out["spawn_request_id"].isin(set(requests["request_id"])).to_numpy(), out, src, "spawn_request_id",
                lambda r: f"unknown request {r.spawn_request_id!r}")
    # every sub-agent seen in requests needs its spawn record when any spawn records are given
    if len(out):
        sub_agents = requests.loc[requests["role"].isin(("worker", "reviewer")), "agent_id"].unique()
        lacking = sorted(set(sub_agents) - set(out["agent_id"]))
        if lacking:
            pos = int(np.flatnonzero((requests["agent_id"] == lacking[0]).to_numpy())[0])
            raise TraceError(source, _row_label(requests, pos), "agent_id", "sub-agent has no spawn record")
    return out


def _fail_first(mask: np.ndarray, df: pd.DataFrame, source: str, col: str, msg) -> None:
    """Raise a TraceError for the first row where ``mask`` holds (``msg(row)`` says what is wrong)."""
    if mask.any():
        pos = int(np.flatnonzero(mask)[0])
        raise TraceError(source, _row_label(df, pos), col, msg(df.iloc[pos]))


# ------------------------------------------------------------------------------------------------
# I/O
# ------------------------------------------------------------------------------------------------


def iter_json_lines(lines: Iterable[str], source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-empty JSON line; a bad line raises a TraceError naming it."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(source, f"line {lineno}", "(json)", f"not valid JSON: {e.msg}") from None
        if not isinstance(rec, dict):
            raise TraceError(source, f"line {lineno}", "(json)", "expected a JSON object")
        yield lineno, rec


def _read_jsonl(path: Path) -> pd.DataFrame:
    with _open_maybe_gzip(path) as fh:
        return pd.DataFrame([rec for _, rec in iter_json_lines(fh, str(path))])


def _open_maybe_gzip(path: Path):
    import gzip

    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return _read_jsonl(path)


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Load a trace.

    ``path`` is a directory holding ``requests.{jsonl,jsonl.gz,parquet}`` and optionally
    ``spawns.{...}``, or a single requests file (spawns then read from a sibling
    ``<stem>.spawns.<ext>`` when present).
    """
    p = Path(path)
    if p.is_dir():
        req_path = _find(p, "requests")
        spawn_path = _find(p, "spawns", required=False)
    else:
        if not p.exists():
            raise FileNotFoundError(f"no trace at {p}")
        req_path = p
        stem = p.name.split(".")[0]
        spawn_path = next((c for c in p.parent.glob(stem + ".spawns.*")), None)
    req = _read_table(req_path)
    sp = _read_table(spawn_path) if spawn_path else empty_spawns()
    requests = validate_requests(req, str(req_path))
    spawns = validate_spawns(sp, requests, str(spawn_path) if spawn_path else str(req_path))
    return Trace(requests, spawns, str(p))


def _find(d: Path, stem: str, required: bool = True) -> Path | None:
    for ext in (".parquet", ".jsonl", ".jsonl.gz"):
        if (d / (stem + ext)).exists():
            return d / (stem + ext)
    if required:
        raise FileNotFoundError(f"{d}: no {stem}.parquet, {stem}.jsonl or {stem}.jsonl.gz")
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write(path: Path, write: Any) -> None:
    """Write through a temporary file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the mode open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_table(df: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        atomic_write(path, lambda t: df.to_parquet(t, index=False))
    else:
        def w(t: Path) -> None:
            with open(t, "w", encoding="utf-8") as fh:
                for rec in df.to_dict(orient="records"):
                    fh.write(json.dumps({k: _jsonable(v) for k, v in rec.items()}) + "\n")
        atomic_write(path, w)


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return None if np.isnan(v) else float(v)
    if isinstance(v, float) and np.isnan(v):
        return None
    return v


def write_trace(trace: Trace, directory: str | os.PathLike[str], fmt: str = "parquet") -> Path:
    """Write ``requests.<fmt>`` and ``spawns.<fmt>`` into ``directory`` (atomically, each file)."""
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"format must be 'parquet' or 'jsonl', not {fmt!r}")
    d = Path(directory)
    _write_table(trace.requests, d / f"requests.{fmt}")
    _write_table(trace.spawns, d / f"spawns.{fmt}")
    return d
