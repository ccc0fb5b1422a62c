"""The spawn tree of a validated trace (docs/design.md §2): each session's root agent and the
sub-agents each spawn request starts, checked once, when the trace is loaded or built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from lachesis.traces.schema import ROOT_ROLES, SUBAGENT_ROLES, Rows, TraceError


@dataclass(frozen=True)
class SpawnTree:
    """Who spawns whom: each session's root agent, and the sub-agents each spawn request starts.

    Rows are positions in the trace's request order.  ``rows``: every agent's request rows, agents in
    order of their first request.  ``roots``: each session's one root agent (role single or lead),
    sessions in trace order.  ``children``: the row of each spawn request -> the agents it spawns, in
    the order of their spawn records.  ``spawned_by`` / ``record``: a sub-agent -> the row of its spawn
    request / of its spawn record (for its ``spawn_index``, instruction, ...).

    The reference clock (:mod:`lachesis.traces.clock`) walks it depth first from each root.  The decode-node
    simulator builds its agent plans from it: for each ``p, kids in tree.children.items()``, the
    spawn request ``requests.request_id[p]`` (of agent ``requests.agent_id[p]``) starts the plans of
    ``kids`` in this order, and ``tree.roots[s]`` is the one root of session ``s`` (sorted by session
    id, as the simulator orders sessions).
    """

    rows: dict[str, list[int]]
    roots: dict[str, str]
    children: dict[int, tuple[str, ...]]
    spawned_by: dict[str, int]
    record: dict[str, int]


def spawn_tree(requests: pd.DataFrame, spawns: pd.DataFrame, source: str = "<memory>",
               spawn_source: str | None = None, spawn_lines: Sequence[int] | np.ndarray | None = None) -> SpawnTree:
    """Build the :class:`SpawnTree` of two validated tables and check what the reference clock needs
    of it (docs/design.md §2): every sub-agent has a spawn record; a spawn record names a request of
    its parent agent that comes before the sub-agent's first request; each session has exactly one
    root agent, from which every agent of the session is reached through spawn records.  Errors name
    ``source`` (the requests) or ``spawn_source`` (the spawn records; JSONL lines when ``spawn_lines``)."""
    agent = requests["agent_id"].to_numpy()
    role = requests["role"].to_numpy()
    sess = requests["session_id"].to_numpy()
    rid = requests["request_id"].to_numpy()
    rows: dict[str, list[int]] = {}
    for i, a in enumerate(agent.tolist()):
        rows.setdefault(a, []).append(i)
    pos_of = {r: i for i, r in enumerate(rid.tolist())}
    label = lambda i: f"{i} (request_id={rid[i]!r})"  # noqa: E731
    src = spawn_source or source + " [spawns]"
    named = Rows(spawns, spawn_lines)
    children: dict[int, list[str]] = {}
    spawned_by: dict[str, int] = {}
    record: dict[str, int] = {}
    for i, (a, parent, req) in enumerate(zip(spawns["agent_id"].tolist(), spawns["parent_agent_id"].tolist(),
                                             spawns["spawn_request_id"].tolist())):
        p = pos_of.get(req)
        if p is None:
            raise TraceError(src, named.label(i), "spawn_request_id", f"unknown request {req!r}")
        if agent[p] != parent:
            raise TraceError(src, named.label(i), "spawn_request_id",
                             f"request {req!r} belongs to agent {agent[p]!r}, not to the parent agent {parent!r}")
        own = rows.get(a)
        if own is None or role[own[0]] not in SUBAGENT_ROLES:
            raise TraceError(src, named.label(i), "agent_id", f"spawned agent {a!r} has no worker or reviewer "
                             "request in the trace")
        if own[0] < p:
            raise TraceError(src, named.label(i), "spawn_request_id",
                             f"sub-agent {a!r} has a request before its spawn request {req!r}")
        children.setdefault(p, []).append(a)
        spawned_by[a], record[a] = p, i
    roots: dict[str, list[str]] = {}
    for a, own in rows.items():
        if role[own[0]] in SUBAGENT_ROLES and a not in spawned_by:
            raise TraceError(source, label(own[0]), "agent_id",
                             f"sub-agent {a!r} has no spawn record (the reference clock starts a sub-agent "
                             "when its spawn request ends)")
        if role[own[0]] in ROOT_ROLES:
            roots.setdefault(sess[own[0]], []).append(a)
    for s in pd.unique(sess):
        found = roots.get(s, [])
        if len(found) != 1:
            raise TraceError(source, label(int(np.flatnonzero(sess == s)[0])), "role",
                             f"session {s!r} has {len(found)} root agents (single/lead); expected exactly one")
    reached, todo = set(), [r[0] for r in roots.values()]
    while todo:
        a = todo.pop()
        reached.add(a)
        todo += [c for p in rows[a] for c in children.get(p, ())]
    if len(reached) < len(rows):
        first = min(own[0] for a, own in rows.items() if a not in reached)
        raise TraceError(source, label(first), "parent_agent_id", f"agent {agent[first]!r} is not reachable from "
                         "its session's root agent through spawn records")
    return SpawnTree(rows, {s: roots[s][0] for s in pd.unique(sess)}, {p: tuple(k) for p, k in children.items()},
                     spawned_by, record)
