"""The per-request trace (§3.2, Appendix B; the contract: docs/design.md §2): a :class:`Trace` holds
its validated request rows, its spawn records and its tool-class map, and is read from and written to
JSONL or Parquet.  Rows are kept in the order given, which must be session order per agent; what the
checks cannot see (rows of one agent swapped inside a turn of a trace without times) is stated in
docs/design.md §2.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from lachesis.io import atomic_write, jsonable, write_json
from lachesis.traces.schema import (
    TOOL_CLASS_FILE,
    TraceError,
    empty_spawns,
    validate_requests,
    validate_spawns,
    validate_tool_classes,
)
from lachesis.traces.spawntree import SpawnTree, spawn_tree


@dataclass
class Trace:
    """A validated trace: per-request rows plus spawn records."""

    requests: pd.DataFrame
    spawns: pd.DataFrame
    source: str = "<memory>"
    #: tool name -> tool class (``config.TOOL_CLASSES``) that the reference clock charges a call with;
    #: a tool not named here is charged as the default class (``ReferenceClock.default_tool_class``).
    tool_class_of: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_frames(cls, requests: pd.DataFrame, spawns: pd.DataFrame | None = None,
                    source: str = "<memory>", tool_class_of: Mapping[str, str] | None = None) -> "Trace":
        """Validate and wrap two frames (spawns may be omitted for single-agent traces)."""
        spawns = empty_spawns() if spawns is None else spawns
        req = validate_requests(requests, source)
        sp = validate_spawns(spawns, req, source)
        trace = cls(req, sp, source, validate_tool_classes(tool_class_of or {}, source))
        trace._tree = spawn_tree(req, sp, source, spawn_lines=spawns.attrs.get("line"))
        return trace

    @classmethod
    def concat(cls, parts: Sequence["Trace"], source: str) -> "Trace":
        """One validated trace of several (their sessions side by side, their tool-class maps merged)."""
        tools: dict[str, str] = {}
        for p in parts:
            for name, cls_ in p.tool_class_of.items():
                if tools.setdefault(name, cls_) != cls_:
                    raise TraceError(p.source, f"tool {name!r}", "tool_class_of",
                                     f"class {cls_!r} here, {tools[name]!r} in another part of {source}")
        return cls.from_frames(pd.concat([p.requests for p in parts], ignore_index=True),
                               pd.concat([p.spawns for p in parts], ignore_index=True), source, tools)

    def spawn_tree(self) -> "SpawnTree":
        """Who spawns whom (:class:`SpawnTree`), checked against the trace contract on first use.

        A trace that was loaded or built by :meth:`from_frames` was checked when it was built; a
        Trace constructed directly is checked here, so no consumer walks an unchecked tree.
        """
        tree = getattr(self, "_tree", None)
        if tree is None:
            tree = self._tree = spawn_tree(self.requests, self.spawns, self.source)
        return tree

    @property
    def sessions(self) -> np.ndarray:
        return self.requests["session_id"].unique()

    def subset(self, session_ids: Iterable[str]) -> "Trace":
        """The trace restricted to some sessions (already validated, so no re-check)."""
        keep = set(session_ids)
        r = self.requests[self.requests["session_id"].isin(keep)].reset_index(drop=True)
        s = self.spawns[self.spawns["session_id"].isin(keep)].reset_index(drop=True)
        return Trace(r, s, self.source, self.tool_class_of)


def tokens_written(requests: pd.DataFrame) -> pd.Series:
    """KV tokens each request newly materializes: ``input + output - matched_prefix`` (Appendix B)."""
    return requests["input_tokens"] + requests["output_tokens"] - requests["matched_prefix_tokens"]


def tokens_processed(requests: pd.DataFrame) -> pd.Series:
    """Tokens each request processes: its whole input plus its output (Table 3 column)."""
    return requests["input_tokens"] + requests["output_tokens"]


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
        except RecursionError:
            raise TraceError(source, f"line {lineno}", "(json)",
                             "nested deeper than Python's JSON reader allows") from None
        if not isinstance(rec, dict):
            raise TraceError(source, f"line {lineno}", "(json)", "expected a JSON object")
        yield lineno, rec


def _read_jsonl(path: Path) -> pd.DataFrame:
    """The records of a JSONL file; ``attrs['line']`` keeps each row's line number for error messages."""
    pairs = list(iter_json_lines(read_text(path).splitlines(), str(path)))
    df = pd.DataFrame([rec for _, rec in pairs])
    df.attrs["line"] = np.array([n for n, _ in pairs], dtype=np.int64)
    return df


def read_text(path: Path) -> str:
    """A (gzip-compressed, for ``.gz``) UTF-8 text file: a truncated or corrupt gzip, and a byte that is not
    UTF-8 (its line and offset), are TraceErrors naming the file; a file that cannot be read at all raises its
    OSError (which names it)."""
    raw = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise TraceError(str(path), "(file)", "(gzip)", f"not a complete gzip file ({e})") from None
    return decode_utf8(raw, str(path), "of the decompressed text" if str(path).endswith(".gz") else "of the file")


def decode_utf8(raw: bytes, source: str, where: str = "of the file") -> str:
    """``raw`` as UTF-8 text; a byte that is not raises a TraceError naming ``source``, the byte's line, its value
    and its offset (``where``: of the file, or of a compressed file's text)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start, line = raw.rfind(b"\n", 0, e.start) + 1, raw.count(b"\n", 0, e.start) + 1
        raise TraceError(source, f"line {line}", "(encoding)",
                         f"not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start} {where} (column "
                         f"{e.start - line_start + 1})") from None


def _read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except (pa.ArrowException, OSError) as e:
            raise TraceError(str(path), "(file)", "(parquet)", f"not a readable Parquet file ({e})") from None
    return _read_jsonl(path)


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Load a trace.

    ``path`` is a directory holding ``requests.{jsonl,jsonl.gz,parquet}`` and optionally
    ``spawns.{...}`` and ``tool_classes.json`` (:data:`TOOL_CLASS_FILE`), or a single requests file
    (spawns and tool classes then read from siblings ``<stem>.spawns.<ext>`` and
    ``<stem>.tool_classes.json`` when present).

    Rows must be in session order per agent; what is checked (matched-prefix bound, turn order, start
    times where present) and what cannot be seen (a swap inside a turn of a trace without times whose
    prefixes still fit) are in docs/design.md §2: such a trace loads, in the order given.
    """
    p = Path(path)
    if p.is_dir():
        req_path = _find(p, "requests")
        spawn_path = _find(p, "spawns", required=False)
        tools_path = p / TOOL_CLASS_FILE
    else:
        if not p.exists():
            raise FileNotFoundError(f"no trace at {p}")
        req_path = p
        stem = p.name.split(".")[0]
        spawn_path = next((c for c in p.parent.glob(stem + ".spawns.*")), None)
        tools_path = p.parent / f"{stem}.{TOOL_CLASS_FILE}"
    assert req_path is not None  # NOTE: a required file that is absent raises in _find
    req = _read_table(req_path)
    if req.empty and not len(req.columns):
        raise TraceError(str(req_path), "(file)", "(records)", "empty: no request record (one JSON object per line, "
                         "docs/design.md §2)")
    sp = _read_table(spawn_path) if spawn_path else empty_spawns()
    requests = validate_requests(req, str(req_path))
    spawns = validate_spawns(sp, requests, str(spawn_path) if spawn_path else str(req_path))
    tools = _read_tool_classes(tools_path) if tools_path.is_file() else {}
    trace = Trace(requests, spawns, str(p), tools)
    trace._tree = spawn_tree(requests, spawns, str(req_path), (str(spawn_path) if spawn_path else str(req_path))
                             + " [spawns]", sp.attrs.get("line"))
    return trace


def _read_tool_classes(path: Path) -> dict[str, str]:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise TraceError(str(path), f"line {e.lineno}", "(json)", f"not valid JSON: {e.msg}") from None
    except RecursionError:
        raise TraceError(str(path), "(file)", "(json)", "nested deeper than Python's JSON reader allows") from None
    return validate_tool_classes(data, str(path))


def _find(d: Path, stem: str, required: bool = True) -> Path | None:
    """The one ``<stem>.parquet``, ``.jsonl`` or ``.jsonl.gz`` in ``d``; two of them are refused (which one is the
    trace?), none is refused when ``required``."""
    found = [d / (stem + ext) for ext in (".parquet", ".jsonl", ".jsonl.gz") if (d / (stem + ext)).exists()]
    if len(found) > 1:
        raise TraceError(str(d), "(folder)", f"({stem})", f"both {found[0].name} and {found[1].name}: which is the "
                         "trace? keep one (lachesis adapt and corpus replace their folder whole)")
    if found:
        return found[0]
    if required:
        raise FileNotFoundError(f"{d}: no {stem}.parquet, {stem}.jsonl or {stem}.jsonl.gz")
    return None


def _write_table(df: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        atomic_write(path, lambda t: df.to_parquet(t, index=False))
    else:
        def w(t: Path) -> None:
            with open(t, "w", encoding="utf-8") as fh:
                for rec in df.to_dict(orient="records"):
                    fh.write(json.dumps(jsonable(rec)) + "\n")
        atomic_write(path, w)


def write_trace(trace: Trace, directory: str | os.PathLike[str], fmt: str = "parquet") -> Path:
    """Write ``requests.<fmt>`` and ``spawns.<fmt>`` into ``directory`` (atomically, each file)."""
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"format must be 'parquet' or 'jsonl', not {fmt!r}")
    d = Path(directory)
    _write_table(trace.requests, d / f"requests.{fmt}")
    _write_table(trace.spawns, d / f"spawns.{fmt}")
    if trace.tool_class_of:
        write_json(d / TOOL_CLASS_FILE, dict(sorted(trace.tool_class_of.items())), indent=1)
    else:  # a map left by an earlier trace in this folder must not attach itself to this one
        (d / TOOL_CLASS_FILE).unlink(missing_ok=True)
    return d
