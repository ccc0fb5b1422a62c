"""Run the notebooks through papermill with a params file (the README's ``make reproduce``).

The params file (YAML) has ``common:`` parameters for every notebook, ``notebooks:`` with one entry
per notebook name (its file stem) overriding them, and optionally ``order:``.  A notebook only
receives the parameters its ``parameters`` cell declares.  Executed copies go to
``build/notebooks/`` (ignored by git).

A run is visible and complete: each notebook's start and end (with its elapsed time) is printed and
its own printed output is streamed as it runs, prefixed with its name; a failing notebook does not
stop the others.  The closing summary lists the notebooks that ran and failed (with the last line
of the error) and the real-trace sources that could not be had offline, with the command that
fetches them.  The run fails (non-zero) if anything failed or is missing.

Missing sources come from ``<out_dir>/real_traces/missing_sources.json`` written by the
``real_traces`` notebook in this run (:func:`lachesis.adapters.report.write_missing`: a JSON list of
records with a ``source``; a list of names, or a mapping holding either under ``missing_sources``, is read too), else from :func:`lachesis.datasets.missing_sources`.

Output checks.  A source notebook carries one output: that of its cell marked ``# NBVAL_CHECK_OUTPUT``,
which prints a few key numbers at the notebook's small defaults; ``make test`` runs the notebook
through nbval, which compares that cell's output with the stored one.  :func:`refresh_check_output`
(``lachesis reproduce --refresh-checks``) runs a notebook at its defaults and stores the new output.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TextIO

import yaml

#: The notebook whose run reports real-trace sources that could not be fetched.
REAL_TRACES = "real_traces"
MISSING_SOURCES_FILE = Path("real_traces") / "missing_sources.json"
#: The kernel's own log (its startup notice about TCP transport) is not the notebook's output; errors
#: in the notebook still reach the run through its cells.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]
#: The backend a notebook kernel draws with: inline, so every figure is an ``image/png`` output of its cell
#: (in JupyterLab and in an executed copy), headless or not.  A headless shell exports ``MPLBACKEND=Agg``
#: for its own plotting (the Makefile does); a kernel inherits its environment, so kernels started here get
#: this one instead.  Notebooks never choose a backend themselves.
KERNEL_BACKEND = "module://matplotlib_inline.backend_inline"


@contextmanager
def kernel_env() -> Iterator[None]:
    """Within the block, kernels started by this process draw inline (:data:`KERNEL_BACKEND`)."""
    old = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = KERNEL_BACKEND
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = old


def image_outputs(nb: Any) -> int:
    """How many ``image/png`` outputs a notebook's code cells hold (a figure drawn inline is one)."""
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


def notebook_parameters(path: Path) -> set[str]:
    """Names declared in a notebook's ``parameters`` cell."""
    import papermill as pm

    return set(pm.inspect_notebook(str(path)).keys())


def project_root(params_file: Path) -> Path:
    """The nearest folder above the params file (or else the working directory) that holds ``notebooks/``."""
    for d in [*Path(params_file).resolve().parents, Path.cwd()]:
        if (d / "notebooks").is_dir():
            return d
    raise FileNotFoundError(f"{params_file}: no notebooks/ folder above it or in {Path.cwd()}")


def load_spec(params_file: Path) -> dict[str, Any]:
    """The params file as a mapping (an empty file is an empty mapping)."""
    spec = yaml.safe_load(Path(params_file).read_text(encoding="utf-8")) or {}
    if not isinstance(spec, dict):
        raise ValueError(f"{params_file}: expected a YAML mapping (common:, notebooks:), got {type(spec).__name__}")
    return spec


def plan(params_file: Path, only: list[str] | None = None) -> list[tuple[str, Path, dict[str, Any]]]:
    """(name, source notebook, parameters) per notebook to run: those the file's ``order:`` names first, then
    the others by name, so none is skipped.  Unknown names in ``only``
    or in the file's ``order:``/``notebooks:`` fail before anything runs, listing the valid names."""
    spec = load_spec(params_file)
    nb_dir = project_root(params_file) / "notebooks"
    available = sorted(p.stem for p in nb_dir.glob("*.ipynb"))
    order = list(spec.get("order") or [])
    for what, names in (("--only", only or []), (f"{params_file} order:", order),
                        (f"{params_file} notebooks:", list((spec.get("notebooks") or {}).keys()))):
        unknown = [n for n in names if n not in available]
        if unknown:
            raise ValueError(f"{what} names no notebook {', '.join(map(repr, unknown))}; "
                             f"valid names: {', '.join(available)}")
    order += [n for n in available if n not in order]  # an order names the first ones; the rest follow, sorted
    out = []
    for name in order:
        if only and name not in only:
            continue
        src = nb_dir / f"{name}.ipynb"
        declared = notebook_parameters(src)
        params = {**(spec.get("common") or {}), **((spec.get("notebooks") or {}).get(name) or {})}
        out.append((name, src, {k: v for k, v in params.items() if k in declared}))
    return out


class _Prefixed:
    """A stream that writes another stream's text with ``prefix`` at the start of every line."""

    def __init__(self, stream: TextIO, prefix: str):
        self.stream, self.prefix, self.at_start = stream, prefix, True

    def write(self, text: str) -> int:
        out = []
        for ch in text:
            if self.at_start and ch not in "\r\n":
                out.append(self.prefix)
                self.at_start = False
            out.append(ch)
            if ch in "\r\n":
                self.at_start = True
        self.stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


@dataclass
class Outcome:
    """What one ``reproduce`` run did."""

    ran: list[tuple[str, float]] = field(default_factory=list)  # (notebook, seconds)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (notebook, last line of its error)
    missing_sources: list[str] = field(default_factory=list)
    glance: Path | None = None  # the results-at-a-glance table written from the figures

    @property
    def ok(self) -> bool:
        return not self.failed and not self.missing_sources


def _last_line(e: BaseException, width: int = 300) -> str:
    """A notebook's error as the last line of its traceback, ``ename: evalue``, folded onto one line."""
    text = f"{e.ename}: {e.evalue}" if hasattr(e, "ename") else f"{e.__class__.__name__}: {e}"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _read_missing(path: Path, since: float) -> list[str] | None:
    """Sources the real-traces notebook of this run listed as missing (None: it wrote no such file)."""
    if not path.is_file() or path.stat().st_mtime < since:
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = data.get("missing_sources", data.get("missing", []))
    if isinstance(data, list):  # the report's records ({"source", "how_to_get"}) or plain names
        data = [x.get("source") if isinstance(x, dict) else x for x in data]
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise ValueError(f"{path}: expected a list of dataset names or of records with a 'source'")
    return data


def missing_sources(out_dir: Path | None, since: float, local: str | None = None) -> list[str]:
    """Real-trace sources this run could not get (module docstring); ``local``: the notebook's offline
    override folder, if its parameters name one."""
    found = _read_missing(out_dir / MISSING_SOURCES_FILE, since) if out_dir is not None else None
    if found is not None:
        return found
    from lachesis.datasets import missing_sources as not_available

    return not_available(local=local or None)


def run_notebooks(params_file: Path, only: list[str] | None = None, build: Path | None = None,
                  log: TextIO | None = None) -> Outcome:
    """Run the planned notebooks; every one runs even if another fails (see :class:`Outcome`)."""
    import papermill as pm

    log = log or sys.stdout
    todo = plan(params_file, only)
    root = project_root(params_file)
    nb_dir = root / "notebooks"
    build = build or root / "build" / "notebooks"
    build.mkdir(parents=True, exist_ok=True)
    result = Outcome()
    real_out: Path | None = None
    real_local: str | None = None
    t_real = time.time()
    for i, (name, src, params) in enumerate(todo, start=1):
        t0 = time.perf_counter()
        print(f"[reproduce {i}/{len(todo)}] {name} started  {params}", file=log, flush=True)
        if name == REAL_TRACES:
            real_out, t_real = nb_dir / str(params.get("out_dir", "../build/figures")), time.time()
            real_local = params.get("data") or None
        try:
            with kernel_env():
                pm.execute_notebook(str(src), str(build / f"{name}.ipynb"), parameters=params, cwd=str(nb_dir),
                                   progress_bar=False, kernel_name="python3",
                                   stdout_file=_Prefixed(log, f"  [{name}] "),
                                   stderr_file=_Prefixed(log, f"  [{name}] "), extra_arguments=KERNEL_ARGUMENTS)
        except Exception as e:  # noqa: BLE001 — one notebook's failure is reported, the others still run
            dt = time.perf_counter() - t0
            result.failed.append((name, _last_line(e)))
            print(f"[reproduce {i}/{len(todo)}] {name} FAILED after {dt:.1f} s: {_last_line(e)}", file=log, flush=True)
            continue
        dt = time.perf_counter() - t0
        result.ran.append((name, dt))
        print(f"[reproduce {i}/{len(todo)}] {name} done in {dt:.1f} s", file=log, flush=True)
    if real_out is not None or only is None:
        try:
            result.missing_sources = missing_sources(real_out, t_real, real_local)
        except (OSError, ValueError) as e:  # the summary still prints; the run fails
            result.failed.append((REAL_TRACES, f"its list of missing sources: {_last_line(e)}"))
    if result.ran:
        from lachesis import glance

        figures = nb_dir / str((load_spec(params_file).get("common") or {}).get("out_dir", "../build/figures"))
        result.glance = glance.write(figures)
    return result


def summary(result: Outcome) -> str:
    """The closing summary: notebooks run and failed, sources missing and how to fetch them."""
    lines = [f"reproduce: {len(result.ran)} notebook(s) ran, {len(result.failed)} failed, "
             f"{len(result.missing_sources)} real-trace source(s) missing"]
    for name, seconds in result.ran:
        lines.append(f"  ran     {name} ({seconds:.1f} s)")
    for name, err in result.failed:
        lines.append(f"  FAILED  {name}: {err}")
    if result.glance is not None:
        lines.append(f"  results at a glance (the README's table): {result.glance}")
    if result.missing_sources:
        lines.append(f"  missing {', '.join(result.missing_sources)} (not downloaded and no offline copy; "
                     "their rows are absent from figures/real_traces)")
        lines.append(f"  fetch them with: lachesis datasets fetch {' '.join(result.missing_sources)}"
                     "   (or point LACHESIS_DATA / --local at an offline copy), then rerun "
                     f"lachesis reproduce --only {REAL_TRACES}")
    return "\n".join(lines)


#: The marker nbval (``--nbval-lax``) looks for: the one cell whose output it compares.
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"


def check_cells(nb: Any) -> list[int]:
    """Indexes of a notebook's code cells marked :data:`CHECK_MARK`."""
    return [i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and any(ln.strip() == CHECK_MARK for ln in c.source.splitlines())]


def refresh_check_output(path: Path) -> str:
    """Run a source notebook at its parameter defaults and store the stdout of its check cell in the
    source as the output nbval expects; return that text.  The source keeps no other output."""
    import nbformat
    import papermill as pm

    path = Path(path)
    src = nbformat.read(path, as_version=4)
    marked = check_cells(src)
    if len(marked) != 1:
        raise ValueError(f"{path}: expected one cell marked {CHECK_MARK!r}, found {len(marked)}")
    cell = src.cells[marked[0]]
    with tempfile.TemporaryDirectory() as tmp, kernel_env():
        pm.execute_notebook(str(path), str(Path(tmp) / path.name), cwd=str(path.parent), progress_bar=False,
                            kernel_name="python3", extra_arguments=KERNEL_ARGUMENTS)
        ran = nbformat.read(Path(tmp) / path.name, as_version=4)
    done = next(c for c in ran.cells if c.get("id") == cell.get("id"))
    text = "".join(o.get("text", "") for o in done.outputs if o.output_type == "stream" and o.name == "stdout")
    if not text:
        raise ValueError(f"{path}: its check cell printed nothing")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    cell.execution_count = 1  # nbval skips the comparison for a cell that was never run
    from lachesis.io import write_text

    out = nbformat.writes(src)
    write_text(path, out if out.endswith("\n") else out + "\n")
    return text

