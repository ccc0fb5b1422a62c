"""A page of an executed notebook (lachesis.pages): the same bytes from the same run, titled, linked, opening on its
figure; what a page must not show is named.  The CI-scale pages `make reproduce-ci` wrote are checked when present
(CI runs it just before `make test`)."""

from __future__ import annotations

import base64
import json
import re

import nbformat
import pytest
from fixture_paths import REPO

from lachesis import pages

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()
ORDER = [pages.Link("fig01", "Fig. 1 — one"), pages.Link("fig02", "Fig. 2 — two"), pages.Link("fig03", "Fig. 3")]


def _executed(run: int, root: str = "/home/someone/clone") -> nbformat.NotebookNode:
    """An executed notebook as papermill writes it: its run's times and ids, a widget, a path of the machine."""
    nb = nbformat.v4.new_notebook()
    defaults = nbformat.v4.new_code_cell("scale: float = 0.05", id="defaults")
    defaults.metadata["tags"] = ["parameters"]
    injected = nbformat.v4.new_code_cell("# Parameters\nscale = 1.0\n", id=f"random-{run}")
    injected.metadata["tags"] = ["injected-parameters"]
    table = nbformat.v4.new_code_cell("display(t)", id="table", execution_count=7, outputs=[
        nbformat.v4.new_output("execute_result", {"text/html": "<table><tr><td>1</td></tr></table>"},
                               execution_count=7),
        *[nbformat.v4.new_output("stream", name="stdout", text=t)  # how the kernel chunks a line varies by run
          for t in ([f"read {root}/build/sweep_cache\n"] if run == 1 else [f"read {root}/build/sweep_cache", "\n"])]])
    bar = nbformat.v4.new_output("display_data", {"application/vnd.jupyter.widget-view+json": {"model_id": f"m{run}"},
                                                  "text/plain": f"100% 3/3 [00:0{run}<00:00]"})
    draw = nbformat.v4.new_code_cell("plt.show()", id="draw", execution_count=9, outputs=[
        bar, nbformat.v4.new_output("display_data", {"image/png": PNG, "text/plain": "<Figure>"})])
    nb.cells = [nbformat.v4.new_markdown_cell("# Fig. 2 — *two*\n\nThe lead.", id="lead"), defaults, injected, table,
                draw]
    for c in nb.cells:
        c.metadata["papermill"] = {"start_time": f"2026-01-0{run}T00:00:00", "duration": run}
        c.metadata["execution"] = {"iopub.status.idle": f"2026-01-0{run}T00:00:01"}
    nb.metadata["papermill"] = {"input_path": f"{root}/notebooks/fig02.ipynb", "duration": 3.0 * run}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {f"m{run}": {}}}}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def test_a_page_is_the_same_bytes_from_two_runs_and_keeps_no_run_metadata() -> None:
    one, two = (pages.page_notebook(_executed(r), "fig02", {"scale": 1.0}, ORDER, "ipynb",
                                    root="/home/someone/clone") for r in (1, 2))
    assert nbformat.writes(one) == nbformat.writes(two)
    text = nbformat.writes(one)
    for gone in ("papermill", "iopub", "widget", "random-", "/home/someone", "scale: float", "00:01"):
        assert gone not in text, gone
    assert [c.id for c in one.cells] == ["page-links", "lead", "page-parameters", "table", "draw"]
    assert [c.execution_count for c in one.cells if c.cell_type == "code"] == [1, 2]
    assert "read build/sweep_cache" in text and "| `scale` | `1.0` |" in text and "fig01.ipynb" in text


def test_the_html_page_opens_on_its_figure_with_its_title_and_links() -> None:
    nb = pages.page_notebook(_executed(1), "fig02", {"scale": 1.0}, ORDER, "html")
    html = pages.html_page(nb, nb.metadata["title"])
    assert "<title>Fig. 2 — two</title>" in html and "Notebook" not in html.split("</title>")[0]
    links = re.findall(r'<a href="([^"]+)">', html.split('class="lachesis-nav"')[1].split("</nav>")[0])
    assert links == ["fig01.html", "index.html", "fig03.html"]
    first, table = html.index(f'src="data:image/png;base64,{PNG}'), html.index("<table><tr><td>1")
    assert html.index("<h1") < first < html.index("Parameters of this run") < html.index("The lead") < table
    assert "plt.show()" not in html and "display(t)" not in html  # the code is hidden
    assert html.count('src="data:image/png') == 2  # the opening figure, then in its place


def test_what_a_page_must_not_show_is_named() -> None:
    nb = _executed(1)
    nb.cells[4].outputs.append(nbformat.v4.new_output("stream", name="stderr",
                                                      text="/tmp/x/plots.py:116: RuntimeWarning: invalid value\n"))
    found = pages.problems(nb)
    assert any("stderr: /tmp/x/plots.py:116: RuntimeWarning" in f for f in found)
    assert any("a machine path: /home/someone/clone/build/sweep_cache" in f for f in found)
    assert any("a widget" in f for f in found)
    assert pages.problems(pages.page_notebook(_executed(1), "fig02", {}, ORDER, "ipynb", root="/home/someone/clone")) \
        == []


def test_the_index_lists_every_page_in_order(tmp_path) -> None:
    html, md = pages.write_index(tmp_path, ORDER)
    assert re.findall(r'<li><a href="([^"]+)"', html.read_text()) == ["fig01.html", "fig02.html", "fig03.html"]
    assert re.findall(r"\]\((\w+\.ipynb)\)", md.read_text()) == ["fig01.ipynb", "fig02.ipynb", "fig03.ipynb"]


CI_PAGES = REPO / "build" / "figures" / pages.FOLDER


@pytest.mark.skipif(not (CI_PAGES / "index.html").is_file(), reason="no CI-scale pages (make reproduce-ci writes them)")
def test_the_ci_scale_pages_open_on_their_figure_and_show_nothing_they_should_not() -> None:
    """Each page `make reproduce-ci` wrote: its notebook's title, its first figure before any table or text of the
    notebook, no warning, machine path or widget; the .ipynb beside it."""
    from lachesis import provenance

    env = provenance.read_environment(CI_PAGES.parent / provenance.ENVIRONMENT_FILE)
    if env.get("sources_sha256") != provenance.source_digest(REPO):
        pytest.skip("the CI-scale pages in build/ were made from other sources than this tree's: make reproduce-ci")
    names = [p.stem for p in (REPO / "notebooks").glob("*.ipynb")]
    for name in names:
        html = (CI_PAGES / f"{name}.html").read_text(encoding="utf-8")
        title = pages.title_of(nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4), name)
        assert f"<title>{title}</title>" in html, name
        assert html.index('class="lachesis-figure"') < html.index("Parameters of this run"), name
        nb = nbformat.read(CI_PAGES / f"{name}.ipynb", as_version=4)
        assert pages.problems(nb) == [], (name, pages.problems(nb))
        assert "papermill" not in json.dumps(nb.metadata), name
