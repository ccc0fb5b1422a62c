"""Each executed notebook as a page beside its figures: ``<out_dir>/notebooks/NAME.html`` and ``NAME.ipynb``.

The HTML page is a report that opens on its figure: titled after the notebook's heading, a line of links
(previous, all pages, next), the notebook's first figure, the parameters the run injected as a small table,
then the notebook's text, tables and figures with the code hidden (nbconvert's ``exclude_input``), every image
embedded so it reads as one file.  The ``.ipynb`` beside it is the executed notebook (code and outputs) in
the form GitHub renders, with the same links and table; ``index.html`` and ``README.md`` list the pages.

Both are written so that the same run writes the same bytes (:func:`page_notebook`): no papermill or timing
metadata, no widget state, fixed cell ids and execution counts.  What a notebook prints must carry no time
or machine path itself; :func:`problems` names any output that does.
"""

from __future__ import annotations

import copy
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lachesis.io import write_text

#: Where, under a run's ``out_dir``, the pages go.
FOLDER = "notebooks"
INDEX = "index"
#: The cell tags of the notebook's defaults (``parameters``) and papermill's injected values: the page shows
#: the values as a table instead.
PARAMETER_TAGS = ("parameters", "injected-parameters")
#: Output types a page keeps; a widget (a progress bar) is state of a live kernel, not a result.
WIDGET = "application/vnd.jupyter.widget-view+json"
#: The notebook-level metadata a page keeps (the rest is papermill's run record: times, machine paths).
KEPT_METADATA = ("kernelspec", "language_info")
STYLE = """<style>
.lachesis-nav { font: 14px/1.6 system-ui, sans-serif; padding: 6px 0; border-bottom: 1px solid #ddd; }
.lachesis-nav a { text-decoration: none; margin-right: 1.2em; }
.lachesis-figure img { max-width: 100%; max-height: 580px; }
.jp-OutputArea-output, .jp-RenderedHTMLCommon { overflow-x: auto; }
.jp-RenderedHTMLCommon table { font-size: 12px; }
</style>
"""


@dataclass(frozen=True)
class Link:
    """A neighbouring page: its notebook name and title."""

    name: str
    title: str


def title_of(nb: Any, default: str) -> str:
    """The text of the notebook's first markdown heading (``# Fig. 9 — …``), without markup; ``default``
    when it has none."""
    for c in nb.cells:
        if c.cell_type == "markdown":
            m = re.search(r"^#+\s+(.+?)\s*#*\s*$", c.source, re.MULTILINE)
            if m:
                return re.sub(r"[*_`]", "", m.group(1)).strip()
    return default


def parameters_table(params: dict[str, Any]) -> str:
    """Markdown: the parameters a run injected, one row each (none: the notebook's own defaults)."""
    if not params:
        return "*Parameters of this run: the notebook's defaults.*"
    rows = [f"| `{k}` | `{v!r}` |" if not isinstance(v, str) else f"| `{k}` | `{v}` |" for k, v in params.items()]
    return "\n".join(["**Parameters of this run**", "", "| parameter | value |", "|---|---|", *rows])


def short(title: str, width: int = 48) -> str:
    """A title as a link names it: up to its first dash or colon (``Figures 9–10``), at most ``width`` characters."""
    head = re.split(r" — |: ", title, maxsplit=1)[0]
    return head if len(head) <= width else head[: width - 1].rstrip() + "…"


def nav(name: str, order: Sequence[Link], ext: str) -> str:
    """HTML: links to the previous page, the index and the next page (in the run's order), as ``NAME.<ext>``."""
    names = [p.name for p in order]
    i = names.index(name) if name in names else -1
    index = "README.md" if ext == "ipynb" else f"{INDEX}.html"
    parts = []
    if i > 0:
        parts.append(f'<a href="{order[i - 1].name}.{ext}">← {html.escape(short(order[i - 1].title))}</a>')
    parts.append(f'<a href="{index}">all pages</a>')
    if 0 <= i < len(order) - 1:
        parts.append(f'<a href="{order[i + 1].name}.{ext}">{html.escape(short(order[i + 1].title))} →</a>')
    return '<nav class="lachesis-nav">' + " ".join(parts) + "</nav>"


def _first_image(nb: Any) -> str | None:
    """The base64 PNG of the notebook's first figure (None: it drew none)."""
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            png = o.get("data", {}).get("image/png")
            if png:
                return "".join(png).replace("\n", "")
    return None


def _relative(text: str, root: str) -> str:
    """``text`` with the repository root's absolute path left out: ``<root>/build/x`` reads ``build/x``."""
    return text.replace(root + "/", "").replace(root, ".") if root else text


def _clean_output(o: Any, root: str) -> Any | None:
    """An output as the page keeps it (None: a widget, dropped), the repository's paths relative to its root."""
    if WIDGET in o.get("data", {}):
        return None
    if o.output_type == "stream":
        o.text = _relative(o.text, root)
    for key, value in o.get("data", {}).items():
        if key.startswith("text/") and isinstance(value, str):
            o.data[key] = _relative(value, root)
    return o


def _coalesced(outputs: list[Any]) -> list[Any]:
    """Consecutive stream outputs of one stream as one: how the kernel happened to chunk a cell's printing (one
    message or two) is not part of the page."""
    out: list[Any] = []
    for o in outputs:
        if out and o.output_type == "stream" and out[-1].output_type == "stream" and out[-1].name == o.name:
            out[-1].text += o.text
        else:
            out.append(o)
    return out


def page_notebook(executed: Any, name: str, params: dict[str, Any], order: Sequence[Link], ext: str,
                  root: Path | None = None) -> Any:
    """The executed notebook as its page: the same bytes from the same run.

    The defaults cell and papermill's injected cell give way to a table of the injected values; a markdown
    cell of links opens the page (``ext``: the pages' suffix, ``html`` or ``ipynb``); for ``html`` the first
    figure is shown again under the title, so the page opens on it.  Papermill's and the kernel's run
    metadata (times, paths, widget state) are dropped, cell ids kept from the source, execution counts
    renumbered from 1; paths inside the repository ``root`` are shown relative to it, as a parameter names them,
    so a clone anywhere writes the same page."""
    import nbformat

    nb = copy.deepcopy(executed)
    nb.metadata = nbformat.NotebookNode({k: nb.metadata[k] for k in KEPT_METADATA if k in nb.metadata})
    title = title_of(nb, name)
    cells, count, figures = [], 0, 0
    for c in nb.cells:
        if c.cell_type == "code" and set(c.metadata.get("tags", [])) & set(PARAMETER_TAGS):
            continue
        c.metadata = nbformat.NotebookNode({k: v for k, v in c.metadata.items() if k == "tags"})
        if c.cell_type == "code":
            outs = _coalesced([o for o in (_clean_output(o, str(root or "")) for o in c.outputs) if o is not None])
            count += 1
            c.execution_count = count
            c.outputs = outs
            for o in outs:
                if o.output_type == "execute_result":
                    o.execution_count = count
                if "image/png" in o.get("data", {}):
                    figures += 1
                    o.metadata["alt"] = f"{title}: figure {figures}"
        cells.append(c)
    head = [nav(name, order, ext)]
    if ext == "html":
        lead = next((c for c in cells if c.cell_type == "markdown"), None)
        if lead is not None and (m := re.search(r"^#+\s+.+$", lead.source, re.MULTILINE)):
            lead.source = (lead.source[:m.start()] + lead.source[m.end():]).strip()
        head.append(f"# {title}")
        if png := _first_image(nb):
            head.append(f'<div class="lachesis-figure"><img alt="{html.escape(title)}" '
                        f'src="data:image/png;base64,{png}"></div>')
    opening = nbformat.v4.new_markdown_cell("\n\n".join(head), id="page-links")
    table = nbformat.v4.new_markdown_cell(parameters_table(params), id="page-parameters")
    lead = cells[:1] if ext == "ipynb" else []  # the notebook's own heading opens its .ipynb
    nb.cells = [opening, *lead, table, *cells[len(lead):]]
    nb.metadata["title"] = title
    return nb


#: nbconvert's lab template, each figure's image given its alternative text (``metadata.alt`` of the output).
TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{% block data_png scoped %}{{ super() | replace('<img src=', '<img alt="' ~ (output.metadata.get('alt') or 'figure')
                                                | e ~ '" src=') }}{% endblock data_png %}"""


def html_page(nb: Any, title: str) -> str:
    """The page notebook as one HTML file: code hidden, images embedded, wide tables scrolled."""
    import jinja2
    import nbconvert

    exporter = nbconvert.HTMLExporter(embed_images=True, exclude_input=True, exclude_input_prompt=True,
                                      exclude_output_prompt=True, template_file="page.html.j2",
                                      extra_loaders=[jinja2.DictLoader({"page.html.j2": TEMPLATE})])
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body.replace("</head>", STYLE + "</head>", 1)


def write(executed: Path, folder: Path, name: str, params: dict[str, Any], order: Sequence[Link],
          root: Path | None = None) -> list[Path]:
    """``folder/NAME.html`` and ``folder/NAME.ipynb`` from the executed notebook (:func:`page_notebook`),
    atomically."""
    import nbformat

    run = nbformat.read(executed, as_version=4)
    as_html = page_notebook(run, name, params, order, "html", root)
    as_ipynb = page_notebook(run, name, params, order, "ipynb", root)
    text = nbformat.writes(as_ipynb)
    return [write_text(folder / f"{name}.html", html_page(as_html, as_html.metadata["title"])),
            write_text(folder / f"{name}.ipynb", text if text.endswith("\n") else text + "\n")]


def write_index(folder: Path, order: Sequence[Link], heading: str = "Executed notebooks") -> list[Path]:
    """``folder/index.html`` (for the HTML pages) and ``folder/README.md`` (what GitHub shows under the folder's
    files, linking the ``.ipynb`` pages it renders), each listing the pages in the run's order."""
    items = "\n".join(f'<li><a href="{p.name}.html">{html.escape(p.title)}</a> '
                      f'(<a href="{p.name}.ipynb">notebook</a>)</li>' for p in order)
    page = (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{heading}</title>\n"
            f"<style>body {{ font: 16px/1.7 system-ui, sans-serif; max-width: 60em; margin: 2em auto; }}"
            f"</style>\n</head>\n<body>\n<h1>{heading}</h1>\n<p>Each page opens on its figure; the code is in the "
            f"notebook beside it.</p>\n<ol>\n{items}\n</ol>\n</body>\n</html>\n")
    md = "\n".join([f"# {heading}", "", "Each notebook as executed by `lachesis reproduce`: the `.ipynb` (rendered "
                    "here, code and outputs) and the `.html` report beside it (code hidden; download to read).", "",
                    *[f"{i}. [{p.title}]({p.name}.ipynb) ([HTML]({p.name}.html))" for i, p in enumerate(order, 1)],
                    ""])
    return [write_text(folder / f"{INDEX}.html", page), write_text(folder / "README.md", md)]


#: What a page's outputs must not hold: an absolute path of this machine, a warning printed by the kernel.
_PATH = re.compile(r"(?<![\w.])/(?:home|root|tmp|Users|work|var|private)/[^\s\"'<>]+")


def problems(nb: Any) -> list[str]:
    """What in a page's outputs it should not show, one line each: a warning or other stderr text, an absolute
    path (a home, temporary or other machine folder), a widget."""
    found = []
    for i, c in enumerate(nb.cells):
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            text = "".join(o.get("text", "")) if o.output_type == "stream" else \
                " ".join("".join(v) for k, v in o.get("data", {}).items() if k.startswith("text/"))
            if o.output_type == "stream" and o.name == "stderr" and text.strip():
                found.append(f"cell {i}: stderr: {text.strip().splitlines()[0][:160]}")
            if m := _PATH.search(text):
                found.append(f"cell {i}: a machine path: {m.group(0)}")
            if WIDGET in o.get("data", {}):
                found.append(f"cell {i}: a widget (a progress bar?)")
    return found
