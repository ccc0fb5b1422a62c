"""Bad input files refused by name, one line, no traceback: an empty or wrong-format
file given to an adapter, a non-UTF-8 byte, JSON nested past Python's reader, and a 500-deep sub-agent chain
(which the reference clock and the simulator now replay on an explicit stack)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lachesis.cli import main

ADAPTERS = ["azure", "mooncake", "tau2", "who_and_when"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "internal error" not in err[0] and "Traceback" not in err[0], err[0]
    return err[0]


def _adapt(capsys, tmp_path: Path, adapter: str, name: str, data: bytes) -> str:
    f = tmp_path / name
    f.write_bytes(data)
    assert main(["adapt", adapter, str(f), "--out", str(tmp_path / "out")]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"lachesis adapt: error: {f}: record "), err
    assert " field " in err, err
    assert not (tmp_path / "out").exists()
    return err


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("suffix", [".json", ".csv", ".jsonl"])
def test_an_empty_file_is_named_as_empty(tmp_path, capsys, adapter, suffix) -> None:
    err = _adapt(capsys, tmp_path, adapter, "empty" + suffix, b"")
    assert "empty file" in err or "no request record" in err, err


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_wrong_format_file_names_the_file_and_field(tmp_path, capsys, adapter) -> None:
    _adapt(capsys, tmp_path, adapter, "notes.json", b"hello world\n")


def test_a_csv_that_does_not_parse_names_the_file(tmp_path, capsys) -> None:
    err = _adapt(capsys, tmp_path, "azure", "t.csv", b'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,"1\n')
    assert "field '(csv)': not CSV" in err


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_non_utf8_byte_names_the_file_and_byte(tmp_path, capsys, adapter) -> None:
    err = _adapt(capsys, tmp_path, adapter, "bad.json", b'{"a": "\xff\xfe"}\n')
    assert "record byte 7: field '(utf-8)': not valid UTF-8" in err


@pytest.mark.parametrize("adapter", ["mooncake", "tau2", "who_and_when"])
def test_json_nested_too_deep_names_the_file(tmp_path, capsys, adapter) -> None:
    err = _adapt(capsys, tmp_path, adapter, "deep.json", b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert "nested deeper than Python's JSON reader allows" in err


def test_a_folder_of_bad_files_lists_each(tmp_path, capsys) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (d / "empty.json").write_bytes(b"")
    assert main(["adapt", "tau2", str(d), "--out", str(tmp_path / "out")]) == 2
    err = _one_line(capsys)
    assert "no file could be read as tau2-bench results (2 failed" in err and "deep.json" in err


def chain(folder: Path, depth: int) -> Path:
    """A one-session trace: a lead whose request spawns a worker, which spawns the next, ``depth`` deep."""
    folder.mkdir(parents=True, exist_ok=True)
    req, sp = [], []
    for i in range(depth + 1):
        aid, parent = ("lead", None) if i == 0 else (f"w{i}", "lead" if i == 1 else f"w{i - 1}")
        req.append(dict(session_id="s", request_id=f"r{i}", agent_id=aid, parent_agent_id=parent,
                        role="lead" if i == 0 else "worker", turn=0, input_tokens=100, matched_prefix_tokens=0,
                        output_tokens=10, reasoning_tokens=0, tool_names=["Task"] if i < depth else [],
                        n_observations=0))
        if i:
            sp.append(dict(session_id="s", agent_id=aid, parent_agent_id=parent, role="worker",
                           spawn_request_id=f"r{i - 1}", instruction="x", context="", tools=[], model="m",
                           spawn_index=0))
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in req))
    (folder / "spawns.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sp))
    return folder


def test_a_500_deep_sub_agent_chain_is_replayed(tmp_path, capsys) -> None:
    from lachesis.analysis.segments import recover
    from lachesis.node.plan import build_plan
    from lachesis.traces.clock import schedule
    from lachesis.traces.trace import read_trace

    assert main(["segments", str(chain(tmp_path / "c500", 500))]) == 0
    out = capsys.readouterr().out
    assert "501 requests, 1 sessions, 501 segments" in out
    tr = read_trace(tmp_path / "c500")
    sched = schedule(tr)
    # each worker starts when its parent's request ends: decode ends 10 tokens apart, in chain order
    assert np.all(np.diff(sched["t_decode_end_s"].to_numpy()) > 0)
    plan = build_plan(tr, recover(tr))
    assert plan.session_span_s("s", 0.05) == pytest.approx(501 * 10 * 0.05)


def test_a_shallow_chain_is_scheduled_as_before(tmp_path) -> None:
    """The explicit stack keeps the depth-first draw order: the same times as a direct replay by hand."""
    from lachesis.traces.clock import clock_for, schedule
    from lachesis.traces.trace import read_trace

    tr = read_trace(chain(tmp_path / "c3", 3))
    s = schedule(tr)
    tpot = clock_for(tr).tpot_ref_s
    assert s["t_start_s"].tolist() == pytest.approx([0.0, 10 * tpot, 20 * tpot, 30 * tpot])


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
    assert "requests.jsonl: record line 1 (request_id='l0'): field 'synthetic': a lead request cannot be synthetic" in err
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
