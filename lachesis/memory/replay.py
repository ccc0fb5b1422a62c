"""The allocator's event stream: one event tuple normalised, a recorded stream annotated with the oracle's
clairvoyant facts, and a stream replayed through a segment table (§4, Fig. 8).

The event format is a contract of docs/design.md §5; ``tests/reference_blocksim.py`` replays the same
stream through a naive one-object-per-block allocator, and the two must agree.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

from lachesis.kv import AllocationError
from lachesis.memory.allocator import SegmentTable, WriteTotals
from lachesis.memory.free_lists import TieredAllocator
from lachesis.memory.protocol import Policy

__all__ = ["parse_event", "annotate_clairvoyant", "replay_events"]


def _field_float(ev: Sequence[Any], i: int, field_name: str) -> float:
    """Optional float field i of an event (NaN when absent or None), ValueError naming the field."""
    if len(ev) <= i or ev[i] is None:
        return math.nan
    try:
        return float(ev[i])
    except (TypeError, ValueError):
        raise ValueError(f"event {ev!r}: field {field_name!r} must be a number, got {ev[i]!r}") from None


def _field_count(ev: Sequence[Any], i: int, field_name: str) -> int:
    """Non-negative integer field i of an event, ValueError naming the field."""
    x = ev[i]
    if (isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, float, np.floating))
            or int(x) != x or x < 0):
        raise ValueError(f"event {ev!r}: field {field_name!r} must be a non-negative integer")
    return int(x)


def parse_event(ev: Sequence[Any]) -> tuple:
    """Normalise one event tuple (docs/design.md §5), raising ValueError naming the bad field.

    Returns ``(t, "write", segment_id, seg_class, tokens, session_id, rank_key, close_s, final_tokens)``,
    ``(t, "read", segment_id, read_tokens)``, ``(t, "close", segment_id, last_use)`` or
    ``(t, "session_end", session_id)``."""
    if len(ev) < 3:
        raise ValueError(f"event {ev!r}: expected at least (time, kind, id)")
    t, kind = _field_float(ev, 0, "t"), ev[1]
    if not math.isfinite(t):
        raise ValueError(f"event {ev!r}: field 't' must be a finite number of seconds, got {ev[0]!r}")
    if kind == "write":
        n = len(ev)
        if n < 5 or n > 9:
            raise ValueError(f"event {ev!r}: write needs (t, 'write', segment_id, seg_class, tokens"
                             f"[, session_id[, rank_key[, close_s[, final_tokens]]]])")
        tok = _field_count(ev, 4, "tokens")
        session = str(ev[5]) if n > 5 and ev[5] is not None else ""
        key = _field_float(ev, 6, "rank_key") if n > 6 else math.nan
        if n < 8:
            return (t, "write", str(ev[2]), str(ev[3]), tok, session, key, math.nan, math.nan)
        final = _field_float(ev, 8, "final_tokens")
        if not (math.isnan(final) or (final >= 0 and math.isfinite(final))):
            raise ValueError(f"event {ev!r}: field 'final_tokens' must be a finite number >= 0 (or None)")
        return (t, "write", str(ev[2]), str(ev[3]), tok, session, key, _field_float(ev, 7, "close_s"), final)
    if kind == "read":
        if len(ev) != 4:
            raise ValueError(f"event {ev!r}: read needs (t, 'read', segment_id, read_tokens)")
        return (t, "read", str(ev[2]), _field_count(ev, 3, "read_tokens"))
    if kind == "close":
        if len(ev) not in (3, 4):
            raise ValueError(f"event {ev!r}: close needs (t, 'close', segment_id[, last_use])")
        last = float(ev[3]) if len(ev) == 4 and ev[3] is not None else t
        if not last <= t:
            raise ValueError(f"event {ev!r}: field 'last_use' must be <= the event time")
        return (t, "close", str(ev[2]), last)
    if kind == "session_end":
        if len(ev) != 3:
            raise ValueError(f"event {ev!r}: session_end needs (t, 'session_end', session_id)")
        return (t, kind, str(ev[2]))
    raise ValueError(f"event {ev!r}: field 'kind' must be 'write', 'read', 'close' or 'session_end', got {kind!r}")


def annotate_clairvoyant(events: Iterable[Sequence[Any]]) -> list[tuple]:
    """The events (normalised) with every write carrying its segment's true close time and final size
    in tokens, read off the list itself: the clairvoyant facts of a recorded run, for the oracle policy.
    A segment the list never closes gets close time NaN (it ranks last)."""
    parsed = [parse_event(e) for e in events]
    close_t: dict[str, float] = {}
    final: dict[str, int] = {}
    live: dict[str, dict[str, None]] = {}  # session -> live segment ids
    session_of: dict[str, str] = {}
    for ev in parsed:
        if ev[1] == "write":
            final[ev[2]] = final.get(ev[2], 0) + ev[4]
            session_of.setdefault(ev[2], ev[5])
            live.setdefault(session_of[ev[2]], {})[ev[2]] = None
        elif ev[1] == "close":
            close_t.setdefault(ev[2], ev[0])
            live.get(session_of.get(ev[2], ""), {}).pop(ev[2], None)
        elif ev[1] == "session_end":
            for sid in live.pop(ev[2], {}):
                close_t.setdefault(sid, ev[0])
    return [ev[:7] + (close_t.get(ev[2], math.nan), float(final[ev[2]])) if ev[1] == "write" else ev for ev in parsed]


def replay_events(events: Iterable[Sequence[Any]], policy: Policy | str, hbm_blocks: int, hbf_blocks: int,
                  block_tokens: int = 16, bytes_per_token: int = 1) -> WriteTotals:
    """Replay an ordered event list through the fast allocator and return the per-tier write totals; an event that
    is malformed or earlier than the one before it is refused naming its index and field."""
    table = SegmentTable(TieredAllocator(hbm_blocks, hbf_blocks), policy, block_tokens, bytes_per_token)
    live_class = table.lookup.live_class
    last = -math.inf
    for i, raw in enumerate(events):
        try:
            ev = parse_event(raw)
        except ValueError as exc:  # "event (…): field …" named by its index too
            raise ValueError(f"event {i} {str(exc).removeprefix('event ')}") from None
        if ev[0] < last:
            raise ValueError(f"event {i} {tuple(raw)!r}: field 't' {ev[0]!r} precedes the previous event's time "
                             f"{last!r}: events must be in time order")
        last = ev[0]
        try:
            kind = ev[1]
            if kind == "write":
                _, _, sid, cls, tok, session, key, close_s, final = ev
                opened = live_class(sid)
                if opened is not None and opened != cls:
                    raise ValueError(f"segment {sid!r} written as {cls!r} but opened as {opened!r}")
                table.add_write(sid, tok, ev[0], seg_class=cls, session_id=session, rank_key=key,
                                close_s=close_s, final_tokens=final)
            elif kind == "read":
                table.add_reads(ev[2], ev[3])
            elif kind == "close":
                table.close(ev[2], ev[0], ev[3])
            else:
                table.end_session(ev[2], ev[0])
        except (AllocationError, KeyError, ValueError) as exc:
            raise type(exc)(f"event {i} {tuple(raw)!r}: {exc}") from exc
    return table.totals
