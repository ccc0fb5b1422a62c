"""The trace contract (docs/design.md §2): every validation error of lachesis.traces.trace, and the JSONL/Parquet
round trip."""

from __future__ import annotations

import gzip
import importlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import one_line as _one_line
from fixture_paths import REPO
from sim_fixtures import chain

from lachesis.cli import main
from lachesis.traces import schema
from lachesis.traces import trace as T
from lachesis.traces.schema import (
    REQUEST_COLUMNS,
    SPAWN_COLUMNS,
    TraceError,
    validate_requests,
)
from lachesis.traces.trace import (
    Trace,
    read_trace,
    tokens_processed,
    tokens_written,
    write_trace,
)


def base_requests() -> pd.DataFrame:
    rows = [
        dict(session_id="S", request_id="l0", agent_id="L", parent_agent_id=None, role="lead", turn=0,
             input_tokens=100, matched_prefix_tokens=0, output_tokens=10, reasoning_tokens=4,
             tool_names=["spawn_subagent"], n_observations=1),
        dict(session_id="S", request_id="w0", agent_id="W", parent_agent_id="L", role="worker", turn=0,
             input_tokens=50, matched_prefix_tokens=0, output_tokens=20, reasoning_tokens=0,
             tool_names=["grep"], n_observations=1),
        dict(session_id="S", request_id="l1", agent_id="L", parent_agent_id=None, role="lead", turn=0,
             input_tokens=130, matched_prefix_tokens=110, output_tokens=5, reasoning_tokens=5,
             tool_names=[], n_observations=0),
    ]
    return pd.DataFrame(rows)


def base_spawns() -> pd.DataFrame:
    return pd.DataFrame([dict(session_id="S", agent_id="W", parent_agent_id="L", role="worker",
                              spawn_request_id="l0", instruction="find it", context="ctx", tools=["grep"],
                              model="m", spawn_index=0)])


def test_valid_trace_and_token_counts():
    t = Trace.from_frames(base_requests(), base_spawns())
    # written = input + output - matched: 110, 70, 25; processed = input + output: 110, 70, 135
    assert tokens_written(t.requests).tolist() == [110, 70, 25]
    assert tokens_processed(t.requests).tolist() == [110, 70, 135]
    assert list(t.sessions) == ["S"]
    assert len(t.subset(["nope"]).requests) == 0


def _set(col, pos, value):
    def f(df):
        df = df.copy()
        df[col] = df[col].astype(object)
        df.at[pos, col] = value
        return df
    return f


REQUEST_CASES = [  # (mutation, field, words of the problem)
    (lambda d: d.drop(columns="turn"), "turn", "required column missing"),
    (_set("session_id", 0, None), "session_id", "missing value"),
    (_set("agent_id", 1, 7), "agent_id", "expected a string"),
    (_set("input_tokens", 0, "many"), "input_tokens", "expected a number"),
    (_set("output_tokens", 0, True), "output_tokens", "expected a number"),
    (_set("turn", 2, 1.5), "turn", "expected an integer"),
    (_set("n_observations", 2, -1), "n_observations", "must be >= 0"),
    (_set("tool_names", 1, "grep"), "tool_names", "expected a list of strings"),
    (_set("tool_names", 1, [3]), "tool_names", "expected a list of strings"),
    (_set("matched_prefix_tokens", 2, 200), "matched_prefix_tokens", "exceeds input"),
    (_set("reasoning_tokens", 1, 21), "reasoning_tokens", "exceeds output"),
    (_set("role", 0, "boss"), "role", "unknown role"),
    (_set("request_id", 2, "l0"), "request_id", "duplicate request id"),
    (_set("session_id", 2, "T"), "session_id", "more than one session_id"),
    (_set("role", 2, "single"), "role", "more than one role"),
    (_set("parent_agent_id", 1, None), "parent_agent_id", "must name its parent"),
    (_set("parent_agent_id", 0, "W"), "parent_agent_id", "must not name a parent"),
    (_set("parent_agent_id", 1, "X"), "parent_agent_id", "has no request in session"),
    (lambda d: d.assign(t_start=[0.0, 1.0, 2.0], t_end=[1.0, 0.5, 3.0]), "t_end", "precedes t_start"),
    (lambda d: d.assign(t_start=[0.0, "soon", 2.0]), "t_start", "expected a number"),
    (lambda d: d.assign(benchmark=["a", 3, "a"]), "benchmark", "expected a string"),
]


@pytest.mark.parametrize("mutate, field, words", REQUEST_CASES, ids=[f"{c[1]}-{c[2]}" for c in REQUEST_CASES])
def test_request_errors_name_the_field(mutate, field, words):
    with pytest.raises(TraceError) as e:
        Trace.from_frames(mutate(base_requests()), base_spawns(), source="t.jsonl")
    assert e.value.field == field
    assert words in e.value.problem
    assert e.value.source == "t.jsonl" and str(e.value).startswith("t.jsonl: record ")


def test_request_error_names_the_row():
    with pytest.raises(TraceError) as e:
        validate_requests(_set("output_tokens", 2, -3)(base_requests()), "x")
    assert e.value.record == "2 (request_id='l1')"


SPAWN_CASES = [
    (lambda s, r: s.drop(columns="instruction"), "instruction", "required column missing"),
    (lambda s, r: _set("context", 0, 1.5)(s), "context", "expected text or a token count"),
    (lambda s, r: _set("role", 0, "lead")(s), "role", "must be worker or reviewer"),
    (lambda s, r: pd.concat([s, s], ignore_index=True), "agent_id", "more than one spawn record"),
    (lambda s, r: _set("agent_id", 0, "Z")(s), "agent_id", "has no request in the trace"),
    (lambda s, r: _set("session_id", 0, "T")(s), "session_id", "runs in session"),
    (lambda s, r: _set("parent_agent_id", 0, "W")(s), "parent_agent_id", "requests give parent"),
    (lambda s, r: _set("role", 0, "reviewer")(s), "role", "requests give role"),
    (lambda s, r: _set("spawn_request_id", 0, "zz")(s), "spawn_request_id", "unknown request"),
    (lambda s, r: _set("spawn_index", 0, "first")(s), "spawn_index", "expected a number"),
    (lambda s, r: _set("tools", 0, None)(s), "tools", "missing value"),
]


@pytest.mark.parametrize("mutate, field, words", SPAWN_CASES, ids=[f"{c[1]}-{c[2]}" for c in SPAWN_CASES])
def test_spawn_errors_name_the_field(mutate, field, words):
    r = base_requests()
    with pytest.raises(TraceError) as e:
        Trace.from_frames(r, mutate(base_spawns(), r), source="t.jsonl")
    assert e.value.field == field
    assert words in e.value.problem
    assert e.value.source == "t.jsonl [spawns]"


def test_subagent_without_spawn_record_when_spawns_given():
    r = base_requests()
    extra = r.iloc[[1]].assign(request_id="v0", agent_id="V")  # a second worker, no spawn record
    with pytest.raises(TraceError) as e:
        Trace.from_frames(pd.concat([r, extra], ignore_index=True), base_spawns())
    assert e.value.field == "agent_id" and "no spawn record" in e.value.problem


def test_subagent_without_any_spawn_record_is_rejected():
    """The reference clock starts a sub-agent at its spawn request: a trace of workers without spawn
    records is rejected even when it gives no spawn record at all."""
    with pytest.raises(TraceError) as e:
        Trace.from_frames(base_requests())
    assert e.value.field == "agent_id" and "no spawn record" in e.value.problem and "w0" in str(e.value.record)


def test_spawn_tree_of_a_trace():
    r = base_requests()
    r = pd.concat([r.iloc[:1], r.iloc[[1]].assign(request_id="v0", agent_id="V", role="reviewer"), r.iloc[1:]],
                  ignore_index=True)  # l0 spawns the reviewer V (record first) and the worker W
    sp = pd.concat([base_spawns().assign(agent_id="V", role="reviewer"), base_spawns()], ignore_index=True)
    tree = Trace.from_frames(r, sp).spawn_tree()
    assert tree.rows == {"L": [0, 3], "V": [1], "W": [2]}
    assert tree.roots == {"S": "L"}
    assert tree.children == {0: ("V", "W")}  # in the order of the spawn records
    assert tree.spawned_by == {"V": 0, "W": 0} and tree.record == {"V": 0, "W": 1}


@pytest.mark.parametrize("mutate, field, words", [
    (lambda sp: sp.assign(spawn_request_id="w0"), "spawn_request_id", "belongs to agent 'W', not to the parent"),
    (lambda sp: sp.assign(spawn_request_id="l1"), "spawn_request_id", "has a request before its spawn request"),
])
def test_spawn_tree_errors_name_the_spawn_line(tmp_path, mutate, field, words):
    d = tmp_path / "t"
    d.mkdir()
    base_requests().to_json(d / "requests.jsonl", orient="records", lines=True)
    mutate(base_spawns()).to_json(d / "spawns.jsonl", orient="records", lines=True)
    with pytest.raises(TraceError) as e:
        read_trace(d)
    assert e.value.field == field and words in e.value.problem
    assert e.value.source.endswith("spawns.jsonl [spawns]") and e.value.record == "line 1 (agent_id='W')"


def test_spawn_tree_checks_a_trace_built_without_validation():
    t = Trace.from_frames(base_requests(), base_spawns())
    with pytest.raises(TraceError) as e:
        Trace(t.requests, t.spawns.assign(spawn_request_id="l1")).spawn_tree()
    assert e.value.field == "spawn_request_id" and e.value.record == "0 (agent_id='W')"


def test_tool_class_map_travels_with_the_trace(tmp_path):
    tr = Trace.from_frames(base_requests(), base_spawns(), tool_class_of={"grep": "virtual_env"})
    d = write_trace(tr, tmp_path / "t", fmt="jsonl")
    assert json.loads((d / "tool_classes.json").read_text()) == {"grep": "virtual_env"}
    assert read_trace(d).tool_class_of == {"grep": "virtual_env"}
    assert tr.subset(["S"]).tool_class_of == {"grep": "virtual_env"}
    write_trace(Trace.from_frames(base_requests(), base_spawns()), d, fmt="jsonl")  # no map: the old one goes
    assert not (d / "tool_classes.json").exists() and read_trace(d).tool_class_of == {}
    single = tmp_path / "x.jsonl"  # a single requests file finds <stem>.tool_classes.json beside it
    (d / "requests.jsonl").rename(single)
    (d / "spawns.jsonl").rename(tmp_path / "x.spawns.jsonl")
    (tmp_path / "x.tool_classes.json").write_text('{"grep": "api"}')
    assert read_trace(single).tool_class_of == {"grep": "api"}


@pytest.mark.parametrize("text, record, field, words", [
    ('{"grep": "warp"}', "tool 'grep'", "class", "unknown tool class 'warp'"),
    ('["grep"]', "(file)", "(json)", "expected an object mapping tool names to tool classes"),
    ('{"grep": ', "line 1", "(json)", "not valid JSON"),
])
def test_tool_class_map_errors_name_the_file_and_tool(tmp_path, text, record, field, words):
    d = write_trace(Trace.from_frames(base_requests(), base_spawns()), tmp_path / "t", fmt="jsonl")
    (d / "tool_classes.json").write_text(text)
    with pytest.raises(TraceError) as e:
        read_trace(d)
    assert e.value.source.endswith("tool_classes.json") and e.value.record == record
    assert e.value.field == field and words in e.value.problem


def test_concat_merges_traces_and_refuses_two_classes_for_one_tool():
    r, sp = base_requests(), base_spawns()
    other = r.assign(session_id="T", request_id=r["request_id"] + "'", agent_id=r["agent_id"] + "'",
                     parent_agent_id=r["parent_agent_id"].map(lambda p: p + "'" if isinstance(p, str) else None))
    osp = sp.assign(session_id="T", agent_id="W'", parent_agent_id="L'", spawn_request_id="l0'")
    a = Trace.from_frames(r, sp, tool_class_of={"grep": "virtual_env"})
    b = Trace.from_frames(other, osp, tool_class_of={"ls": "virtual_env"})
    both = Trace.concat([a, b], "a+b")
    assert len(both.requests) == 6 and both.tool_class_of == {"grep": "virtual_env", "ls": "virtual_env"}
    assert both.spawn_tree().roots == {"S": "L", "T": "L'"}
    with pytest.raises(TraceError, match="class 'api' here, 'virtual_env'"):
        Trace.concat([a, Trace.from_frames(other, osp, tool_class_of={"grep": "api"})], "a+b")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_round_trip(tmp_path, fmt):
    r = base_requests().assign(benchmark="appworld", t_start=[0.0, 1.0, np.nan], t_end=[1.0, 2.0, np.nan])
    t = Trace.from_frames(r, base_spawns())
    d = write_trace(t, tmp_path / "tr", fmt=fmt)
    back = read_trace(d)
    pd.testing.assert_frame_equal(back.requests, t.requests, check_dtype=False)
    pd.testing.assert_frame_equal(back.spawns, t.spawns, check_dtype=False)
    # a single requests file finds its sibling spawns file
    (tmp_path / "one").mkdir()
    (d / f"requests.{fmt}").rename(tmp_path / "one" / f"x.{fmt}")
    (d / f"spawns.{fmt}").rename(tmp_path / "one" / f"x.spawns.{fmt}")
    again = read_trace(tmp_path / "one" / f"x.{fmt}")
    assert len(again.spawns) == 1 and len(again.requests) == 3


def test_gzip_jsonl_and_json_errors(tmp_path):
    rows = [{k: (v.item() if hasattr(v, "item") else v) for k, v in rec.items()}
            for rec in base_requests().iloc[[0]].to_dict(orient="records")]
    rows[0]["tool_names"] = []
    rows[0]["role"] = "single"
    p = tmp_path / "req.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(json.dumps(rows[0]) + "\n\n")
    assert len(read_trace(p).requests) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(TraceError) as e:
        read_trace(bad)
    assert e.value.record == "line 2" and e.value.field == "(json)"
    bad.write_text("[1, 2]\n")
    with pytest.raises(TraceError, match="expected a JSON object"):
        read_trace(bad)


def test_an_empty_file_two_candidates_and_a_non_utf8_byte_are_said_as_such(tmp_path):
    """An empty requests file is empty (not a file missing columns); a requests.parquet beside a requests.jsonl is
    refused naming both (not one picked and another blamed); a byte that is not UTF-8 names its line and offset,
    in a plain and in a compressed file."""
    d = tmp_path / "t"
    d.mkdir()
    (d / "requests.jsonl").write_text("")
    with pytest.raises(TraceError, match=r"requests\.jsonl: record \(file\): field '\(records\)': empty: no request"):
        read_trace(d)
    write_trace(Trace.from_frames(base_requests(), base_spawns()), d, fmt="jsonl")
    write_trace(Trace.from_frames(base_requests(), base_spawns()), d, fmt="parquet")
    with pytest.raises(TraceError, match=r"both requests\.parquet and requests\.jsonl: which is the trace"):
        read_trace(d)
    (d / "requests.parquet").unlink()
    with pytest.raises(TraceError, match=r"both spawns\.parquet and spawns\.jsonl"):
        read_trace(d)
    (d / "spawns.parquet").unlink()
    raw = (d / "requests.jsonl").read_bytes().split(b"\n")
    raw[1] = raw[1][:5] + b"\xff" + raw[1][5:]
    (d / "requests.jsonl").write_bytes(b"\n".join(raw))
    at = len(raw[0]) + 1 + 5
    with pytest.raises(TraceError, match=rf"record line 2: field '\(encoding\)': not UTF-8: byte 0xff at offset {at} "
                                         r"of the file \(column 6\)"):
        read_trace(d)
    gz = tmp_path / "x.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\n".join(raw)))
    with pytest.raises(TraceError, match=rf"x\.jsonl\.gz: record line 2: .* at offset {at} of the decompressed text"):
        read_trace(gz)


def test_io_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "missing.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "empty")
    with pytest.raises(ValueError):
        write_trace(Trace.from_frames(base_requests(), base_spawns()), tmp_path / "o", fmt="csv")


def test_contract_columns():
    assert set(REQUEST_COLUMNS) == {"session_id", "request_id", "agent_id", "parent_agent_id", "role", "turn",
                                    "input_tokens", "matched_prefix_tokens", "output_tokens", "reasoning_tokens",
                                    "tool_names", "n_observations"}
    assert "spawn_request_id" in SPAWN_COLUMNS and "instruction" in SPAWN_COLUMNS


# ------------------------------------------------------------------------------------------------
# Numbers out of range, JSONL and Parquet alike, session order
# ------------------------------------------------------------------------------------------------

def _single_rows() -> list[dict]:
    """One single-agent session of three requests in session order (each matches the previous context)."""
    rows, ctx = [], 0
    for i, (new, out) in enumerate(((100, 10), (40, 5), (30, 8))):
        rows.append(dict(session_id="S", request_id=f"r{i}", agent_id="A", parent_agent_id=None, role="single",
                         turn=0, input_tokens=ctx + new, matched_prefix_tokens=ctx, output_tokens=out,
                         reasoning_tokens=0, tool_names=["t"], n_observations=1))
        ctx += new + out
    return rows


def _write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in rows))


BAD_NUMBERS = [  # (JSON text of the value, words of the problem)
    ("1e30", "out of range"),
    ("Infinity", "must be a finite number"),
    ("-Infinity", "must be a finite number"),
    ("NaN", "missing value"),
    (str(2 ** 63), "out of range"),
    (str(2 ** 64), "out of range"),
    ("1" + "0" * 400, "out of range"),
    (str(2 ** 31), "out of range"),
    ("-5", "must be >= 0"),
    ("2.5", "expected an integer"),
    ('"12"', "expected a number"),
    ("true", "expected a number"),
]


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens", "matched_prefix_tokens", "reasoning_tokens",
                                   "turn", "n_observations"])
@pytest.mark.parametrize("text, words", BAD_NUMBERS, ids=[b[0][:12] for b in BAD_NUMBERS])
def test_bad_number_in_jsonl_names_line_and_field(tmp_path, field, text, words):
    p = tmp_path / "requests.jsonl"
    lines = [json.dumps(r) for r in _single_rows()]
    lines[1] = lines[1].replace(f'"{field}": {_single_rows()[1][field]}', f'"{field}": {text}')
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as e:
        read_trace(p)
    assert (e.value.field, e.value.record) == (field, "line 2 (request_id='r1')")
    assert words in e.value.problem


def test_the_largest_count_is_accepted():
    rows = _single_rows()
    rows[2]["output_tokens"] = 2 ** 31 - 1
    assert Trace.from_frames(pd.DataFrame(rows)).requests["output_tokens"].max() == 2 ** 31 - 1


PARQUET_VALUES = [  # (column values for request r1's field, words): the Parquet column takes the value's type
    (1e30, "out of range"), (np.inf, "must be a finite number"), (np.nan, "missing value"),
    (np.uint64(2 ** 63), "out of range"), (-5, "must be >= 0"), ("12", "expected a number"),
    (True, "expected a number"), (2.5, "expected an integer"),
]


@pytest.mark.parametrize("value, words", PARQUET_VALUES, ids=[repr(v[0]) for v in PARQUET_VALUES])
def test_parquet_and_jsonl_are_validated_alike(tmp_path, value, words):
    """The same bad value gives the same error from a Parquet file (typed columns) and a JSONL file."""
    field = "output_tokens"
    df = pd.DataFrame(_single_rows())
    col = [value if i == 1 else type(value)(v) if not isinstance(value, (bool, np.bool_)) else v % 2 == 0
           for i, v in enumerate(df[field])]
    df[field] = pd.Series(col)
    errors = []
    df.to_parquet(tmp_path / "requests.parquet", index=False)
    for path in (tmp_path / "requests.parquet", tmp_path / "r.jsonl"):
        if path.suffix == ".jsonl":
            _write_jsonl(path, [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                                for r in pd.read_parquet(tmp_path / "requests.parquet").to_dict("records")])
        with pytest.raises(TraceError) as e:
            read_trace(path)
        errors.append((e.value.field, e.value.problem))
        assert e.value.field == field and words in e.value.problem
    assert errors[0] == errors[1]


def test_parquet_string_columns_are_not_coerced(tmp_path):
    df = pd.DataFrame(_single_rows())
    df["input_tokens"] = df["input_tokens"].astype(str)  # a whole column of numeric strings
    df.to_parquet(tmp_path / "requests.parquet", index=False)
    with pytest.raises(TraceError) as e:
        read_trace(tmp_path / "requests.parquet")
    assert e.value.field == "input_tokens" and e.value.problem == "expected a number, got '100'"
    df = pd.DataFrame(_single_rows()).assign(t_start=["0.5", "1", "2"])
    with pytest.raises(TraceError) as e:
        Trace.from_frames(df)
    assert e.value.field == "t_start" and "expected a number" in e.value.problem


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
@pytest.mark.parametrize("tools, words, bad_row", [
    (["a", "b", "c"], "expected a list of strings, got 'a'", "r0"),  # a string column, not lists
    ([["a"], "b", ["c"]], "expected a list of strings, got 'b'", "r1"),
    ([["a"], [1], ["c"]], "expected a list of strings, got [1]", "r1"),
    ([["a"], ["b", None], ["c"]], "expected a list of strings, got", "r1"),
    ([["a"], None, ["c"]], "missing value", "r1"),
])
def test_tool_names_must_be_lists_of_strings(tmp_path, fmt, tools, words, bad_row):
    df = pd.DataFrame(_single_rows())
    df["tool_names"] = pd.Series(tools, dtype=object)
    path = tmp_path / f"requests.{fmt}"
    if fmt == "parquet":
        try:
            df.to_parquet(path, index=False)
        except Exception:  # pyarrow cannot even write a mixed column: the in-memory check must catch it
            path = None
    else:
        _write_jsonl(path, df.to_dict("records"))
    with pytest.raises(TraceError) as e:
        read_trace(path) if path else Trace.from_frames(df)
    assert e.value.field == "tool_names" and words in e.value.problem
    assert f"request_id='{bad_row}'" in e.value.record


def test_parquet_list_columns_and_categoricals_load(tmp_path):
    df = pd.DataFrame(_single_rows()).assign(benchmark=pd.Categorical(["x", "x", "y"]))
    df.to_parquet(tmp_path / "requests.parquet", index=False)
    t = read_trace(tmp_path / "requests.parquet")
    assert t.requests["tool_names"].tolist() == [["t"]] * 3 and t.requests["benchmark"].tolist() == ["x", "x", "y"]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_swapped_rows_of_a_session_are_rejected(tmp_path, fmt):
    """Two swapped rows of a single-agent session are refused where their times show it."""
    rows = _single_rows()
    rows[1], rows[2] = rows[2], rows[1]
    t = Trace.from_frames(pd.DataFrame(_single_rows()))
    d = write_trace(t, tmp_path / "ok", fmt=fmt)
    df = pd.read_parquet(d / "requests.parquet") if fmt == "parquet" else pd.DataFrame(rows)
    if fmt == "parquet":
        df = df.iloc[[0, 2, 1]]
        df.to_parquet(d / "requests.parquet", index=False)
    else:
        _write_jsonl(d / "requests.jsonl", rows)
    with pytest.raises(TraceError) as e:
        read_trace(d)
    assert e.value.field == "matched_prefix_tokens"
    assert "request_id='r2'" in e.value.record and "rows out of session order" in e.value.problem
    assert "exceeds the 110 tokens of earlier context of agent 'A' plus 0 declared" in e.value.problem


def test_turn_going_back_within_an_agent_is_rejected():
    rows = _single_rows()
    rows[1]["turn"], rows[2]["turn"] = 1, 0
    with pytest.raises(TraceError) as e:
        Trace.from_frames(pd.DataFrame(rows))
    assert e.value.field == "turn"
    assert e.value.problem == "turn 0 follows turn 1 of agent 'A': rows out of session order"


def test_first_request_may_match_only_a_declared_shared_prefix():
    rows = _single_rows()
    for r in rows:
        r["input_tokens"] += 50
        r["matched_prefix_tokens"] += 50  # every request reuses a 50-token prompt cached across sessions
    with pytest.raises(TraceError) as e:
        Trace.from_frames(pd.DataFrame(rows))
    assert e.value.field == "matched_prefix_tokens" and "request_id='r0'" in e.value.record
    ok = Trace.from_frames(pd.DataFrame(rows).assign(shared_prefix_tokens=[50, 0, 0]))
    assert ok.requests["shared_prefix_tokens"].tolist() == [50, 0, 0]
    with pytest.raises(TraceError) as e:  # a declared shared prefix lies inside the matched prefix
        Trace.from_frames(pd.DataFrame(rows).assign(shared_prefix_tokens=[60, 0, 0]))
    assert e.value.field == "shared_prefix_tokens" and "exceeds the matched prefix" in e.value.problem


def test_concurrent_agents_may_interleave():
    """Session order is per agent: a worker's rows between its parent's rows are in order."""
    assert len(Trace.from_frames(base_requests(), base_spawns()).requests) == 3


@pytest.mark.parametrize("workload", importlib.import_module("lachesis.traces.corpus").WORKLOADS)
def test_synthetic_corpus_passes_every_rule(tmp_path, workload):
    from lachesis.traces import corpus

    t = corpus.generate(workload, scale=0.05)
    back = read_trace(write_trace(t, tmp_path / workload, fmt="jsonl"))
    assert len(back.requests) == len(t.requests) and (back.requests["shared_prefix_tokens"] >= 0).all()


@pytest.mark.parametrize("value, words", [(-3, "must be >= 0"), (2 ** 40, "out of range"), (True, "text or a token"),
                                          (1.5, "text or a token"), (None, "text or a token")])
def test_spawn_context_counts_are_checked(value, words):
    sp = base_spawns()
    sp["context"] = pd.Series([value], dtype=object)
    with pytest.raises(TraceError) as e:
        Trace.from_frames(base_requests(), sp)
    assert e.value.field == "context" and words in e.value.problem


def test_validation_is_vectorized_at_scale():
    """Validation cost grows with rows through numpy/pyarrow, not a Python loop per request."""
    import time

    from lachesis.traces import corpus

    t = corpus.generate("multi_agent", scale=0.5)
    t0 = time.perf_counter()
    Trace.from_frames(t.requests, t.spawns)
    assert time.perf_counter() - t0 < 2.0, "validating ~16k requests should take well under a second"


# -- rows out of session order: refused where the data shows it ---------------------------------------


def _rows(n: int = 4, times: bool = True) -> list[dict]:
    out = []
    for i in range(n):
        r = dict(session_id="s", request_id=f"r{i}", agent_id="a", parent_agent_id=None, role="single", turn=0,
                 input_tokens=100 + 50 * i, matched_prefix_tokens=0, output_tokens=10, reasoning_tokens=0,
                 tool_names=[], n_observations=0)
        if times:
            r.update(t_start=10.0 * i, t_end=10.0 * i + 5)
        out.append(r)
    return out


def _write(folder: Path, rows: list[dict], fmt: str = "jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pd.DataFrame(rows).to_parquet(folder / "requests.parquet", index=False)
    return folder


@pytest.mark.parametrize("fmt, record", [("jsonl", "record line 3"), ("parquet", "record 2")])
def test_swapped_rows_with_times_are_refused_naming_file_record_field(tmp_path, capsys, fmt, record) -> None:
    rows = _rows()
    rows[1], rows[2] = rows[2], rows[1]
    d = _write(tmp_path / "t", rows, fmt)
    assert main(["segments", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"requests.{fmt}: {record} (request_id='r1'): field 't_start': t_start 10.0 precedes t_start 20.0" in err[0]
    assert "rows out of session order" in err[0]


def test_in_order_rows_and_unrecorded_times_load(tmp_path) -> None:
    rows = _rows()
    rows[2]["t_start"] = rows[2]["t_end"] = math.nan  # a time not recorded is not checked
    schema.validate_requests(pd.DataFrame(rows))
    schema.validate_requests(pd.DataFrame(_rows()))


def test_concurrent_sessions_may_interleave(tmp_path) -> None:
    a, b = _rows(2), _rows(2)
    for r in b:
        r.update(agent_id="b", session_id="s2", request_id="b" + r["request_id"])
    schema.validate_requests(pd.DataFrame([a[0], b[0], a[1], b[1]]))  # b starts at 0 after a's row at 0, 10: fine


def test_what_cannot_be_seen_is_stated_in_the_contract() -> None:
    rows = _rows(times=False)
    rows[1], rows[2] = rows[2], rows[1]
    schema.validate_requests(pd.DataFrame(rows))  # no times, prefixes fit: the data cannot show the swap
    for text in (T.__doc__, T.read_trace.__doc__,
                 (REPO / "docs" / "design.md").read_text(encoding="utf-8")):
        assert "cannot" in text and "swap" in text


def _swapped_corpus_session(tmp_path: Path) -> tuple[Path, str, int]:
    """A single-agent corpus session (no times) written with rows 2 and 3 of one turn swapped, the moved
    row's id and its line in the written file."""
    from lachesis.traces import corpus

    tr = corpus.generate("tau3", scale=0.05, seed=0)
    req = tr.requests
    agent = req["agent_id"].iloc[0]
    one = req[req["agent_id"] == agent]
    turn = next(g for _, g in one.groupby("turn") if len(g) >= 3)
    order = list(req.index)
    i, j = order.index(turn.index[1]), order.index(turn.index[2])
    order[i], order[j] = order[j], order[i]
    sess = req.loc[order].reset_index(drop=True)
    sess = sess[sess["session_id"] == req["session_id"].iloc[0]].reset_index(drop=True)
    T.write_trace(T.Trace(sess, tr.spawns.iloc[0:0], tool_class_of=tr.tool_class_of), tmp_path / "t", "jsonl")
    moved = str(req.loc[turn.index[2], "request_id"])
    return tmp_path / "t", moved, 1 + int(sess.index[sess["request_id"] == moved][0])


def test_a_row_moved_ahead_in_a_trace_without_times_is_refused(tmp_path, capsys) -> None:
    d, moved, line = _swapped_corpus_session(tmp_path)
    assert "t_start" not in pd.read_json(d / "requests.jsonl", lines=True)
    assert main(["segments", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"requests.jsonl: record line {line} (request_id={moved!r}): field 'matched_prefix_tokens'" in err[0], err[0]
    assert "declared shared_prefix_tokens, and no start times order these rows: rows out of session order" in err[0]


def test_a_prefix_past_the_agent_context_needs_times_to_order_it() -> None:
    rows = _rows(2, times=False)
    rows[1]["matched_prefix_tokens"] = 110 + 40  # 40 past a's 110 tokens, declared as shared
    rows[1]["input_tokens"] = 250
    for r, shared in zip(rows, (0, 40)):
        r["shared_prefix_tokens"] = shared
    with pytest.raises(schema.TraceError, match="no start times order these rows"):
        schema.validate_requests(pd.DataFrame(rows))
    timed = [dict(r, t_start=10.0 * i, t_end=10.0 * i + 5) for i, r in enumerate(rows)]
    schema.validate_requests(pd.DataFrame(timed))  # a provider cache read past the context, ordered by its times
    first = [dict(rows[0], matched_prefix_tokens=40, shared_prefix_tokens=40)]
    # a system prompt opened by the first request and re-read after: within the larger of the two
    schema.validate_requests(pd.DataFrame(first + [dict(rows[1], matched_prefix_tokens=110, shared_prefix_tokens=40)]))


def test_the_corpus_and_its_adapters_order_still_load() -> None:
    from lachesis.traces import corpus

    for w in ("tau3", "bfcl", "multi_agent"):
        schema.validate_requests(corpus.generate(w, scale=0.03, seed=1).requests)


# -- deep JSON, a synthetic lead, a cache tolerance past its range ------------------------------------


def test_deep_json_in_a_trace_file_names_the_line(tmp_path, capsys) -> None:
    d = chain(tmp_path / "c", 1)
    with open(d / "requests.jsonl", "a") as fh:
        fh.write("[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["segments", str(d)]) == 2
    err = _one_line(capsys)
    assert "requests.jsonl: record line 3: field '(json)': nested deeper" in err


def _trace_rows(**last: object) -> list[dict]:
    """A lead with one worker; ``last`` changes the worker's row."""
    base = dict(session_id="s", turn=0, input_tokens=100, matched_prefix_tokens=0, output_tokens=10,
                reasoning_tokens=0, tool_names=[], n_observations=0, t_start=0.0, t_end=1.0, synthetic=False)
    return [dict(base, request_id="l0", agent_id="lead", parent_agent_id=None, role="lead"),
            dict(base, request_id="w0", agent_id="w", parent_agent_id="lead", role="worker", **last)]


def test_synthetic_on_a_lead_row_is_refused_naming_the_row(tmp_path, capsys) -> None:
    rows = _trace_rows()
    rows[0]["synthetic"] = True  # only a sub-agent is ever built from recorded totals
    d = tmp_path / "t"
    d.mkdir()
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spawn = dict(session_id="s", agent_id="w", parent_agent_id="lead", role="worker", spawn_request_id="l0",
                 instruction="x", context="", tools=[], model="m", spawn_index=0)
    (d / "spawns.jsonl").write_text(json.dumps(spawn) + "\n")
    assert main(["segments", str(d)]) == 2
    err = _one_line(capsys)
    assert ("requests.jsonl: record line 1 (request_id='l0'): field 'synthetic': "
            "a lead request cannot be synthetic") in err
    rows[0]["synthetic"], rows[1]["synthetic"] = False, True  # on the worker: accepted
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["segments", str(d)]) == 0


@pytest.mark.parametrize("tol", [1025, 2**31 - 1])
def test_a_cache_tolerance_past_its_documented_range_is_refused(tol) -> None:
    import pandas as pd

    from lachesis.analysis import segments
    from lachesis.traces import schema
    from lachesis.traces.trace import Trace

    assert schema.MAX_CACHE_TOLERANCE == 1024
    with pytest.raises(ValueError, match=r"cache_tolerance_tokens: expected a whole number of tokens in \[0, 1024\]"):
        schema.cache_tolerance(tol)
    rows = pd.DataFrame(_trace_rows(cache_tolerance_tokens=tol))
    rows["cache_tolerance_tokens"] = rows["cache_tolerance_tokens"].fillna(0).astype("int64")
    with pytest.raises(schema.TraceError, match="field 'cache_tolerance_tokens': cache tolerance .* exceeds 1024"):
        schema.validate_requests(rows)
    tr = Trace.from_frames(rows.assign(cache_tolerance_tokens=16), pd.DataFrame([dict(
        session_id="s", agent_id="w", parent_agent_id="lead", role="worker", spawn_request_id="l0",
        instruction="x", context="", tools=[], model="m", spawn_index=0)]))
    with pytest.raises(ValueError, match="1024"):
        segments.recover(tr, cache_tolerance_tokens=tol)
    assert schema.cache_tolerance(1024) == 1024 and len(segments.recover(tr, cache_tolerance_tokens=16).segments)
