"""One registry per pluggable family: the built-in placement policies (§4, §5.2, §5.4), each entry in one place.

An entry is what every part of the package needs to know of a policy beside its rule: the name a spec and a grid row
carry, its words in the text and in the figures' legends, its colour and marker, and the native core's class for it
(``lachesis.node._core``) with the attributes handed to that class.  The rule itself lives in
:mod:`lachesis.memory.policies` (Python) and ``lachesis/node/native/memory/policies.cpp`` (C++), both keyed by
:attr:`PolicyEntry.name`; how to add one is in docs/design.md §5 ("Adding a built-in policy").  Plain data only, so
the memory wing and the figures read it alike (colours as matplotlib strings).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PolicyEntry", "POLICY_REGISTRY", "POLICY_BY_NAME", "policy_entry"]


@dataclass(frozen=True)
class PolicyEntry:
    """A built-in placement policy as the package names, draws and runs it."""

    name: str  #: the spec's name (``as_policy``), a grid row's ``policy``
    words: str  #: its name in the text (tables, sentences; the paper's names, the baselines as the README gives them)
    label: str  #: its name in a figure's legend
    color: str  #: matplotlib colour, the same in every figure
    marker: str  #: matplotlib marker (the baselines beyond the paper are drawn as markers)
    #: the native core's policy class (``lachesis.node._core.policy_kinds``) that runs the same rule; None: the core
    #: calls the Python rule back (identical, slower)
    native: str | None
    native_knobs: tuple[str, ...] = ()  #: the policy object's attributes handed to that class, by name


#: every built-in policy, in the order :data:`lachesis.memory.policies.POLICIES` lists them
POLICY_REGISTRY: tuple[PolicyEntry, ...] = (
    PolicyEntry("hbm_first", "HBM-first", "HBM-first", "#9e9e9e", "s", "HBMFirst"),
    PolicyEntry("hbm_first_reclaim", "HBM-first with reclaim", "HBM-first with reclaim", "#252525", "D",
                "HBMFirst"),
    PolicyEntry("deterministic", "w/o predictive path", "w/o predictive path", "#6baed6", "v", "DeterministicOnly"),
    PolicyEntry("lachesis", "Lachesis", "Lachesis", "#08519c", "o", "Lachesis", ("size_estimate",)),
    PolicyEntry("rho_threshold", "ρR/W selection", "ρR/W selection", "#e6550d", "^", "ReuseThreshold",
                ("quantile", "threshold")),
    PolicyEntry("oracle", "oracle", "oracle (clairvoyant)", "#31a354", "*", "Oracle"),
)

#: the same entries by name
POLICY_BY_NAME: dict[str, PolicyEntry] = {e.name: e for e in POLICY_REGISTRY}


def policy_entry(name: str) -> PolicyEntry | None:
    """The entry of a built-in policy by name (a spec's knobs ignored: ``lachesis:size_estimate=spawn``); None
    for a name no built-in policy has."""
    return POLICY_BY_NAME.get(name.partition(":")[0].strip())
