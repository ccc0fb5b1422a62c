"""A grid row: the one declared schema of what the sweep keeps per point (its cache entry) and the tables read.

:class:`GridRow` names every field a row may carry, so a misspelt field fails where the row is made
(:func:`grid_row`) and a misspelt column where the tables name it (:func:`columns`).  The field names are
the cache's JSON keys.
"""

from __future__ import annotations

from typing import Any, Mapping, cast

from lachesis.node.simulator import RunRecord


class GridRow(RunRecord, total=False):
    """One grid point's row: the run's numbers (:class:`lachesis.node.simulator.RunRecord`, its load and policy
    among them), the rest of the point, the load and the SLO check there, the oracle's drift, the offline
    bound, and the cache entry's own fields."""

    # the point (lachesis.evaluation.grid.Point)
    workload: str
    memory: str
    model: str
    slo: str
    scale: float
    seed: int
    trace: str
    laden_close: str
    overrides: list
    # the load and the SLO check at it
    n_star: int
    load: str
    load_base: str
    daisy_chain_load: str
    load_policy: str
    load_seed: int
    load_sizing: str
    #: the (configuration, seed) whose SLO margin bound a jointly sized deployment's load
    load_binding: str
    #: a policy that misses the SLO at its row's load: its own N* at that cell and seed (NaN: not searched)
    own_n_star: float
    fraction: float
    search: list[dict[str, Any]]
    duration_s: float
    slo_met: bool
    slo_p99_tpot_s: float
    slo_p99_ttft_s: float
    group_ranks: int
    slo_tpot_bound_s: float
    slo_ttft_bound_s: float
    # the oracle's clairvoyance (lachesis.node.clairvoyance.drift)
    close_drift_matched: float
    close_drift_median_abs_s: float
    close_drift_p90_abs_s: float
    close_drift_median_rel: float
    # the offline bound (lachesis.evaluation.sweep.bound_fields)
    bound_hbm_bytes: float
    bound_window_bytes: float
    bound_hbm_share: float
    bound_capacity_tokens: float
    bound_window_start_s: float
    bound_window_end_s: float
    bound_status: str
    bound_solve_s: float
    bound_n_writes: int
    bound_n_arcs: int
    bound_lifetime_years: float
    # the cache entry (lachesis.evaluation.store)
    key: str
    code: str
    version: str
    digest: str


#: Every field a row may carry.
FIELDS: frozenset[str] = frozenset(GridRow.__annotations__)

#: The fields a row holds as a mapping, and the column names a frame of rows gives each entry
#: (:func:`lachesis.evaluation.sweep.results_frame`): tier bytes, class × tier bytes, peaks, live KV per class.
FLATTENED: dict[str, str] = {"bytes_by_tier": "bytes_{}", "bytes_by_class_tier": "bytes_{}_{}",
                             "live_peak": "live_peak_{}", "live_kv_by_class": "live_kv_{}_bytes"}

#: The memory tiers a row's bytes are split over (``bytes_hbm``, ``bytes_hbf``).
TIERS = ("hbm", "hbf")


def _unknown(names: set[str], known: frozenset[str], what: str) -> KeyError:
    return KeyError(f"grid row: no {what} {', '.join(map(repr, sorted(names)))}; known: {', '.join(sorted(known))}")


def grid_row(fields: Mapping[str, Any]) -> GridRow:
    """``fields`` as a :class:`GridRow`; a KeyError naming any field the schema lacks."""
    if bad := set(fields) - FIELDS:
        raise _unknown(bad, FIELDS, "field")
    return cast(GridRow, dict(fields))


def fields(*names: str) -> tuple[str, ...]:
    """``names`` checked as fields of a row; a KeyError naming any other."""
    if bad := set(names) - FIELDS:
        raise _unknown(bad, FIELDS, "field")
    return names


def columns(*names: str) -> tuple[str, ...]:
    """``names`` checked as columns of a frame of rows (a scalar field, or a tier's bytes); a KeyError
    naming any other."""
    known = FIELDS - set(FLATTENED) | {FLATTENED["bytes_by_tier"].format(t) for t in TIERS}
    if bad := set(names) - known:
        raise _unknown(bad, frozenset(known), "column")
    return names
