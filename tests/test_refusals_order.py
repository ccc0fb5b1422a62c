"""Rows out of session order: detected where the data shows it (start times, besides the matched-prefix
bound and turn order), and the trace contract says what it cannot see."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from lachesis.cli import main
from lachesis.traces import schema
from lachesis.traces import trace as T


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


def test_concurrent_agents_may_interleave(tmp_path) -> None:
    a, b = _rows(2), _rows(2)
    for r in b:
        r.update(agent_id="b", session_id="s2", request_id="b" + r["request_id"])
    schema.validate_requests(pd.DataFrame([a[0], b[0], a[1], b[1]]))  # b starts at 0 after a's row at 0, 10: fine


def test_what_cannot_be_seen_is_stated_in_the_contract() -> None:
    rows = _rows(times=False)
    rows[1], rows[2] = rows[2], rows[1]
    schema.validate_requests(pd.DataFrame(rows))  # no times, prefixes fit: the data cannot show the swap
    for text in (T.__doc__, T.read_trace.__doc__,
                 (Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text(encoding="utf-8")):
        assert "cannot" in text and "swap" in text


def _swapped_corpus_session(tmp_path: Path) -> tuple[Path, str]:
    """A single-agent corpus session (no times) written with rows 2 and 3 of one turn swapped, and the moved row's id."""
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
    return tmp_path / "t", str(req.loc[turn.index[2], "request_id"])


def test_a_row_moved_ahead_in_a_trace_without_times_is_refused(tmp_path, capsys) -> None:
    d, moved = _swapped_corpus_session(tmp_path)
    assert "t_start" not in pd.read_json(d / "requests.jsonl", lines=True)
    assert main(["segments", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"requests.jsonl: record line 3 (request_id={moved!r}): field 'matched_prefix_tokens'" in err[0], err[0]
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
