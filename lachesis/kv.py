"""The KV vocabulary, defined once: memory tiers, segment classes and boundaries (§3–§4).

Segment recovery (:mod:`lachesis.analysis.segments`), the figures and the memory wing
(:mod:`lachesis.memory`) share these names and import them downward (docs/design.md §1, §3, §5): the
memory tiers, the segment classes (by axis, and with §4's short-/long-lived split), the boundary kinds,
and the errors of an allocation.  What a placement decision is told lives with the decision
(:mod:`lachesis.memory.protocol`).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "Tier",
    "as_tier",
    "AllocationError",
    "SEG_CLASSES",
    "TEMPORAL_CLASSES",
    "STRUCTURAL_CLASSES",
    "SHORT_LIVED_CLASSES",
    "LONG_LIVED_CLASSES",
    "BOUNDARIES",
    "DEFAULT_BOUNDARY",
    "check_class",
]


class Tier(IntEnum):
    """Memory tier of a KV block (§4: one free list per tier)."""

    HBM = 0
    HBF = 1


_TIERS = (Tier.HBM, Tier.HBF)


def as_tier(tier: Tier | int | str) -> Tier:
    """A :class:`Tier` from a Tier, 0/1, or 'HBM'/'HBF' (any case); ValueError naming the bad value."""
    if tier.__class__ is Tier:
        return tier
    if isinstance(tier, str):
        try:
            return Tier[tier.upper()]
        except KeyError:
            raise ValueError(f"unknown tier {tier!r}; expected 'HBM' or 'HBF'") from None
    if tier in (0, 1):
        return _TIERS[int(tier)]
    raise ValueError(f"unknown tier {tier!r}; expected Tier.HBM (0) or Tier.HBF (1)")


class AllocationError(RuntimeError):
    """Raised when an allocation cannot be served, or on a bad free (double free, unknown id)."""


#: Segment classes (docs/design.md §3): the single-agent temporal split, then the multi-agent roles.
SEG_CLASSES = ("reasoning_laden", "reasoning_stripped", "lead", "worker", "reviewer")
#: The classes of the temporal axis (single agent, §3.3, Fig. 4) and of the structural axis (§3.4, Fig. 5).
TEMPORAL_CLASSES = SEG_CLASSES[:2]
STRUCTURAL_CLASSES = SEG_CLASSES[2:]
#: §4 deterministic path: classes discarded at a boundary well before the session ends.
SHORT_LIVED_CLASSES = frozenset({"reasoning_laden", "worker", "reviewer"})
#: §4 deterministic path: classes that carry past their boundary (reasoning-stripped context, lead).
LONG_LIVED_CLASSES = frozenset({"reasoning_stripped", "lead"})
#: Boundary kinds that close a segment (docs/design.md §3).
BOUNDARIES = ("turn_end", "subagent_return", "session_end")
#: Closing boundary per class when the caller does not give one (docs/design.md §3).
DEFAULT_BOUNDARY = {
    "reasoning_laden": "turn_end",
    "reasoning_stripped": "session_end",
    "lead": "session_end",
    "worker": "subagent_return",
    "reviewer": "subagent_return",
}


_CLASS_SET = frozenset(SEG_CLASSES)


def check_class(segment_id: str, seg_class: str) -> None:
    """Raise ValueError naming the segment when ``seg_class`` is not one of :data:`SEG_CLASSES`."""
    if seg_class not in _CLASS_SET:
        raise ValueError(f"segment {segment_id!r}: unknown seg_class {seg_class!r}; "
                         f"expected one of {sorted(SEG_CLASSES)}")
