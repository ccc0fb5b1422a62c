"""What the explorer shows, named: a selection (cell, policy, seeds, the setting its rows were made at), the view
read for it, the parts a view has, the dropdowns' values and the figures' words for each."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from lachesis.config import SLOS
from lachesis.evaluation import sensitivity
from lachesis.evaluation.grid import (
    CONFIG_LABELS,
    LOADS,
    MODEL_NAMES,
    MULTI_WORKLOADS,
    POLICY_NAMES,
    SINGLE_WORKLOADS,
    Point,
    grid_policies,
    seed_list,
)
from lachesis.evaluation.knobs import KNOBS, NODES
from lachesis.evaluation.knobs import STUDY as _STUDY
from lachesis.evaluation.knobs import node as knobs_node
from lachesis.memory.policies import POLICIES, get_policy
from lachesis.node.capacity import SEARCH_PRESETS, SearchParams
from lachesis.plotting import WORKLOAD_LABEL

PARTS = ("grid", "load", "sensitivity")
#: The sensitivity knobs the explorer offers: its cells run on a named node (:attr:`Selection.node`) at that
#: node's load, so the knobs that change the decode node (``acts_on == "deployment"``: the group's size) are
#: not run here; the sensitivity notebook moves them on its node and ``benchmarks/group_node.py`` sizes each
#: node at its own N*.
STUDY = tuple(k for k in _STUDY if KNOBS[k].acts_on != "deployment")


def study_knobs(knobs: Sequence[str]) -> list[str]:
    """``knobs`` as a list; a knob that changes the decode node is refused in one line (:data:`STUDY`)."""
    node = [k for k in knobs if k in KNOBS and KNOBS[k].acts_on == "deployment"]
    if node:
        raise ValueError(f"explorer: knob {node[0]!r} changes the decode node, but an explorer cell is sized at its "
                         "own node's load, so it would run the other node at a load sized for this one; refused here: "
                         "choose the node (node: one_gpu or paper), or the sensitivity notebook, which moves it; "
                         "benchmarks/group_node.py sizes each node at its own N*")
    return list(knobs)

#: How the explorer names what it shows, in the figures' own words: the dropdowns' options and the tables'
#: values (policies as :data:`lachesis.evaluation.grid.POLICY_NAMES`, workloads as the figures' legends) and columns.
LABELS: dict[str, dict[str, str]] = {
    "policy": dict(POLICY_NAMES),
    "workload": dict(WORKLOAD_LABEL),
    "slo": {k: f"{k} (p99 TPOT {1000 * v.p99_tpot_s:g} ms)" for k, v in SLOS.items()},
    "column": {"policy": "policy", "n_sessions": "sessions/GPU", "own_n_star": "own N*",
               "lifetime_years": "device-years", "over_hbm_first": "÷ HBM-first",
               "over_deterministic": "÷ w/o predictive path", "hbm_share_of_writes": "HBM share of KV writes",
               "slo_met_seeds": "meets the SLO (seeds)", "outlasts_warranty": "outlasts the warranty",
               "seg_class": "segment class", "hbm": "→ HBM (%)", "hbf": "→ HBF (%)", "all": "all classes",
               "knob": "knob", "value": "value", "lachesis/hbm_first": "Lachesis ÷ HBM-first",
               "deterministic/hbm_first": "w/o predictive path ÷ HBM-first",
               "all_meet_slo": "every policy meets the SLO",
               "years_hbm_first": "HBM-first (device-years)", "years_lachesis": "Lachesis (device-years)",
               "years_deterministic": "w/o predictive path (device-years)"},
}


def label(kind: str, value: Any) -> str:
    """``value`` (a policy, workload, SLO or column id) in the figures' words (:data:`LABELS`); as is otherwise."""
    return LABELS.get(kind, {}).get(str(value), str(value))


@dataclass(frozen=True)
class Selection:
    """What the user picked, and the corpus, seeds and search preset the cache was built with.

    ``seeds``: one seed or several (stored sorted); the lowest sized the cell's load, as in the grid."""

    workload: str = "multi_agent"
    model: str = "Llama-4-Maverick"
    slo: str = "tight"
    memory: str = "1/7"
    policy: str = "lachesis"
    scale: float = 1.0
    seeds: tuple[int, ...] = (0,)  # one seed (an int) is taken too
    search: str = "paper"
    #: the grid's load rule (docs/design.md §5, "Load")
    load: str = "per_deployment"
    #: the decode node the cell runs on (:data:`lachesis.evaluation.knobs.NODES`; the committed figures': the paper's)
    node: str = "paper"

    def __post_init__(self) -> None:
        if isinstance(self.scale, bool) or not isinstance(self.scale, numbers.Real) or not 0 < self.scale < math.inf:
            raise ValueError(f"explorer: scale must be a finite number > 0 (the corpus's fraction of the paper's "
                             f"sessions), got {self.scale!r}")
        if self.load not in LOADS:
            raise ValueError(f"explorer: load must be one of {list(LOADS)}, got {self.load!r}")
        if self.node not in NODES:
            raise ValueError(f"explorer: node must be one of {list(NODES)}, got {self.node!r}")
        if self.search not in SEARCH_PRESETS:
            raise ValueError(f"explorer: search must be one of {list(SEARCH_PRESETS)}, got {self.search!r}")
        for k, allowed in choices().items():
            if k != "policy" and getattr(self, k) not in allowed:
                raise ValueError(f"explorer: {k} must be one of {list(allowed)}, got {getattr(self, k)!r}")
        get_policy(self.policy)  # a registered name, possibly with knobs: a one-line error otherwise
        object.__setattr__(self, "seeds", tuple(sorted(seed_list("explorer", self.seeds))))

    @property
    def params(self) -> SearchParams:
        return SEARCH_PRESETS[self.search]

    def points(self, policies: Sequence[str] | None = None, seeds: Sequence[int] | None = None) -> list[Point]:
        """The cell's points: ``policies`` (default: the grid's, :func:`lachesis.evaluation.grid.grid_policies`, and
        the selected one) at ``seeds`` (default: every selected seed)."""
        pols = policies if policies is not None else (*grid_policies(self.workload), self.policy)
        node = knobs_node(self.node)
        return [Point(self.workload, self.memory, self.model, self.slo, p, self.scale, k, overrides=node)
                for k in (seeds if seeds is not None else self.seeds) for p in dict.fromkeys(pols)]

    def curve_points(self) -> list[Point]:
        """The load curve's points: the paper's policies of the family (as ``gain_vs_load`` runs them) and
        the selected one, at the first seed."""
        return self.points((*sensitivity.policies(self.workload), self.policy), self.seeds[:1])

    def study_points(self) -> list[Point]:
        """The sensitivity study's points (:func:`lachesis.evaluation.sensitivity.policies`), at the first seed."""
        return self.points(sensitivity.policies(self.workload), self.seeds[:1])


@dataclass
class View:
    """Everything the cache (or the committed figures) holds for a selection, and what it lacks (``missing``:
    part -> lines).  ``sensitivity``: the study's gains (:func:`lachesis.evaluation.sensitivity.gains`);
    ``composition``:
    write bytes per run, class and tier (:func:`lachesis.evaluation.tables.write_composition`'s rows); ``sources``:
    part -> where it was read."""

    selection: Selection
    grid: pd.DataFrame
    own: pd.DataFrame
    curve: pd.DataFrame
    sensitivity: pd.DataFrame
    missing: dict[str, list[str]] = field(default_factory=dict)
    composition: pd.DataFrame = field(default_factory=pd.DataFrame)
    sources: dict[str, str] = field(default_factory=dict)


def choices() -> dict[str, tuple[str, ...]]:
    """The values each dropdown offers (a selection's values must be among them; a policy may carry knobs)."""

    return dict(workload=MULTI_WORKLOADS + SINGLE_WORKLOADS, model=MODEL_NAMES, slo=tuple(SLOS),
                memory=CONFIG_LABELS, policy=tuple(POLICIES))


def cache_folder(cache_dir: str | Path) -> str:
    """``cache_dir`` as the sweep cache's folder: one that exists as a file is refused in one line (it would read
    as an empty cache); a folder not yet made is an empty cache."""
    if Path(cache_dir).exists() and not Path(cache_dir).is_dir():
        raise ValueError(f"explorer: cache_dir {str(cache_dir)!r} is a file, not the sweep cache's folder")
    return str(cache_dir)
