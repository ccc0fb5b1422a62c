"""Explorer of the evaluation: one selection's lifetimes, gains, write composition and N*, over seeds.

A *selection* is a cell (workload, model, SLO, memory configuration), a policy and the seeds to show.
:func:`view` reads what the sweep cache holds for it — the Figs. 9–12 grid rows (every grid policy at
HBM-first's N*, each seed after the first at the first seed's load), each policy's own N* when it was
searched, the gain-versus-load runs at fractions of N* and the sensitivity study of the cell (both at
the first seed) — through the cache-only readers (:func:`lachesis.evaluation.sweep.cached_results`,
:func:`lachesis.evaluation.sensitivity.cached`), and, where the cache lacks a part, the committed paper-scale files
of ``figures/`` (:class:`Committed`: the grids, the load curve, the sensitivity gains), so nothing is
simulated and a fresh clone answers every paper-scale cell the figures hold.  Every number over seeds is
the median with its min–max.  What neither holds is listed with the command that computes it
(:func:`command`, ``lachesis explore``), which runs :func:`compute`: the same sweep functions the
notebooks run, into the same cache; in JupyterLab the widget offers to run it with a progress bar.

One module per job, imported in this order: :mod:`.selection` (what is shown, named), :mod:`.figure_files` (the
files of ``figures/``), :mod:`.reading` (a selection read), :mod:`.summaries` (its tables and headline),
:mod:`.missing` (what it lacks and the command that computes it), :mod:`.drawing` (its figure) and
:mod:`.notebook` (display, dropdowns, the notebook's start).
"""

from lachesis.evaluation.explorer.drawing import FIGURE_WIDTH_PX, figure, sel_load_words
from lachesis.evaluation.explorer.figure_files import (
    COMPOSITION_FILES,
    CURVE_FILE,
    GRID_FILES,
    SENSITIVITY_FILE,
    SETTING_COLUMNS,
    Committed,
    Setting,
    committed,
)
from lachesis.evaluation.explorer.missing import command, compute, missing_text, require_cell
from lachesis.evaluation.explorer.notebook import show, start, widget
from lachesis.evaluation.explorer.reading import view
from lachesis.evaluation.explorer.selection import (
    LABELS,
    PARTS,
    STUDY,
    Selection,
    View,
    choices,
    label,
    study_knobs,
)
from lachesis.evaluation.explorer.summaries import (
    FOLDED_DROP,
    composition,
    curve_table,
    headline,
    sensitivity_table,
    summary,
    table,
)

__all__ = ["COMPOSITION_FILES", "CURVE_FILE", "FIGURE_WIDTH_PX", "FOLDED_DROP", "GRID_FILES", "LABELS", "PARTS",
           "SENSITIVITY_FILE", "SETTING_COLUMNS", "STUDY", "Committed", "Selection", "Setting", "View", "choices",
           "command", "committed", "composition", "compute", "curve_table", "figure", "headline", "label",
           "missing_text", "require_cell", "sel_load_words", "sensitivity_table", "show", "start", "study_knobs",
           "summary", "table", "view", "widget"]
