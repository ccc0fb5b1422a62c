"""Run the notebooks through papermill with a params file (the README's ``make reproduce``).

:func:`run_notebooks` runs every planned notebook (:func:`lachesis.parameters.plan`) in two lanes, streams
what it prints, sends its progress to ``build/logs/<notebook>.log``, writes its pages
(:mod:`lachesis.pages`) and, for a complete run, ``ENVIRONMENT.json`` (:mod:`lachesis.provenance`);
:func:`summary` names the notebooks that ran and failed and the real-trace sources that were missing.  One run
at a time per clone (:func:`one_run`); temporaries a stopped run left are removed at the start and the end.

The params file, the run, its exit status and the missing sources are contracts of docs/design.md §1.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TextIO

from lachesis import glance, kernel, pages, provenance
from lachesis.io import write_json
from lachesis.parameters import load_spec, notebook_order, plan, project_root
from lachesis.parameters import notebook_setup as notebook_setup  # each notebook's setup line imports it from here
from lachesis.traces import datasets

#: The notebook whose run reports real-trace sources that could not be fetched.
REAL_TRACES = "real_traces"
#: The notebooks that read the registered real-trace sources: each is fetched for first, and left unrun (its
#: committed figures as they are) while a source it reads is missing.
SOURCE_NOTEBOOKS = (REAL_TRACES, "public_traces")
MISSING_SOURCES_FILE = Path("real_traces") / "missing_sources.json"
#: Under the project root: the lock one run holds, the executed notebooks, each notebook's progress log.
LOCK_FILE = Path("build") / "reproduce.lock"
EXECUTED_DIR = Path("build") / "notebooks"
LOG_DIR = Path("build") / "logs"


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
    shown: list[tuple[str, str]] = field(default_factory=list)  # (notebook, what its page should not show)

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


@contextmanager
def one_run(root: Path) -> Iterator[None]:
    """Hold the clone's reproduce lock (:data:`LOCK_FILE`) for the block: a second run in the same clone at the
    same time is refused with an OSError naming the lock and the process holding it, before it writes
    anything (two runs would share ``build/notebooks`` and write the same figures).  The lock is the
    operating system's (``flock``): it ends with the process, however it ends."""
    path = Path(root) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # no flock (Windows): runs are not kept apart
            pass
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise OSError(16, f"another lachesis reproduce (pid {holder}) is running in this clone; wait for it "
                              "to finish or stop it", str(LOCK_FILE)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def sweep_temporaries(folders: list[Path], log: TextIO) -> list[Path]:
    """Remove the temporary files a stopped write left under ``folders`` (:func:`lachesis.provenance.temporaries`:
    a notebook's kernel ended in the middle of an atomic write); say which."""
    gone = []
    for folder in dict.fromkeys(folders):
        for p in provenance.temporaries(folder):
            p.unlink(missing_ok=True)
            gone.append(p)
    if gone:
        print(f"[reproduce] removed {len(gone)} temporary file(s) a stopped run left: "
              f"{', '.join(p.name for p in gone[:3])}{' …' if len(gone) > 3 else ''}", file=log, flush=True)
    return gone


class _Follow:
    """Until :meth:`close`, copy the lines a notebook's kernel logs to ``path`` onto the run's log, prefixed."""

    def __init__(self, path: Path, out: _Prefixed, interval_s: float = 0.25) -> None:
        self.path, self.out, self.interval_s = path, out, interval_s
        self.done = threading.Event()
        self.pos = 0
        self.thread = threading.Thread(target=self._run, name=f"follow-{path.stem}", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return
        whole = data[: data.rfind(b"\n") + 1]  # a line is copied once it is complete
        if whole:
            self.pos += len(whole)
            self.out.write(whole.decode("utf-8", "replace"))

    def _run(self) -> None:
        while not self.done.wait(self.interval_s):
            self._copy()

    def close(self) -> None:
        self.done.set()
        self.thread.join()
        self._copy()


Job = tuple[int, str, Path, dict[str, Any]]


class _Run:
    """One ``lachesis reproduce`` run: its plan, its outcome, and the notebooks' two lanes."""

    def __init__(self, params_file: Path, only: list[str] | None, build: Path | None, log: TextIO, strict: bool,
                 fetch: bool, overrides: list[tuple[str, str]] | None, serial: bool) -> None:
        self.params_file, self.only, self.log, self.fetch, self.serial = params_file, only, log, fetch, serial
        self.todo = plan(params_file, only, overrides)
        self.root = project_root(params_file)
        self.build = build or self.root / EXECUTED_DIR
        self.spec = load_spec(params_file)
        self.common_out = str((self.spec.get("common") or {}).get("out_dir", "build/figures"))
        self.result = Outcome(strict=strict)
        self.lock = threading.Lock()  # the outcome and the log, shared by the two lanes
        self.stop = threading.Event()
        self.started = time.time()
        self.real_out: Path | None = None
        self.real_local: str | None = None
        import nbformat

        self.links = [pages.Link(n, pages.title_of(nbformat.read(p, as_version=4), n))
                      for n, p in notebook_order(params_file)]

    def out_dir(self, params: dict[str, Any]) -> Path:
        return self.root / str(params.get("out_dir") or self.common_out)

    def say(self, text: str) -> None:
        with self.lock:
            print(text, file=self.log, flush=True)

    def runnable(self) -> list[Job]:
        """The notebooks to run, once the real-trace sources they read are fetched; those still missing a source
        are kept (not run, their figures as they are).  An earlier run that stopped half-way is named."""
        for name, _, params in self.todo:
            if (self.out_dir(params) / f"{name}{provenance.IN_PROGRESS}").is_file():
                self.say(f"[reproduce] {name}: an earlier run stopped while writing its figures in "
                         f"{self.out_dir(params)} ({name}{provenance.IN_PROGRESS}); this run writes them again")
        jobs = []
        for i, (name, src, params) in enumerate(self.todo, start=1):  # every fetch before any notebook runs
            if name in SOURCE_NOTEBOOKS and real_trace_sources(params) is not None:
                got, still = prepare_real_traces(params, self.log, self.fetch)
                self.result.fetched += [g for g in got if g not in self.result.fetched]
                if still:
                    self.result.missing_sources = still
                    why = f"real-trace source(s) missing: {', '.join(still)}"
                    self.result.kept.append((name, why))
                    self.say(f"[reproduce {i}/{len(self.todo)}] {name} not run ({why}); its figures stay as they are")
                    continue
            if name == REAL_TRACES:
                self.real_out = self.root / str(params.get("out_dir", "build/figures"))
                self.real_local = params.get("data") or None
            jobs.append((i, name, src, params))
        return jobs

    def run_one(self, i: int, name: str, src: Path, params: dict[str, Any]) -> None:
        """One notebook: executed into ``build/notebooks``, its progress followed from its log, its pages written;
        a failure is recorded and the run goes on."""
        t0 = time.perf_counter()
        self.say(f"[reproduce {i}/{len(self.todo)}] {name} started  {params}")
        marker = self.out_dir(params) / f"{name}{provenance.IN_PROGRESS}"
        write_json(marker, {"notebook": name, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        log_file = self.root / LOG_DIR / f"{name}.log"
        log_file.unlink(missing_ok=True)
        out = _Prefixed(self.log, f"  [{name}] ", self.lock)
        follow = _Follow(log_file, _Prefixed(self.log, f"  [{name}] ", self.lock))
        try:
            kernel.execute(src, self.build / f"{name}.ipynb", params, self.root, log_file, out)
        except Exception as e:  # noqa: BLE001 — one notebook's failure is reported, the others still run
            with self.lock:
                self.result.failed.append((name, _last_line(e)))
            self.say(f"[reproduce {i}/{len(self.todo)}] {name} FAILED after {time.perf_counter() - t0:.1f} s: "
                     f"{_last_line(e)}")
            return
        finally:
            follow.close()
        self.write_pages(name, params)
        marker.unlink(missing_ok=True)  # every figure of this notebook is this run's
        dt = time.perf_counter() - t0
        with self.lock:
            self.result.ran.append((name, dt))
        self.say(f"[reproduce {i}/{len(self.todo)}] {name} done in {dt:.1f} s")

    def write_pages(self, name: str, params: dict[str, Any]) -> None:
        """The notebook's pages beside its figures, and what in them a page should not show."""
        import nbformat

        folder = self.out_dir(params) / pages.FOLDER
        try:
            written = pages.write(self.build / f"{name}.ipynb", folder, name, params, self.links, self.root)
            shown = pages.problems(nbformat.read(written[-1], as_version=4))
        except Exception as e:  # noqa: BLE001 — the notebook ran; its page is reported missing, the others still run
            with self.lock:
                self.result.failed.append((name, f"its pages in {folder}: {_last_line(e)}"))
            return
        with self.lock:
            self.result.shown += [(name, s) for s in shown]

    def lanes(self, jobs: list[Job]) -> None:
        """The notebooks the params file lists under ``beside:`` in a second thread, the others here; an interrupt
        or a crash here ends the lane beside after its notebook."""
        side = set() if self.serial else set(self.spec.get("beside") or [])  # names checked by plan()
        main, beside = [j for j in jobs if j[1] not in side], [j for j in jobs if j[1] in side]
        errors: list[BaseException] = []

        def run_lane(lane: list[Job]) -> None:
            try:
                for job in lane:
                    if self.stop.is_set():
                        return
                    self.run_one(*job)
            except BaseException as e:  # noqa: BLE001 — raised again in the main thread once both lanes stopped
                errors.append(e)

        second = threading.Thread(target=run_lane, args=(beside,), name="reproduce-beside", daemon=True)
        with kernel.kernel_env():
            second.start()
            try:
                for job in main:
                    self.run_one(*job)
            except BaseException:
                self.stop.set()  # an interrupt or a crash: the lane beside ends with the notebook it is running
                raise
            finally:
                if second.is_alive():
                    self.say("[reproduce] waiting for the notebook beside to finish" if self.stop.is_set()
                             else "[reproduce] waiting for the notebooks beside to finish")
                _join(second, self.stop)
        if errors:
            raise errors[0]

    def finish(self, jobs: list[Job]) -> None:
        """The outcome in the plan's order, the missing sources, the index of pages, the results at a glance
        and, for a complete run, ``ENVIRONMENT.json`` and the run's record."""
        order = {name: i for i, name, _, _ in jobs}
        self.result.ran.sort(key=lambda r: order[r[0]])
        self.result.failed.sort(key=lambda r: order.get(r[0], 0))
        if (self.real_out is not None or self.only is None) and not self.result.kept:
            try:
                self.result.missing_sources = missing_sources(self.real_out, self.started, self.real_local)
            except (OSError, ValueError) as e:  # the summary still prints; the run fails
                self.result.failed.append((REAL_TRACES, f"its list of missing sources: {_last_line(e)}"))
        if self.result.ran:
            ran = {name for name, _ in self.result.ran}
            outs = {self.out_dir(params) for _, name, _, params in jobs if name in ran}  # -p out_dir moves them all
            figures = outs.pop() if len(outs) == 1 else self.root / self.common_out
            pages.write_index(figures / pages.FOLDER, self.links)
            self.result.glance = glance.write(figures)
            if self.only is None:  # a complete run: record what produced these figures
                self.result.environment = provenance.write_environment(figures, self.root, self.params_file)
                provenance.write_run_record(self.root / LOG_DIR / "reproduce.json", self.root, figures, self.started)

    def run(self) -> Outcome:
        folders = [self.out_dir(p) for _, _, p in self.todo]
        self.build.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(folders, self.log)
        try:
            jobs = self.runnable()
            self.lanes(jobs)
            self.finish(jobs)
        finally:
            sweep_temporaries(folders, self.log)  # a kernel stopped in the middle of a write
        return self.result


def run_notebooks(params_file: Path, only: list[str] | None = None, build: Path | None = None,
                  log: TextIO | None = None, strict: bool = False, fetch: bool = True,
                  overrides: list[tuple[str, str]] | None = None, serial: bool = False) -> Outcome:
    """Run the planned notebooks; every one runs even if another fails (see :class:`Outcome`).

    Two lanes: the notebooks the params file lists under ``beside:`` (they simulate nothing) run in order in a
    second thread, the others in order in this one, so the second core is busy while a grid's work is serial;
    ``serial``: one lane, in the plan's order.  An interrupt stops the run after the notebook the second lane is
    running.  One run at a time per clone (:func:`one_run`).

    Real traces: before any notebook runs, the sources the real-trace notebooks read are fetched when missing
    (``fetch``).  If one is still missing (offline), that notebook is not run, so the figures of the run
    that had every source stay as they are, and the summary names the sources with the command that fetches
    them; the run still succeeds unless ``strict``."""
    run = _Run(params_file, only, build, log or sys.stdout, strict, fetch, overrides, serial)  # refuses a bad plan
    with one_run(run.root):
        return run.run()


def summary(result: Outcome) -> str:
    """The closing summary: notebooks run and failed, sources missing and how to fetch them."""
    lines = [f"reproduce: {len(result.ran)} notebook(s) ran, {len(result.failed)} failed, "
             f"{len(result.missing_sources)} real-trace source(s) missing"
             + (" (an error: --strict)" if result.strict and result.missing_sources else "")]
    for name, seconds in result.ran:
        lines.append(f"  ran     {name} ({seconds:.1f} s)")
    for name, err in result.failed:
        lines.append(f"  FAILED  {name}: {err}")
    for name, what in result.shown:
        lines.append(f"  check   {name}'s page: {what}")
    for name, why in result.kept:
        lines.append(f"  kept    {name}: not run, its committed figures kept ({why})")
    if result.fetched:
        lines.append(f"  fetched {', '.join(result.fetched)} (checksummed, into the dataset cache)")
    if result.glance is not None:
        lines.append(f"  results at a glance (docs/results.md's table): {result.glance}")
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
