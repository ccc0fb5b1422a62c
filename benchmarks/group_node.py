"""The decode node as the paper deploys it (§5.2) against the one-GPU node the figures use: N*, gains, shares.

For cells of the Figs. 9–12 grid, every paper policy runs on the paper's node, the eight-GPU expert-parallel
group with an aged cache (``knobs.node("paper")``), at that node's own N* per cell (HBM-first's, searched), and the
rows are set beside the committed figures' seed-0 rows (``figures/fig09_grid.csv``, ``figures/fig11_grid.csv``, at
the deployment's held load).  Prints per cell:
sessions per GPU at N*, each policy's lifetime and its ratio to HBM-first, HBM's share of the window's
KV write bytes, the live short-lived KV per GPU and HBM ÷ that (the operating point in units that carry
over, §5.3), the KV one decode step reads, and the CPU time the group's cell took.

    .venv/bin/python benchmarks/group_node.py [--cells multi] [--models Llama-4-Maverick] [--slos tight]
                                              [--configs 1/7,4/4,8/8*] [--jobs 2] [--no-record]

Results are cached under ``build/sweep_cache_group`` (rerun reads them) and written to
``benchmarks/RESULTS.md`` (section "Decode node: the paper's eight-GPU group").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from results import record  # noqa: E402

from lachesis.cli import jobs  # noqa: E402
from lachesis.evaluation import grid, knobs, sweep  # noqa: E402
from lachesis.node import capacity  # noqa: E402

TITLE = "Decode node: the paper's eight-GPU group"
GROUP = dict(knobs.node("paper"))
PAPER_POLICIES = {"multi": grid.PAPER_MULTI_POLICIES, "single": grid.PAPER_SINGLE_POLICIES}
WORKLOADS = {"multi": ("multi_agent",), "single": ("tau3", "bfcl")}
FIGURE = {"multi": ROOT / "figures" / "fig09_grid.csv", "single": ROOT / "figures" / "fig11_grid.csv"}
CELL = ["workload", "model", "slo", "memory"]


def points(kind: str, models: list[str], slos: list[str], configs: list[str]) -> list[grid.Point]:
    slos = slos if kind == "multi" else ["tight"]  # §5.2: single-agent traces at the tight SLO alone
    return [grid.Point(w, c, m, s, p, overrides=GROUP) for w in WORKLOADS[kind] for m in models for s in slos
            for c in configs for p in PAPER_POLICIES[kind]]


def summary(rows: pd.DataFrame, node: str) -> pd.DataFrame:
    """One row per cell: N*, each policy's lifetime and gain, HBM shares, the operating point."""
    out = []
    for cell, d in rows.groupby(CELL, sort=False):
        d = d.set_index("policy")
        base = d.loc["hbm_first"]
        r = dict(zip(CELL, cell), node=node, n_per_gpu=int(base["n_sessions"]))
        for p in d.index:
            r[f"years_{p}"] = float(d.loc[p, "lifetime_years"])
            r[f"{p}/hbm_first"] = float(d.loc[p, "lifetime_years"] / base["lifetime_years"])
            r[f"hbm%_{p}"] = 100 * float(d.loc[p, "bytes_hbm"] / (d.loc[p, "bytes_hbm"] + d.loc[p, "bytes_hbf"]))
        for col in ("live_short_kv_bytes", "kv_read_per_step_bytes"):
            r[col.replace("_bytes", "_gb")] = float(base[col]) / 1e9 if col in base else float("nan")
        r["hbm/live_short"] = float(base["hbm_over_live_short"]) if "hbm_over_live_short" in base else float("nan")
        out.append(r)
    return pd.DataFrame(out)


def figure_rows(kind: str, cells: pd.DataFrame) -> pd.DataFrame:
    """The committed one-GPU rows of the same cells (seed 0)."""
    fig = pd.read_csv(FIGURE[kind])
    fig = fig[fig["seed"].eq(0) & fig["policy"].isin(PAPER_POLICIES[kind])]
    keep = fig.merge(cells[CELL].drop_duplicates(), on=CELL)
    return keep.rename(columns={"bytes_hbm": "bytes_hbm", "bytes_hbf": "bytes_hbf"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="multi", choices=["multi", "single", "both"])
    ap.add_argument("--models", default="Llama-4-Maverick")
    ap.add_argument("--slos", default="tight")
    ap.add_argument("--configs", default="1/7,4/4,8/8*")
    ap.add_argument("--jobs", type=jobs, default=2, help="worker processes, a whole number >= 1 (default 2)")
    ap.add_argument("--cache-dir", default=str(ROOT / "build" / "sweep_cache_group"))
    ap.add_argument("--no-record", action="store_true")
    ap.error = lambda message: ap.exit(2, f"group_node.py: error: {message}\n")  # type: ignore[method-assign]
    a = ap.parse_args(argv)
    kinds = ["multi", "single"] if a.cells == "both" else [a.cells]
    try:  # every cell checked before anything runs: a bad name is one line, not a traceback
        cells = {kind: points(kind, grid.split_csv(a.models), grid.split_csv(a.slos), grid.split_csv(a.configs))
                 for kind in kinds}
    except ValueError as e:
        print(f"group_node.py: error: {e}", file=sys.stderr)
        return 2
    lines = []
    for kind, pts in cells.items():
        t0 = time.process_time()
        w0 = time.time()
        rows = sweep.run_grid(pts, capacity.PAPER, a.cache_dir, n_jobs=a.jobs, load="per_cell")  # each cell's own N*
        cpu, wall = time.process_time() - t0, time.time() - w0
        group = summary(rows, "own N* per cell")
        one = summary(figure_rows(kind, rows), "figures (held load)")
        table = pd.concat([one, group]).sort_values(CELL + ["node"], kind="stable")
        with pd.option_context("display.width", 250, "display.max_columns", 40, "display.float_format",
                               "{:.3g}".format):
            text = table.to_string(index=False)
        lines += [f"{kind}-agent cells, paper policies, seed 0 (group: {GROUP}; wall {wall:.0f} s for "
                  f"{len(pts)} points, parent CPU {cpu:.0f} s)", text, ""]
        print("\n".join(lines[-3:]), flush=True)
    if not a.no_record:
        record(TITLE, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
