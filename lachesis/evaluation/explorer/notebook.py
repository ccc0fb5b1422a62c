"""The explorer in a notebook: a selection displayed (headline, figure, tables, what is missing), the dropdowns
that redraw it in JupyterLab, and the notebook's start from its parameters."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from lachesis.evaluation.explorer.drawing import FIGURE_WIDTH_PX, figure
from lachesis.evaluation.explorer.figure_files import GRID_FILES, Committed, committed
from lachesis.evaluation.explorer.missing import missing_text
from lachesis.evaluation.explorer.reading import view
from lachesis.evaluation.explorer.selection import STUDY, Selection, View, choices, label, study_knobs
from lachesis.evaluation.explorer.summaries import (
    _labelled,
    composition,
    curve_table,
    headline,
    sensitivity_table,
    table,
)
from lachesis.plotting import save_figure


def _details(title: str, df: pd.DataFrame) -> str:
    """A table folded under its title (HTML ``<details>``: opens on a click in JupyterLab and in a static page)."""
    table = df.to_html(index=False, na_rep="", float_format="{:.3g}".format)
    return f"<details><summary><b>{title}</b></summary>{table}</details>"


def show(sel: Selection, cache_dir: str | Path, fractions: Sequence[float] = (), knobs: Sequence[str] = STUDY,
         out_dir: str | Path | None = None, store: Committed | None = None) -> View | None:
    """Display a selection in a notebook: the headline, the figure (saved under ``out_dir``), the summary in the
    figures' words, the other tables folded, then where it was read and what is missing."""
    from IPython.display import HTML, Image, Markdown, display

    knobs = study_knobs(knobs)  # a knob the explorer cannot run is the notebook's parameter, not the cache: raised
    sel_txt = (f"{label('workload', sel.workload)}, {sel.model}, {label('slo', sel.slo)} SLO, {sel.memory}, "
               f"{label('policy', sel.policy)}")
    try:
        v = view(sel, cache_dir, fractions, knobs, store)
    except (ValueError, KeyError) as e:
        display(Markdown(f"**{sel_txt}**: {e}"))
        return None
    display(Markdown(f"### {sel_txt}\n\n{headline(v)}"))
    fig = figure(v)
    if fig is not None:
        if out_dir is not None:
            png = save_figure(fig, out_dir, "explorer")[0]
            display(Image(filename=str(png), width=FIGURE_WIDTH_PX))  # at its size, not the 150-dpi file's
        else:
            display(fig)
    over = f", median (min–max) over seeds {', '.join(map(str, sel.seeds))}" if len(sel.seeds) > 1 else ""
    t = table(v)
    if not t.empty:
        display(Markdown(f"**Every policy at the cell's load{over}** (◀: the selected policy)"))
        display(HTML(t.to_html(index=False)))
    folded = [(f"Write composition (% of each run's KV write bytes{over and ', mean over seeds'})",
               composition(v)),
              (f"Lifetime against sessions per GPU (seed {sel.seeds[0]})", curve_table(v)),
              (f"Sensitivity at the cell's fixed load (seed {sel.seeds[0]})", sensitivity_table(v))]
    html = [_details(title, _labelled(df)) for title, df in folded if not df.empty]
    if html:
        display(HTML("".join(html)))
    display(Markdown(missing_text(v, cache_dir, fractions, knobs)))
    return v


def widget(initial: Selection, show: Callable[[Selection], View | None],
           run: Callable[[Selection, list[str]], Any] | None = None) -> Any:
    """Dropdowns for workload, model, SLO, memory and policy (in the figures' words); a change renders
    ``show(selection)`` below them.  When that view lacks parts and ``run`` is given, a button offers to
    compute them (``run(selection, parts)``, whose progress bar shows below it) and then redraws.

    Nothing is rendered until a dropdown changes (the notebook shows the initial selection above): a
    headless run (papermill, nbval) then sends no output into the widget, which its clients need not handle.
    """
    import ipywidgets as w

    drops = {k: w.Dropdown(options=[(label(k, x), x) for x in v], value=getattr(initial, k), description=k)
             for k, v in choices().items()}
    out = w.Output()

    def current() -> Selection:
        return replace(initial, **{k: d.value for k, d in drops.items()})

    def redraw(_: Any = None) -> None:
        out.clear_output()
        box.offer = None
        sel = current()
        with out:
            v = show(sel)
            if run is not None and v is not None and v.missing:
                n = sum(len(x) for x in v.missing.values())
                button = w.Button(description=f"Simulate the {n} missing run(s)", icon="play",
                                  tooltip=f"{', '.join(v.missing)} of this selection, into the sweep cache "
                                          f"(scale {sel.scale:g}, {sel.search} search: minutes per cell)",
                                  layout=w.Layout(width="auto"))

                def go(_: Any, sel: Selection = sel, parts: tuple[str, ...] = tuple(v.missing)) -> None:
                    button.disabled = True
                    button.description = "simulating…"
                    with out:
                        run(sel, list(parts))
                    redraw()

                button.on_click(go)
                box.offer = button
                from IPython.display import display

                display(button)

    for d in drops.values():
        d.observe(redraw, names="value")
    box = w.VBox([w.HBox(list(drops.values())[:3]), w.HBox(list(drops.values())[3:]), out])
    box.redraw = redraw  # for tests and scripts: render the current selection
    box.offer = None  # the button that offers to simulate what the current selection lacks, if any
    return box


#: The explorer notebook's defaults for the setting ``source: cache`` reads (notebooks/explorer.ipynb's parameters
#: cell; tests/evaluation/test_explorer.py checks they agree).  ``source: figures`` reads the setting
#: ENVIRONMENT.json records instead, so a value given other than these (and other than the recorded one) is refused,
#: not ignored; a ``cache_dir`` given is honoured (read first, the committed files for what it lacks).
NOTEBOOK_SETTING: dict[str, Any] = dict(scale=0.05, seeds=(0,), search="ci", node="one_gpu", load="per_deployment")
NOTEBOOK_CACHE = "build/sweep_cache"


def start(source: str, figures: str | Path, cache_dir: str | Path, scale: float, seeds: Sequence[int], search: str,
          node: str = "paper", load: str = "per_deployment", **cell: str) -> tuple[Selection, Path, Committed | None]:
    """The notebook's selection, sweep cache and committed results: ``source`` "figures" explores the paper-scale
    results committed in ``figures`` (at the scale, search, seeds, node and load rule ENVIRONMENT.json records for
    them: another value given is refused, :data:`NOTEBOOK_SETTING`; the cache it records, or ``cache_dir`` when one
    other than the notebook's default is given), "cache" the cache at the given setting alone."""
    from lachesis.paths import repo_path

    if source not in ("figures", "cache"):
        raise ValueError(f"explorer: source must be 'figures' or 'cache', got {source!r}")
    if source == "cache":
        return Selection(scale=scale, seeds=tuple(seeds), search=search, node=node, load=load, **cell), \
            Path(cache_dir), None
    store = committed(figures)
    if store is None or store.setting is None:
        raise ValueError(f"explorer: {figures}: no ENVIRONMENT.json recording the grid's setting, or no grid file "
                         f"({', '.join(GRID_FILES)}); run with source: cache")
    st = store.setting
    recorded: dict[str, Any] = dict(scale=st.scale, seeds=st.seeds, search=st.search, node=st.node, load=st.load)
    given: dict[str, Any] = dict(scale=float(scale), seeds=tuple(seeds), search=search, node=node, load=load)
    for k, v in given.items():
        if v != NOTEBOOK_SETTING[k] and v != recorded[k]:
            shown = ", ".join(f"{n} {','.join(map(str, x)) if n == 'seeds' else f'{x:g}' if n == 'scale' else x}"
                              for n, x in recorded.items())
            raise ValueError(f"explorer: source figures reads {figures} at the setting its ENVIRONMENT.json records "
                             f"({shown}), so {k} {v!r} would be ignored: set source: cache to explore the sweep cache "
                             f"at {k} {v!r}")
    own = Path(cache_dir).resolve() != repo_path(NOTEBOOK_CACHE).resolve()
    sel = Selection(scale=st.scale, seeds=st.seeds, search=st.search, node=st.node, load=st.load, **cell)
    return sel, Path(cache_dir) if own else repo_path(st.cache_dir or cache_dir), store
