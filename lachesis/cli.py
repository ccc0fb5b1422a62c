"""The ``lachesis`` command line.

Each subcommand is a thin wrapper over one package function; run ``lachesis <cmd> --help``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

DESCRIPTION = """\
Lachesis: lifetime-aware KV cache placement across HBM and high-bandwidth flash (HBF).

Typical use:
  lachesis corpus --scale 0.1 --out build/corpus     # write the synthetic agent-trace corpus
  lachesis segments build/corpus/multi_agent         # per-class lifetime summary of a trace
  lachesis datasets list                             # real public traces and their cache state
  lachesis reproduce --params notebooks/params/paper.yaml   # every paper figure into figures/
"""


def _corpus(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corpus", help="generate the embedded synthetic corpus (one trace per workload)")
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the paper's session counts (default 1.0)")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same corpus)")
    p.add_argument("--out", required=True, help="output folder; one sub-folder per workload trace")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--workloads", nargs="*", default=None, help="subset of workload names (default: all)")
    p.set_defaults(run=lambda a: _lazy("lachesis.corpus", "cli_corpus")(a))


def _segments(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("segments", help="recover context segments of a trace and summarize them per class")
    p.add_argument("trace", help="trace folder or requests file (JSONL/Parquet)")
    p.add_argument("--seed", type=int, default=0, help="seed of the reference clock's tool/user draws")
    p.add_argument("--out", default=None, help="also write the per-segment table here (.csv or .parquet)")
    p.set_defaults(run=lambda a: _lazy("lachesis.segments", "cli_segments")(a))


def _datasets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list, fetch or verify the real public traces (checksummed, cached)")
    p.add_argument("action", choices=("list", "fetch", "verify"))
    p.add_argument("names", nargs="*", help="dataset names (default: all)")
    p.add_argument("--local", default=None,
                   help="offline override: a folder holding the files (e.g. ../shared/data/traces)")
    p.set_defaults(run=lambda a: _lazy("lachesis.datasets", "cli_datasets")(a))


def _adapt(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("adapt", help="convert a file or folder of a public trace format (registered or not) "
                                     "into the trace contract")
    p.add_argument("dataset", help="its format: a registered dataset name (lachesis datasets list) or an adapter "
                                   "(tau2, claude_code, who_and_when, chatdev, mooncake, azure)")
    p.add_argument("path", help="a file, or a folder searched recursively")
    p.add_argument("--out", required=True, help="output folder: requests/spawns (or the source's tables) "
                                                "+ adapt_report.json")
    p.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    p.add_argument("--stripping", choices=("turn_end", "every_call"), default=None,
                   help="tau2 only: when reasoning leaves the context (default turn_end)")

    def run(a: argparse.Namespace) -> int:
        from lachesis.adapters import cli_adapt

        return cli_adapt(a.dataset, a.path, a.out, a.format, a.stripping)
    p.set_defaults(run=run)


def _sweep(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run the evaluation grid (Figs. 9-12) with caching")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", default="multi_agent", help="workload name or trace path")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (default: local processes)")
    p.add_argument("--out", default="build/sweep.csv")
    p.set_defaults(run=lambda a: _lazy("lachesis.sweep", "cli_sweep")(a))


def _reproduce(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="run every notebook through papermill with a params file")
    p.add_argument("--params", default="notebooks/params/paper.yaml")
    p.add_argument("--only", nargs="*", default=None, help="notebook names to run (default: all)")
    p.set_defaults(run=lambda a: _lazy("lachesis.reproduce", "cli_reproduce")(a))


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int | None]:
    import importlib

    return getattr(importlib.import_module(module), name)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lachesis", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="command")
    for add in (_corpus, _segments, _datasets, _adapt, _sweep, _reproduce):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    try:
        rc = args.run(args)
    except (ValueError, FileNotFoundError) as e:  # TraceError is a ValueError
        print(f"lachesis {args.command}: error: {e}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
