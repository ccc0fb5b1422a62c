"""The ``lachesis`` command line: parse, call the typed package functions, print what they return.

Each subcommand's handler lives here and calls plain typed functions of the package; run
``lachesis <cmd> --help``.
Arguments are checked where they are parsed (each ``type=`` function names what it expects), and
every expected error ends the command with ONE line on stderr, ``lachesis <cmd>: error: <what>``,
and exit status 2 (``--debug`` shows the traceback instead).  Exit status 1 means the command ran
and found something wrong (bad files, failed notebooks, missing sources).  A handler imports the package
modules its subcommand needs when it runs, so ``lachesis --help`` and one subcommand load only their own.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence
from urllib.parse import urlsplit

from lachesis.version import __version__

if TYPE_CHECKING:
    from lachesis.evaluation.explorer import Selection

DESCRIPTION = """\
Lachesis: lifetime-aware KV cache placement across HBM and high-bandwidth flash (HBF).

Typical use:
  lachesis corpus --scale 0.1 --out build/corpus     # write the synthetic agent-trace corpus
  lachesis segments build/corpus/multi_agent         # per-class lifetime summary of a trace
  lachesis datasets list                             # real public traces and their cache state
  lachesis evaluate path/to/trace --configs 1/7,4/4  # will Lachesis help on this trace?
  lachesis reproduce --params notebooks/params/paper.yaml   # every paper figure into figures/
"""

#: The choices of --node, --load and --search, named here so ``lachesis --help`` imports no package module;
#: tests/test_cli.py checks them against lachesis.evaluation.knobs.NODES, grid.LOADS and capacity.SEARCH_PRESETS.
NODES = ("paper", "one_gpu")
LOADS = ("per_deployment", "per_cell", "min", "own")
SEARCHES = ("paper", "ci")
#: Seconds to wait for a Dask scheduler to accept a connection before giving up.
SCHEDULER_PROBE_S = 5.0


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's own help, each option's default shown (``(default: 1.0)``) where it has one to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == [] or not action.help:
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``lachesis corpus: error: argument --scale: ...``); every
    subcommand's help shows its defaults (:class:`_Formatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


# ------------------------------------------------------------------------------------------------
# Argument types: each raises ArgumentTypeError, which argparse prefixes with the argument's name
# ------------------------------------------------------------------------------------------------


def positive_float(text: str) -> float:
    """A finite number > 0 (``--scale``)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return v


def seed(text: str) -> int:
    """A whole number >= 0 (numpy seeds)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return v


def workload(text: str) -> str:
    """A workload of the synthetic corpus."""
    from lachesis.traces.workloads import WORKLOADS

    if text not in WORKLOADS:
        raise argparse.ArgumentTypeError(f"unknown workload {text!r}; choose from {', '.join(WORKLOADS)}")
    return text


def dataset(text: str) -> str:
    """A registered real public trace."""
    from lachesis.traces.datasets import names

    if text not in names():
        raise argparse.ArgumentTypeError(f"unknown dataset {text!r}; choose from {', '.join(names())}")
    return text


def trace_path(text: str) -> Path:
    """A trace: a folder or a requests file that exists."""
    p = Path(text)
    if not p.exists():
        raise argparse.ArgumentTypeError(f"no trace at {text}")
    return p


def existing_folder(text: str) -> Path:
    p = Path(text)
    if not p.is_dir():
        raise argparse.ArgumentTypeError(f"no folder at {text}")
    return p


def _writable_parent(p: Path) -> None:
    """The nearest existing folder above ``p`` must be a folder this process may write in."""
    anc = p.parent
    while not anc.exists():
        anc = anc.parent
    if not anc.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create {p}: {anc} is a file, not a folder")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot create {p}: {anc} is not writable")


def _a_path(text: str) -> Path:
    """``text`` as a path; an empty text (which would name the working folder) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give a file or folder name")
    return Path(text)


def out_folder(text: str) -> Path:
    """An output folder: an existing folder, or a path that can be created."""
    p = _a_path(text)
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a folder")
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text} is not writable")
    else:
        _writable_parent(p)
    return p


def out_table(text: str) -> Path:
    """An output table file: ``.csv`` or ``.parquet``, not a folder, in a writable place."""
    p = _a_path(text)
    if p.suffix not in (".csv", ".parquet"):
        raise argparse.ArgumentTypeError(f"must end in .csv or .parquet, got {text!r}")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder")
    if p.exists() and not os.access(p, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} is not writable")
    _writable_parent(p)
    return p


def out_file(text: str) -> Path:
    """An output file (any suffix) in a writable place."""
    p = _a_path(text)
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder")
    _writable_parent(p)
    return p


def params_file(text: str) -> Path:
    """A YAML params file that parses to a mapping (``common:``, ``notebooks:``, ``order:``)."""
    import yaml

    p = Path(text)
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"no params file at {text}")
    try:
        spec = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        raise argparse.ArgumentTypeError(f"{text}: not valid YAML{at}: {getattr(e, 'problem', e)}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise argparse.ArgumentTypeError(f"{text}: cannot read: {e}") from None
    if spec is not None and not isinstance(spec, dict):
        raise argparse.ArgumentTypeError(f"{text}: expected a YAML mapping (common:, notebooks:), got "
                                         f"{type(spec).__name__}")
    return p


def jobs(text: str) -> int:
    """A number of worker processes, a whole number >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def seeds(text: str) -> tuple[int, ...]:
    """Comma-separated whole numbers >= 0 (``--seeds 0,1,2``)."""
    vals = tuple(seed(x.strip()) for x in text.split(",") if x.strip())
    if not vals:
        raise argparse.ArgumentTypeError(f"expected seeds like 0,1,2, got {text!r}")
    return vals


def names(text: str) -> list[str]:
    """Comma-separated names (empty entries dropped)."""
    return [x.strip() for x in text.split(",") if x.strip()]


def fractions(text: str) -> list[float]:
    """Comma-separated numbers > 0 (``--fractions 0.25,0.5``)."""
    return [positive_float(x) for x in names(text)]


def scheduler(text: str) -> str:
    """A Dask scheduler address, ``tcp://host:port`` (or ``host:port``, ``tls://``, ``inproc://``, ``ucx://``)."""
    url = text if "://" in text else "tcp://" + text
    parts = urlsplit(url)
    if parts.scheme not in ("tcp", "tls", "inproc", "ucx"):
        raise argparse.ArgumentTypeError(f"unknown scheme {parts.scheme!r} in {text!r}; expected tcp://host:port")
    try:
        port = parts.port
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in {text!r}") from None
    if parts.scheme in ("tcp", "tls") and (not parts.hostname or port is None):
        raise argparse.ArgumentTypeError(f"expected tcp://host:port, got {text!r}")
    return url


# ------------------------------------------------------------------------------------------------
# Subcommands: one _name(sub) per subcommand adds its parser and sets ``run``
# ------------------------------------------------------------------------------------------------


def _corpus(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corpus", help="generate the embedded synthetic corpus (one trace per workload)",
                       description="Write the synthetic agent-trace corpus (Table 3's eleven workloads, seeded): one "
                                   "trace folder per workload, in the trace contract (docs/design.md §2).")
    p.add_argument("--scale", type=positive_float, default=1.0,
                   help="multiple of the paper's session counts (at most corpus.MAX_SCALE)")
    p.add_argument("--seed", type=seed, default=0, help="random seed (same seed, same corpus)")
    p.add_argument("--out", type=out_folder, required=True, help="output folder; one sub-folder per workload trace")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help="the trace files' format")
    p.add_argument("--workloads", nargs="*", type=workload, default=None,
                   help="subset of workload names (default: all)")

    def run(a: argparse.Namespace) -> int:
        from lachesis.traces.corpus import check_scale, cost, write_all

        if check_scale(a.scale) >= 8:  # above corpus.MAX_SCALE refused; a large one says what it will take
            print(f"scale {a.scale:g}: about {cost(a.scale)}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        for name, tr in write_all(a.out, a.scale, a.seed, a.format, a.workloads or None).items():
            print(f"{name:26s} sessions={tr.requests['session_id'].nunique():5d} requests={len(tr.requests):6d} "
                  f"spawns={len(tr.spawns):5d} -> {a.out / name}")
        print(f"generated in {time.perf_counter() - t0:.1f} s")
        return 0
    p.set_defaults(run=run)


def _segments(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("segments", help="recover context segments of a trace and summarize them per class",
                       description="Recover a trace's context segments (§3.2: each with its class, size, open and "
                                   "close time on the reference clock) and print their lifetimes per class.")
    p.add_argument("trace", type=trace_path, help="trace folder or requests file (JSONL/Parquet)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the reference clock's tool/user draws")
    p.add_argument("--out", type=out_table, default=None,
                   help="also write the per-segment table here (.csv or .parquet)")

    p.set_defaults(run=lambda a: show_segments(a.trace, a.seed, a.out))


def _datasets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list, fetch or verify the real public traces (checksummed, cached)",
                       description="The registry of real public agent traces: list them with their cache state, "
                                   "fetch the missing ones (sha256-checked, into the download cache), or verify "
                                   "what is there.")
    p.add_argument("action", choices=("list", "fetch", "verify"), help="what to do")
    p.add_argument("names", nargs="*", type=dataset, help="dataset names (default: all)")
    p.add_argument("--local", type=existing_folder, default=None,
                   help="offline override: a folder holding the files, laid out like the download cache")

    p.set_defaults(run=lambda a: show_datasets(a.action, a.names, a.local))


def _adapt(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("adapt", help="convert a file or folder of a public trace format (registered or not) "
                                     "into the trace contract",
                       description="Read a file or folder of a public trace format with its adapter and write it in "
                                   "the trace contract (docs/design.md §2), with a report of what was kept and why.")
    p.add_argument("dataset", help="its format: a registered dataset name (lachesis datasets list) or an adapter "
                                   "(tau2, claude_code, who_and_when, chatdev, mooncake, azure)")
    p.add_argument("path", help="a file, or a folder searched recursively")
    p.add_argument("--out", type=out_folder, required=True,
                   help="output folder, replaced whole: requests/spawns (or the source's tables) "
                                                "+ adapt_report.json")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help="the trace files' format")
    p.add_argument("--stripping", choices=("turn_end", "every_call"), default=None,
                   help="tau2 only: when reasoning leaves the context (default turn_end)")

    def run(a: argparse.Namespace) -> int:
        from lachesis.traces.adapters import adapt

        report = adapt(a.dataset, a.path, a.out, fmt=a.format, **({"stripping": a.stripping} if a.stripping else {}))
        for line in report.lines():
            print(line)
        return 1 if report.failed else 0
    p.set_defaults(run=run)


def _sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run the evaluation grid (Figs. 9-12) with caching",
                       description="Run the evaluation grid of one workload (every memory configuration, model, SLO "
                                   "and policy at the paper's search preset) and write one row per point; points are "
                                   "cached beside the output, so a rerun recomputes nothing.")
    p.add_argument("--scale", type=positive_float, default=1.0, help="fraction of the paper's session counts")
    p.add_argument("--seed", type=seed, default=0, help="random seed")
    p.add_argument("--trace", default="multi_agent", help="workload name or trace path")
    p.add_argument("--scheduler", type=scheduler, default=None,
                   help="Dask scheduler address (default: local processes)")
    p.add_argument("--out", type=out_file, default=Path("build/sweep.csv"), help="the rows (CSV)")

    def run(a: argparse.Namespace) -> int:
        from lachesis.evaluation import grid, sweep
        from lachesis.io import atomic_write
        from lachesis.node import capacity

        if a.scheduler:
            probe_scheduler(a.scheduler)
        points = grid.named_grid(a.trace, a.scale, a.seed)
        cache = a.out.parent / "sweep_cache"
        df = sweep.run_grid(points, capacity.PAPER, cache_dir=cache, scheduler=a.scheduler)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(a.out, lambda tmp: df.to_csv(tmp, index=False))
        print(f"wrote {len(df)} points to {a.out} (cache: {cache})")
        return 0
    p.set_defaults(run=run)


def _evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="will Lachesis help on this trace? The Figs. 9/11 protocol on a trace folder: "
                                        "HBF lifetime per policy at the SLO's load, one table and one figure",
                       description="The Figs. 9/11 protocol on your trace: HBM-first's load searched for the SLO, "
                                   "every policy run at that load, HBF lifetime and where the KV writes land; what "
                                   "the trace lacks is filled by named assumptions (docs/design.md §7).")
    p.add_argument("trace", type=trace_path,
                   help="trace folder or requests file (the trace contract, docs/design.md §2)")
    p.add_argument("--out", type=out_folder, default=Path("build/evaluate"),
                   help="where <name>.csv, <name>.png and <name>.pdf go")
    p.add_argument("--name", default=None, help="the files' stem and the rows' trace name (default: the folder's name)")
    p.add_argument("--models", type=names, default=None, help="comma-separated (default: both of the paper's)")
    p.add_argument("--slos", type=names, default=None,
                   help="tight, loose (default: both multi-agent, tight single-agent)")
    p.add_argument("--configs", type=names, default=None, help="memory configurations (default: 1/7,2/6,3/5,4/4,8/8*)")
    p.add_argument("--node", default="paper", choices=NODES,
                   help="the decode node: paper (8 GPUs in lockstep) or one_gpu")
    p.add_argument("--load", default="per_deployment", choices=LOADS, help="the load rule (docs/design.md §5, 'Load')")
    p.add_argument("--policies", type=names, default=None,
                   help="default: the paper's and the baselines for the trace's kind")
    p.add_argument("--seeds", type=seeds, default="0", help="comma-separated; each draws its own sessions")
    p.add_argument("--sessions", type=int, default=None,
                   help="sessions drawn with replacement (default: max(the trace's, 512)); 0: the trace's own")
    p.add_argument("--think-time", choices=("auto", "trace", "reference"), default="auto",
                   help="tool and user delays: the trace's timestamps (auto: where it has them) or the reference clock")
    p.add_argument("--reasoning-per-output", type=float, default=0.0,
                   help="reasoning tokens per output token added where a single agent records none")
    p.add_argument("--search", choices=SEARCHES, default="paper", help="search and measurement windows")
    p.add_argument("--cache-dir", type=out_folder, default=None, help="evaluation cache (default <out>/cache)")
    p.add_argument("--jobs", type=jobs, default=None, help="worker processes (default: the CPU count)")
    p.add_argument("--sensitivity", action="store_true",
                   help="also move each named assumption one at a time (the first model and SLO, every configuration): "
                        "<name>_sensitivity.csv")

    def run(a: argparse.Namespace) -> int:
        from lachesis.evaluation import grid
        from lachesis.evaluation.verdict import assumption_sensitivity, evaluate

        lists: dict[str, Any] = {k: grid.split_csv(v) for k, v in dict(
            models=a.models, slos=a.slos, configs=a.configs, policies=a.policies).items() if v is not None}
        v = evaluate(a.trace, a.out, node=a.node, load=a.load, seeds=a.seeds, sessions=a.sessions,
                     think_time=a.think_time, reasoning_per_output=a.reasoning_per_output, search=a.search,
                     cache_dir=a.cache_dir or a.out / "cache", n_jobs=a.jobs, name=a.name,
                     **lists)
        for line in v.lines():
            print(line)
        for path in v.paths:
            print(f"wrote {path}")
        print(f"evaluated in {v.seconds:.1f} s")
        if a.sensitivity:
            s = assumption_sensitivity(a.trace, a.out, model=lists.get("models", grid.MODEL_NAMES)[0],
                                       slo=lists.get("slos", ["tight"])[0],
                                       configs=lists.get("configs", grid.CONFIG_LABELS), node=a.node, load=a.load,
                                       seeds=a.seeds,
                                       sessions=a.sessions, think_time=a.think_time,
                                       reasoning_per_output=a.reasoning_per_output, search=a.search,
                                       cache_dir=a.cache_dir or a.out / "cache", n_jobs=a.jobs, name=a.name)
            for path in s.paths:
                print(f"wrote {path}")
            print(f"sensitivity in {s.seconds:.1f} s")
        return 0
    p.set_defaults(run=run)


def _explore(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explore", help="compute what the explorer lacks for one selection into a sweep cache "
                                       "(the grid cell over seeds, the load curve, the sensitivity study)",
                       description="Compute, into a sweep cache, what the explorer notebook lacks for one selection "
                                   "(workload, model, SLO, memory, policy), then print what the cache holds for it.")
    p.add_argument("--cache-dir", type=out_folder, required=True, help="the sweep cache the notebooks read")
    for k in ("workload", "model", "slo", "memory", "policy"):
        p.add_argument(f"--{k}", default=None, help="default: lachesis.evaluation.explorer.Selection's")
    p.add_argument("--search", default=None, choices=SEARCHES, help="search preset (default: paper)")
    p.add_argument("--scale", type=positive_float, default=None, help="corpus scale (default 1)")
    p.add_argument("--seeds", type=seeds, default=None, help="comma-separated (default 0); the lowest sizes the load")
    p.add_argument("--node", default=None, choices=NODES, help="the decode node (default: paper, eight GPUs)")
    p.add_argument("--load", default=None, choices=LOADS, help="the load rule (default: per_deployment)")
    p.add_argument("--parts", type=names, default=None, help="some of grid,load,sensitivity (default: all)")
    p.add_argument("--fractions", type=fractions, default=[], help="of N*, for the load curve (e.g. 0.25,0.5)")
    p.add_argument("--knobs", type=names, default=None, help="of the sensitivity study (default: every knob of "
                   "lachesis.evaluation.explorer.STUDY; a knob that changes the node is refused)")
    p.add_argument("--jobs", type=jobs, default=None, help="worker processes (default: one per core)")

    def run(a: argparse.Namespace) -> int:
        from lachesis.evaluation.explorer import PARTS, Selection

        given = {k: getattr(a, k) for k in ("workload", "model", "slo", "memory", "policy", "scale", "seeds", "search",
                                            "node", "load") if getattr(a, k) is not None}
        return explore(Selection(**given), a.cache_dir, a.parts or PARTS, a.fractions, a.knobs, a.jobs)
    p.set_defaults(run=run)


def explore(sel: "Selection", cache_dir: Path, parts: Sequence[str], fractions: Sequence[float] = (),
            knobs: Sequence[str] | None = None, jobs: int | None = None) -> int:
    """``lachesis explore``: :func:`lachesis.evaluation.explorer.compute` for one selection, then what the cache
    holds."""
    from lachesis.evaluation import explorer
    from lachesis.evaluation.knobs import KNOBS

    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"--jobs: expected a whole number >= 1, got {jobs!r}")
    bad = [x for x in parts if x not in explorer.PARTS]
    if bad:
        raise ValueError(f"--parts: unknown part {bad[0]!r}; expected some of {','.join(explorer.PARTS)}")
    kn = list(knobs) if knobs else list(explorer.STUDY)
    if unknown := [k for k in kn if k not in KNOBS]:
        raise ValueError(f"--knobs: unknown knob {unknown[0]!r}; expected some of {','.join(KNOBS)}")
    explorer.compute(sel, cache_dir, parts, fractions, kn, n_jobs=jobs)
    v = explorer.view(sel, cache_dir, fractions if "load" in parts else (), kn if "sensitivity" in parts else ())
    print(explorer.headline(v))
    return 0


def show_segments(trace: Path, seed: int = 0, out: Path | None = None) -> int:
    """``lachesis segments``: the per-class summary of a trace's segments (:func:`lachesis.analysis.segments.prepare`:
    the same clock and numbers as ``recover(read_trace(trace), seed=seed)``); ``out``: the segment table."""
    import pandas as pd

    from lachesis.analysis.segments import prepare, summarize
    from lachesis.io import atomic_write

    p = prepare(Path(trace), seed=seed)
    seg, req = p.segments, p.trace.requests
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(f"{p.trace.source}: {len(req)} requests, {req['session_id'].nunique()} sessions, "
              f"{len(seg.segments)} segments")
        if len(seg.external):
            ext = seg.external
            print(f"note: {len(ext)} requests open {int(ext['tokens'].sum())} prefix tokens declared as shared "
                  "(shared_prefix_tokens: an external prefix, in no segment)")
        print(summarize(seg.segments).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if out:
        out = Path(out)
        if out.suffix == ".parquet":
            atomic_write(out, lambda t: seg.segments.to_parquet(t, index=False))
        elif out.suffix == ".csv":
            atomic_write(out, lambda t: seg.segments.to_csv(t, index=False))
        else:
            raise ValueError(f"--out must end in .csv or .parquet, not {out.suffix!r}")
        print(f"wrote {out}")
    return 0


def show_datasets(action: str, chosen: Sequence[str] = (), local: Path | None = None) -> int:
    """``lachesis datasets list|fetch|verify [names] [--local DIR]``; 1 when a verified file is bad or a source
    could not be fetched (every source is tried first)."""
    import pandas as pd

    from lachesis.traces import datasets

    chosen = list(chosen) or datasets.names()
    if action == "list":
        with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 60):
            print(datasets.summary(chosen, local).to_string(index=False))
        return 0
    if action == "fetch":  # every source is tried; each that could not be fetched is named, and the exit is 1
        failed = []
        for name in chosen:
            try:
                print(f"{name}: {datasets.fetch(name, local)}", flush=True)
            except (datasets.DatasetError, OSError) as e:
                failed.append(name)
                print(f"lachesis datasets: {name}: could not fetch: {' '.join(str(e).split())}", file=sys.stderr)
        if failed:
            print(f"lachesis datasets: {len(failed)} of {len(chosen)} source(s) not fetched: {', '.join(failed)}",
                  file=sys.stderr)
        return 1 if failed else 0
    bad = 0
    for name in chosen:
        states = datasets.verify(name, local)
        errs = [s for s in states if s.state != "ok"]
        bad += len(errs)
        print(f"{name}: {len(states) - len(errs)}/{len(states)} files ok")
        for s in errs:
            print(f"  {s.state.upper()}: {s.detail}")
    return 1 if bad else 0


def probe_scheduler(url: str, timeout_s: float = SCHEDULER_PROBE_S) -> None:
    """Fail fast (one line) when a tcp/tls Dask scheduler does not accept a connection."""
    parts = urlsplit(url)
    if parts.scheme not in ("tcp", "tls"):
        return
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=timeout_s).close()
    except OSError as e:
        raise ConnectionError(f"--scheduler {url}: cannot reach the Dask scheduler "
                              f"({e.strerror or e.__class__.__name__})") from None


def _reproduce(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="run every notebook through papermill with a params file",
                       description="Run every notebook with a params file (papermill): its figures and tables into "
                                   "the file's out_dir, each executed notebook as a page beside them (NAME.html, "
                                   "opening on its figure, and NAME.ipynb), progress in build/logs/NAME.log, and for a "
                                   "complete run ENVIRONMENT.json.  One run at a time per clone.")
    p.add_argument("--params", type=params_file, default=Path("notebooks/params/paper.yaml"),
                   help="the params file (paper scale; notebooks/params/ci.yaml: CI scale into build/figures)")
    p.add_argument("--only", nargs="*", default=None, help="notebook names to run (default: all)")
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 1) when a real-trace source could not be fetched (default: name it and go on)")
    p.add_argument("--no-fetch", action="store_true", help="never download a real-trace source")
    p.add_argument("--serial", action="store_true",
                   help="one notebook at a time, in order (default: those the params file lists under beside: run "
                        "in a second lane beside the others)")
    p.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[],
                   help="set a parameter of every notebook to run that declares it (over the params file), the "
                        "value read as its declared type; repeatable")
    p.add_argument("--refresh-checks", action="store_true",
                   help="instead: run each notebook at its small defaults and store the output of its "
                        "NBVAL_CHECK_OUTPUT cell in the source (what make test compares)")

    def run(a: argparse.Namespace) -> int:
        from lachesis.kernel import check_cells, refresh_check_output
        from lachesis.parameters import plan
        from lachesis.reproduce import run_notebooks, summary

        if a.refresh_checks:
            import nbformat

            for name, src, _ in plan(a.params, a.only, [tuple(x) for x in a.parameter]):
                if check_cells(nbformat.read(src, as_version=4)):
                    print(f"{name}:\n{refresh_check_output(src)}", flush=True)
                else:
                    print(f"{name}: no cell marked NBVAL_CHECK_OUTPUT (skipped)", flush=True)
            return 0
        result = run_notebooks(a.params, a.only, strict=a.strict, fetch=not a.no_fetch,
                               overrides=[tuple(x) for x in a.parameter], serial=a.serial)
        print(summary(result), flush=True)
        return 0 if result.ok else 1
    p.set_defaults(run=run)


SUBCOMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    _corpus, _segments, _datasets, _adapt, _sweep, _evaluate, _explore, _reproduce)



def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lachesis", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command")
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def _expected() -> tuple[type[BaseException], ...]:
    """Errors a user can cause (bad input, files, network): reported as one line."""
    import zlib

    import yaml

    return (ValueError, OSError, EOFError, zlib.error, yaml.YAMLError, LookupError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # usage errors and --help: argparse already printed its line
        return e.code if isinstance(e.code, int) else 2
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    prog = f"lachesis {args.command}"
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 — the CLI never shows a traceback unless asked to
        if args.debug:
            raise
        msg = " ".join(str(e).split()) or e.__class__.__name__
        if isinstance(e, OSError) and e.strerror and e.filename:
            msg = f"{e.filename}: {e.strerror}"
        elif not isinstance(e, _expected()):
            msg = f"internal error ({e.__class__.__name__}): {msg} (rerun with --debug for the traceback)"
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
