"""What a view lacks, said with the command that computes it (``lachesis explore``), and the computing itself:
the notebooks' own sweep functions into the same cache."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Sequence

from lachesis.evaluation import sensitivity, sweep
from lachesis.evaluation.explorer.selection import PARTS, STUDY, Selection, View, cache_folder, study_knobs


def command(sel: Selection, cache_dir: str | Path, parts: Sequence[str], fractions: Sequence[float] = (),
            knobs: Sequence[str] = STUDY) -> str:
    """The shell command (``lachesis explore``, through this interpreter) that computes ``parts`` of a
    selection into ``cache_dir``, from any folder."""
    args = [sys.executable or "python", "-m", "lachesis", "explore", "--cache-dir", str(Path(cache_dir).resolve()),
            "--search", sel.search, "--scale", f"{sel.scale:g}", "--seeds", ",".join(map(str, sel.seeds)),
            "--workload", sel.workload, "--model", sel.model, "--slo", sel.slo, "--memory", sel.memory,
            "--policy", sel.policy, "--node", sel.node, "--load", sel.load, "--parts", ",".join(parts)]
    if "load" in parts and len(fractions):
        args += ["--fractions", ",".join(f"{f:g}" for f in fractions)]
    if "sensitivity" in parts:
        args += ["--knobs", ",".join(study_knobs(knobs))]
    return shlex.join(args)


def compute(sel: Selection, cache_dir: str | Path, parts: Sequence[str] = PARTS, fractions: Sequence[float] = (),
            knobs: Sequence[str] = STUDY, n_jobs: int | None = None, progress: bool = True) -> None:
    """Run what ``parts`` of a selection need, into ``cache_dir``, with the notebooks' own sweep functions."""
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"explorer: unknown part {bad[0]!r}; expected some of {list(PARTS)}")
    knobs = study_knobs(knobs) if "sensitivity" in parts else knobs
    cache = cache_folder(cache_dir)
    if "grid" in parts:
        sweep.run_grid(sel.points(), sel.params, cache, n_jobs, load=sel.load, progress=progress)
    if "load" in parts and len(fractions):
        sweep.load_curve(sel.curve_points(), [float(f) for f in fractions], sel.params, cache, n_jobs,
                         progress=progress)
    if "sensitivity" in parts:
        sensitivity.run([sel.study_points()], knobs, params=sel.params, cache_dir=cache, n_jobs=n_jobs,
                        progress=progress)


def missing_text(v: View, cache_dir: str | Path, fractions: Sequence[float] = (),
                 knobs: Sequence[str] = STUDY) -> str:
    """Markdown: where each part was read, which points neither the cache nor the committed figures hold,
    per part, and the command that computes them."""
    read = "; ".join(f"{part} from {where}" for part, where in v.sources.items() if part not in v.missing)
    if not v.missing:
        return f"Read without simulating ({read or 'the cache'}); nothing is missing."
    lines = []
    for part, what in v.missing.items():
        lines.append(f"- **{part}**: {len(what)} missing, e.g. {'; '.join(what[:3])}")
    cmd = command(v.selection, cache_dir, list(v.missing), fractions, knobs)
    return "\n".join([f"Read without simulating: {read or 'nothing'}.", "",
                      "Not in the cache nor in the committed figures (nothing was simulated for them):", *lines, "",
                      "Compute them with:", "", f"```\n{cmd}\n```"])


def require_cell(v: View | None, sel: Selection, cache_dir: str | Path) -> View:
    """``v`` when the cache gave the selected policy's grid row(s); else a ValueError saying, in one line, that
    the cache holds nothing to show for this cell and the command that computes it (what the explorer
    notebook ends with on an empty cache, instead of a KeyError in a table of no rows)."""
    seeds = ",".join(map(str, sel.seeds))
    what = f"{sel.workload}, {sel.model}, {sel.slo} SLO, {sel.memory}, {sel.policy}, seeds {seeds}"
    if v is None:
        raise ValueError(f"explorer: {what}: could not be read from the cache {cache_dir} or the committed figures "
                         "(the reason is printed above)")
    if v.grid.empty or not v.grid["policy"].eq(sel.policy).any():
        held = "nothing" if v.grid.empty else f"no {sel.policy} row (only {', '.join(sorted(set(v.grid['policy'])))})"
        raise ValueError(f"explorer: {what}: the cache {cache_dir} holds {held} for this cell, so there is nothing "
                         f"to show; compute it with: {command(sel, cache_dir, ['grid'])}  (or run the notebook with "
                         "compute: grid)")
    return v

