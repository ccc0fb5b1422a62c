"""The trace contract's schema (docs/design.md §2): roles, required and optional columns, the count
bound, :class:`TraceError`, and the vectorized validation of request tables, spawn records and
tool-class maps.  Every failure names the source, the record (a JSONL line, else a row) and the field;
nothing is dropped or coerced.  What the rules check of session order, and what they cannot see (a
swap of one agent's rows inside a turn of a trace without times): docs/design.md §2."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.api.types import infer_dtype

from lachesis.config import TOOL_CLASSES

ROLES = ("single", "lead", "worker", "reviewer")
#: Roles of a session's root agent (no parent) and of a spawned sub-agent (one spawn record each).
ROOT_ROLES = ROLES[:2]
SUBAGENT_ROLES = ROLES[2:]

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
    # of the matched prefix, tokens no earlier request of this agent wrote (a prefix cache shared across
    # agents or sessions, e.g. a common system prompt); they belong to no segment (docs/design.md §2)
    "shared_prefix_tokens": "int",
    # how far a matched prefix may fall short of the previous request's input and still continue the same
    # segment (a provider cache's behaviour; lachesis.analysis.segments, "Provider caches"); absent = 0, exact
    "cache_tolerance_tokens": "int",
    # True: a request the adapter built from a sub-agent's recorded totals (its steps are not in the source):
    # it carries the sub-agent's tokens and its t_start/t_end span the recorded duration, which the reference
    # clock charges instead of the decode time (lachesis.traces.clock); absent = False for every row
    "synthetic": "bool",
}
#: The optional file beside a trace's tables that names the tool class of each tool (docs/design.md §2).
TOOL_CLASS_FILE = "tool_classes.json"
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


def empty_spawns() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64" if k == "int" else "object")
                         for c, k in SPAWN_COLUMNS.items()})


#: Exclusive upper bound of every token and count field.  ASSUMPTION: no request holds 2**31 tokens
#: (about 2.1 billion; context windows are below 10**8), so a larger value is a unit or encoding
#: error; the bound also keeps a product of two counts (Eq. 3's tokens x output length) inside int64.
MAX_COUNT = 2 ** 31

_NUMBER_KINDS = {"integer", "floating", "mixed-integer-float", "empty"}


class Rows:
    """How a row is named in an error: ``line N`` for JSONL (from ``df.attrs['line']``), else ``row N``."""

    def __init__(self, df: pd.DataFrame, lines: Sequence[int] | np.ndarray | None = None):
        self.df = df
        self.lines = np.asarray(lines) if lines is not None and len(lines) == len(df) else None

    def label(self, pos: int) -> str:
        where = f"line {int(self.lines[pos])}" if self.lines is not None else str(pos)
        for key in ("request_id", "agent_id"):
            if key in self.df.columns:
                return f"{where} ({key}={self.df[key].iloc[pos]!r})"
        return where

    def fail(self, mask: np.ndarray, source: str, col: str, problem: str | Callable[[int], str]) -> None:
        """Raise for the first row where ``mask`` holds; ``problem(pos)`` (or a string) says what is wrong."""
        if mask.any():
            pos = int(np.flatnonzero(mask)[0])
            raise TraceError(source, self.label(pos), col, problem(pos) if callable(problem) else problem)


def _first_bad(s: pd.Series, ok: Any) -> int:
    """Position of the first value failing ``ok`` (only called once a vectorized check has failed; if
    no value fails, the column's type is one the vectorized check does not know: the first row)."""
    return next((i for i, v in enumerate(s.tolist()) if not ok(v)), 0)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _nulls(s: pd.Series) -> np.ndarray:
    return s.isna().to_numpy(dtype=bool)


def _check_str(s: pd.Series, col: str, nullable: bool, rows: Rows, source: str) -> pd.Series:
    null = _nulls(s)
    if not nullable:
        rows.fail(null, source, col, "missing value")
    present = s.cat.categories if isinstance(s.dtype, pd.CategoricalDtype) else s[~null]
    if len(present) and infer_dtype(present, skipna=True) != "string":
        pos = _first_bad(s, lambda v: isinstance(v, str) or (nullable and pd.isna(v)))
        raise TraceError(source, rows.label(pos), col, f"expected a string, got {s.iloc[pos]!r}")
    return pd.Series(s.to_numpy(dtype=object, na_value=None), index=s.index, dtype=object)


def _check_number(s: pd.Series, col: str, integer: bool, nullable: bool, rows: Rows, source: str) -> pd.Series:
    """A numeric column, alike for JSONL and Parquet: numbers only (no strings or booleans, whatever the
    column's dtype), finite; an integer field holds whole numbers in ``[0, MAX_COUNT)``."""
    null = _nulls(s)
    if not nullable:
        rows.fail(null, source, col, "missing value (null or NaN)")
    if infer_dtype(s, skipna=True) not in _NUMBER_KINDS or s.dtype == bool:
        pos = _first_bad(s, lambda v: _is_number(v) or (nullable and v is None))
        raise TraceError(source, rows.label(pos), col, f"expected a number, got {s.iloc[pos]!r}")
    try:
        vals = s.to_numpy(dtype=float, na_value=np.nan)
    except OverflowError:  # a Python integer beyond float range (JSON allows any length)
        pos = _first_bad(s, lambda v: abs(v) < MAX_COUNT if isinstance(v, int) else True)
        raise TraceError(source, rows.label(pos), col,
                         f"out of range: a {len(str(s.iloc[pos]))}-digit integer (a count must be below 2**31, "
                         "schema.MAX_COUNT)") from None
    shown = lambda p: repr(_plain(s.iloc[p]))  # noqa: E731  (the value as the file gave it)
    rows.fail(~null & ~np.isfinite(vals), source, col, lambda p: f"must be a finite number, got {shown(p)}")
    if not integer:
        return pd.Series(vals, index=s.index)
    rows.fail(vals != np.floor(vals), source, col, lambda p: f"expected an integer, got {shown(p)}")
    rows.fail(vals < 0, source, col, lambda p: f"must be >= 0, got {shown(p)}")
    rows.fail(vals >= MAX_COUNT, source, col,
              lambda p: f"out of range: {shown(p)} (a count must be below 2**31, schema.MAX_COUNT)")
    return pd.Series(vals.astype(np.int64), index=s.index)


def _check_bool(s: pd.Series, col: str, rows: Rows, source: str) -> pd.Series:
    """A true/false column (JSON true/false, a Parquet boolean column); no numbers or strings."""
    rows.fail(_nulls(s), source, col, "missing value")
    if s.dtype != bool:
        pos = _first_bad(s, lambda v: isinstance(v, (bool, np.bool_)))
        raise TraceError(source, rows.label(pos), col, f"expected true or false, got {s.iloc[pos]!r}")
    return s.astype(bool)


def _check_list(s: pd.Series, col: str, rows: Rows, source: str) -> pd.Series:
    """A list of strings per row (a JSON array, or a Parquet list column), checked through one pyarrow
    conversion; the slow per-row search only runs to name the first bad row."""
    def ok(v: Any) -> bool:
        return isinstance(v, (list, tuple, np.ndarray)) and all(isinstance(x, str) for x in v)

    if not len(s):
        return pd.Series([], index=s.index, dtype=object)
    try:
        arr = pa.array(s.to_numpy(dtype=object), from_pandas=True)
        good = (pa.types.is_list(arr.type) and
                (pa.types.is_string(arr.type.value_type) or pa.types.is_null(arr.type.value_type))
                and pc.list_flatten(arr).null_count == 0)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr, good = None, False
    if arr is not None and good:
        rows.fail(arr.is_null().to_numpy(zero_copy_only=False), source, col, "missing value")
        return pd.Series(arr.to_pylist(), index=s.index, dtype=object)
    if all(ok(v) for v in s.tolist()):  # a list-like pyarrow does not convert (rare): accept it as Python lists
        return pd.Series([list(v) for v in s.tolist()], index=s.index, dtype=object)
    pos = _first_bad(s, ok)
    v = s.iloc[pos]
    if v is None or (isinstance(v, float) and np.isnan(v)):
        raise TraceError(source, rows.label(pos), col, "missing value")
    raise TraceError(source, rows.label(pos), col, f"expected a list of strings, got {v!r}")


#: The largest provider-cache tolerance (docs/design.md §3, "Provider caches"): a cache read falls a few tokens
#: short of the previous input (1–14 measured on Claude Code); a tolerance of more than 64 KV blocks would
#: read real discards (≥ 162 tokens measured) as the same context continuing.
MAX_CACHE_TOLERANCE = 1024


def cache_tolerance(v: object) -> int:
    """A provider-cache tolerance (docs/design.md §3): a whole number of tokens in ``[0, MAX_CACHE_TOLERANCE]``,
    else a one-line ValueError."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) <= MAX_CACHE_TOLERANCE:
        raise ValueError(f"cache_tolerance_tokens: expected a whole number of tokens in [0, {MAX_CACHE_TOLERANCE}] "
                         f"(schema.MAX_CACHE_TOLERANCE), got {v!r}")
    return int(v)


def _framed(df: pd.DataFrame, columns: Mapping[str, str], source: str) -> tuple[pd.DataFrame, Rows, pd.DataFrame]:
    """A table's required columns checked (a missing one is refused, naming it), its rows renumbered with their
    source lines kept, and the empty typed frame the checks fill."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise TraceError(source, "(header)", missing[0], f"required column missing (all missing: {missing})")
    lines = df.attrs.get("line")
    df = df.reset_index(drop=True)
    return df, Rows(df, lines), pd.DataFrame(index=df.index)


def _check_column(df: pd.DataFrame, col: str, kind: str, rows: Rows, source: str) -> pd.Series:
    nullable = kind.endswith("?")
    kind = kind.rstrip("?")
    if kind == "str":
        return _check_str(df[col], col, nullable, rows, source)
    if kind in ("int", "float"):
        return _check_number(df[col], col, kind == "int", nullable, rows, source)
    if kind == "list":
        return _check_list(df[col], col, rows, source)
    if kind == "bool":
        return _check_bool(df[col], col, rows, source)
    raise AssertionError(kind)


def validate_requests(df: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Check every row of a request table against the trace contract (docs/design.md §2); return a
    typed copy.  Vectorized: column checks, then the cross-field and cross-row rules."""
    df, rows, out = _framed(df, REQUEST_COLUMNS, source)
    for col, kind in REQUEST_COLUMNS.items():
        out[col] = _check_column(df, col, kind, rows, source)
    for col, kind in OPTIONAL_REQUEST_COLUMNS.items():
        if col in df.columns:  # optional floats may hold gaps (NaN); other optional columns are complete
            out[col] = _check_column(df, col, kind + ("?" if kind == "float" else ""), rows, source)
    for col in df.columns:  # keep user extras untouched
        if col not in out.columns:
            out[col] = df[col]
    check = _RequestRules(out, Rows(out, rows.lines), source)
    check.fields()
    check.agents()
    check.session_order()
    return out


class _RequestRules:
    """The cross-field and cross-row rules of a typed request table, each failure naming its first row."""

    def __init__(self, out: pd.DataFrame, rows: Rows, source: str) -> None:
        self.out, self.rows, self.source = out, rows, source
        self.mp = out["matched_prefix_tokens"].to_numpy()
        self.shared = (out["shared_prefix_tokens"].to_numpy() if "shared_prefix_tokens" in out
                       else np.zeros(len(out), np.int64))

    def fail(self, mask: np.ndarray, col: str, msg: str) -> None:
        """Fail at the first row of ``mask``; ``msg`` is formatted with that row's named columns."""
        out = self.out
        self.rows.fail(mask, self.source, col,
                       lambda p: msg.format(**{c: out[c].iloc[p] for c in out.columns if c in msg}))

    def fields(self) -> None:
        """Within a row: prefix within input, reasoning within output, a known role, a unique id, times in
        order (a synthetic request has both), a declared shared prefix within the matched prefix."""
        out, fail, mp = self.out, self.fail, self.mp
        inp = out["input_tokens"].to_numpy()
        outp, rs = out["output_tokens"].to_numpy(), out["reasoning_tokens"].to_numpy()
        fail(mp > inp, "matched_prefix_tokens", "matched prefix {matched_prefix_tokens} exceeds input {input_tokens}")
        fail(rs > outp, "reasoning_tokens", "reasoning {reasoning_tokens} exceeds output {output_tokens}")
        fail(~out["role"].isin(ROLES).to_numpy(), "role", "unknown role {role!r}; expected one of " + str(ROLES))
        dup = out["request_id"].duplicated().to_numpy()
        fail(dup, "request_id", "duplicate request id {request_id!r}")
        if "t_start" in out and "t_end" in out:
            ts, te = out["t_start"].to_numpy(), out["t_end"].to_numpy()
            fail(te < ts, "t_end", "t_end {t_end} precedes t_start {t_start}")
        if "synthetic" in out:
            syn = out["synthetic"].to_numpy(dtype=bool)
            fail(syn & ~out["role"].isin(SUBAGENT_ROLES).to_numpy(), "synthetic",
                 "a {role} request cannot be synthetic: only a sub-agent (worker or reviewer) is built from "
                 "recorded totals")
            for c in ("t_start", "t_end"):
                have = np.isfinite(out[c].to_numpy(float)) if c in out else np.zeros(len(out), dtype=bool)
                fail(syn & ~have, c, "a synthetic request needs its t_start and t_end (the recorded duration the "
                                     "reference clock charges)")
        fail(self.shared > mp, "shared_prefix_tokens",
             "declared shared prefix {shared_prefix_tokens} exceeds the matched prefix {matched_prefix_tokens}")
        if "cache_tolerance_tokens" in out:
            fail(out["cache_tolerance_tokens"].to_numpy() > MAX_CACHE_TOLERANCE, "cache_tolerance_tokens",
                 "cache tolerance {cache_tolerance_tokens} exceeds " + f"{MAX_CACHE_TOLERANCE} tokens "
                 "(schema.MAX_CACHE_TOLERANCE: a provider cache falls a few tokens short, not more)")

    def agents(self) -> None:
        """An agent belongs to one session and has one role; a sub-agent's parent has requests in its session."""
        out, fail = self.out, self.fail
        agents = out.groupby("agent_id", sort=False).agg(
            session_id=("session_id", "first"), n_sessions=("session_id", "nunique"),
            role=("role", "first"), n_roles=("role", "nunique"))
        for col, ncol in (("session_id", "n_sessions"), ("role", "n_roles")):
            bad = agents[agents[ncol] > 1]
            if len(bad):
                aid = bad.index[0]
                pos = int(np.flatnonzero(((out["agent_id"] == aid) & (out[col] != agents.at[aid, col])).to_numpy())[0])
                raise TraceError(self.source, self.rows.label(pos), col,
                                 f"agent {aid!r} appears with more than one {col}")
        parent = out["parent_agent_id"]
        sub = out["role"].isin(SUBAGENT_ROLES).to_numpy()
        fail(sub & parent.isna().to_numpy(), "parent_agent_id", "a {role} request must name its parent agent")
        fail(~sub & parent.notna().to_numpy(), "parent_agent_id",
             "a {role} request must not name a parent agent (got {parent_agent_id!r})")
        known = pd.MultiIndex.from_arrays([out["session_id"], out["agent_id"]])
        asked = pd.MultiIndex.from_arrays([out["session_id"], parent])
        unknown = parent.notna().to_numpy() & ~asked.isin(known)
        fail(unknown, "parent_agent_id", "parent agent {parent_agent_id!r} has no request in session {session_id!r}")

    def session_order(self) -> None:
        """Session order per agent: turns never decrease, start times never go back, and a matched prefix
        reuses at most the agent's earlier context (its previous request's input + output) plus the
        declared shared prefix; more means rows out of order (Appendix B: "aligned in session order") or
        an undeclared external prefix.  Where no start times witness the order (the row's or its agent's
        previous row's), the declared shared prefix is the start of the context the agent's first request
        opened, so the bound is the larger of the two, not their sum (docs/design.md §2)."""
        out, rows, source, mp, shared = self.out, self.rows, self.source, self.mp, self.shared
        by_agent = out["agent_id"].to_numpy()
        turn = out["turn"].to_numpy()
        prev_turn = pd.Series(turn).groupby(by_agent, sort=False).shift(1, fill_value=0).to_numpy()
        rows.fail(turn < prev_turn, source, "turn",
                  lambda p: f"turn {turn[p]} follows turn {prev_turn[p]} of agent {by_agent[p]!r}: "
                            "rows out of session order")
        timed = np.zeros(len(out), dtype=bool)  # the row and its agent's previous row both have a start time
        if "t_start" in out:  # an agent's requests run one after another: its start times never go back
            ts = out["t_start"].to_numpy(dtype=float)
            prev_ts = pd.Series(ts).groupby(by_agent, sort=False).shift(1).to_numpy()
            timed = np.isfinite(ts) & np.isfinite(prev_ts)
            prev_id = out["request_id"].groupby(by_agent, sort=False).shift(1).to_numpy()
            with np.errstate(invalid="ignore"):
                back = ts < prev_ts  # NaN (a time not recorded) compares False: nothing to check
            rows.fail(back, source, "t_start",
                      lambda p: f"t_start {float(ts[p])!r} precedes t_start {float(prev_ts[p])!r} of the request "
                                f"before it of agent {by_agent[p]!r} ({prev_id[p]!r}): rows out of session order")
        inp_out = out["input_tokens"].to_numpy() + out["output_tokens"].to_numpy()
        earlier = pd.Series(inp_out).groupby(by_agent, sort=False).shift(1, fill_value=0).to_numpy()
        rows.fail(mp > earlier + shared, source, "matched_prefix_tokens",
                  lambda p: f"matched prefix {mp[p]} exceeds the {earlier[p]} tokens of earlier context of agent "
                            f"{by_agent[p]!r} plus {shared[p]} declared shared_prefix_tokens: rows out of session "
                            "order, or a prefix from outside this agent that the shared_prefix_tokens column does "
                            "not declare")
        rows.fail(~timed & (mp > np.maximum(earlier, shared)), source, "matched_prefix_tokens",
                  lambda p: f"matched prefix {mp[p]} exceeds both the {earlier[p]} tokens of earlier context of agent "
                            f"{by_agent[p]!r} and its {shared[p]} declared shared_prefix_tokens, and no start times "
                            "order these rows: rows out of session order")


def validate_spawns(df: pd.DataFrame, requests: pd.DataFrame, source: str = "<memory>") -> pd.DataFrame:
    """Check spawn records: columns, types, and that each names a sub-agent present in the trace."""
    if len(df) == 0 and not set(SPAWN_COLUMNS) <= set(df.columns):
        return empty_spawns()
    src = source + " [spawns]"
    df, rows, out = _framed(df, SPAWN_COLUMNS, src)
    for col, kind in SPAWN_COLUMNS.items():
        out[col] = _check_context(df[col], rows, src) if col == "context" else _check_column(df, col, kind, rows, src)
    for col in df.columns:
        if col not in out.columns:
            out[col] = df[col]
    rows = Rows(out, rows.lines)
    rows.fail(~out["role"].isin(SUBAGENT_ROLES).to_numpy(), src, "role",
              lambda p: f"a spawn record's role must be worker or reviewer, got {out['role'].iloc[p]!r}")
    rows.fail(out["agent_id"].duplicated().to_numpy(), src, "agent_id", "more than one spawn record for this agent")
    agents = requests.drop_duplicates("agent_id").set_index("agent_id")
    rows.fail(~out["agent_id"].isin(agents.index).to_numpy(), src, "agent_id",
              lambda p: f"spawned agent {out['agent_id'].iloc[p]!r} has no request in the trace")
    a = agents.reindex(out["agent_id"])
    checks = (("session_id", "agent {agent_id!r} runs in session {req!r}"),
              ("parent_agent_id", "requests give parent {req!r}, spawn record {rec!r}"),
              ("role", "requests give role {req!r}, spawn record {rec!r}"))
    for col, msg in checks:
        req_vals, rec_vals = a[col].to_numpy(dtype=object), out[col].to_numpy(dtype=object)

        def why(p: int, msg: str = msg, req_vals: np.ndarray = req_vals, rec_vals: np.ndarray = rec_vals) -> str:
            return msg.format(agent_id=out["agent_id"].iloc[p], req=req_vals[p], rec=rec_vals[p])

        rows.fail(req_vals != rec_vals, src, col, why)
    rows.fail(~out["spawn_request_id"].isin(requests["request_id"]).to_numpy(), src, "spawn_request_id",
              lambda p: f"unknown request {out['spawn_request_id'].iloc[p]!r}")
    return out


def _check_context(s: pd.Series, rows: Rows, source: str) -> pd.Series:
    """A spawn record's context: text or a token count (docs/design.md §2)."""
    kind = infer_dtype(s, skipna=False)
    if kind in ("integer", "empty") and s.dtype != bool:
        _check_number(s, "context", True, False, rows, source)
    elif kind != "string":  # a mix: every value text or a valid count
        def ok(v: Any) -> bool:
            return isinstance(v, str) or bool(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                              and 0 <= v < MAX_COUNT)
        pos = _first_bad(s, ok) if not s.map(ok).all() else None
        if pos is not None:
            raise TraceError(source, rows.label(pos), "context",
                             f"expected text or a token count in [0, {MAX_COUNT}), got {s.iloc[pos]!r}")
    return pd.Series(s.to_numpy(dtype=object), index=s.index, dtype=object)


def validate_tool_classes(tool_class_of: Any, source: str) -> dict[str, str]:
    """A tool-class map checked against the trace contract: tool name (text) -> a class of
    ``config.TOOL_CLASSES``; a TraceError names the source, the tool and what is wrong."""
    known = sorted(tc.name for tc in TOOL_CLASSES)
    if not isinstance(tool_class_of, Mapping):
        raise TraceError(source, "(file)", "(json)", "expected an object mapping tool names to tool classes, got "
                         f"{type(tool_class_of).__name__}")
    for name, cls_ in tool_class_of.items():
        if not isinstance(name, str) or cls_ not in known:
            raise TraceError(source, f"tool {name!r}", "class", f"unknown tool class {cls_!r}; expected one of {known}")
    return dict(tool_class_of)
