"""HBM-first's N* per memory configuration under each decode-node assumption the paper leaves open (docs/design.md
§5, "Decode node").

The text leaves open what a prefill's KV landing costs the decode node (overlapping decoding, as §5.1's engine moves
it, or stalling the lockstep group, as Son et al.'s simulator charges it), the HBF write bandwidth per stack (Son et
al.'s 16 GB/s, Kyung et al.'s 48 GB/s) and whether the node is the eight-GPU lockstep group or one GPU.  For each
combination this prints HBM-first's own N* (sessions per GPU, the seed's capacity search) at every configuration of
§5.2, its spread over the configurations (max ÷ min), and whether that spread is within the search's resolution: a
"full load the SLO admits" that means one load at every configuration exists only where it is.  Then the HBF flush's
share of a decode step at N* on the paper's node (an upper bound), which is what its pricing could move.

    .venv/bin/python benchmarks/node_assumptions.py [--workloads multi_agent,tau3] [--model Llama-4-Maverick]
                                                     [--slo tight] [--seed 0] [--jobs 2] [--no-record]

Results are cached under ``build/sweep_cache_nodes`` (a rerun reads them) and written to ``benchmarks/RESULTS.md``
(section "Decode-node assumptions: HBM-first's N* per configuration").
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

from lachesis.evaluation import grid, knobs, sweep  # noqa: E402
from lachesis.node import capacity, step_cost  # noqa: E402

TITLE = "Decode-node assumptions: HBM-first's N* per configuration"
#: the node variants, each as the knobs it sets on top of the paper's node (knobs.NODES["paper"])
VARIANTS: dict[str, dict] = {
    "paper (G 8, overlap, 16 GB/s)": {},
    "G 8, stall, 16 GB/s": {"landing": "stall"},
    "G 8, overlap, 48 GB/s": {"hbf_write_bw_scale": 3.0},
    "G 8, stall, 48 GB/s": {"landing": "stall", "hbf_write_bw_scale": 3.0},
    "G 1, overlap, 16 GB/s": {"group_ranks": 1.0},
    "G 1, stall, 16 GB/s": {"group_ranks": 1.0, "landing": "stall"},
}


def variant_points(workloads: list[str], model: str, slo: str, seed: int) -> dict[str, list[grid.Point]]:
    """HBM-first at every configuration, per variant (the single-agent traces at the tight SLO, §5.2)."""
    out = {}
    for name, extra in VARIANTS.items():
        ov = knobs.canonical(dict(knobs.NODES["paper"]) | extra)
        out[name] = [grid.Point(w, c, model, slo if w in grid.MULTI_WORKLOADS else "tight", grid.LOAD_POLICY,
                                seed=seed, overrides=ov) for w in workloads for c in grid.CONFIG_LABELS]
    return out


def table(rows: dict[str, pd.DataFrame], rel_tol: float) -> pd.DataFrame:
    """One row per (variant, workload): N* per configuration, max ÷ min over them, and whether one load fits all."""
    out = []
    for name, df in rows.items():
        for w, d in df.groupby("workload", sort=False):
            n = d.set_index("memory")["n_star"].astype(int)
            r = dict(node=name, workload=w, **{c: int(n[c]) for c in grid.CONFIG_LABELS if c in n})
            split = n[[c for c in n.index if c != "8/8*"]]
            r["max/min"] = round(float(n.max() / n.min()), 2) if n.min() > 0 else float("nan")
            r["one load (1/7-4/4)"] = "yes" if split.max() <= split.min() * (1 + 2 * rel_tol) else "no"
            out.append(r)
    return pd.DataFrame(out)


def flush_share(rows: pd.DataFrame, overrides: tuple) -> pd.DataFrame:
    """Per (workload, configuration) of the paper node's rows: the share of a decode step the HBF flush takes at N*,
    an upper bound (every decoding session appends its token to HBF, the whole node decoding at once, reading the KV
    HBM-first's run read per step), from the step model (§5.1: the flush once at the end of the step)."""
    out = []
    for r in rows.itertuples():
        p = grid.Point(r.workload, r.memory, r.model, r.slo, r.policy, seed=int(r.seed), overrides=overrides)
        cfg = p.config()
        n = float(r.n_star)
        kv = float(r.kv_read_per_step_bytes)  # per GPU, the ranks' mean
        flush = n * cfg.model.kv_bytes_per_token
        args = (cfg.memory, cfg.model, cfg.deployment)
        with_flush = float(step_cost.decode_step_time(n, 0.0, kv, flush, *args))
        without = float(step_cost.decode_step_time(n, 0.0, kv, 0.0, *args))
        out.append(dict(workload=r.workload, memory=r.memory, n_star=int(n), step_ms=round(1e3 * with_flush, 2),
                        flush_share_pct=round(100 * (with_flush - without) / with_flush, 2)))
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="multi_agent,tau3")
    ap.add_argument("--model", default="Llama-4-Maverick")
    ap.add_argument("--slo", default="tight")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache-dir", default=str(ROOT / "build" / "sweep_cache_nodes"))
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args(argv)
    if a.jobs < 1:
        print(f"node_assumptions.py: error: --jobs must be at least 1, got {a.jobs}", file=sys.stderr)
        return 2
    try:
        pts = variant_points(grid.split_csv(a.workloads), a.model, a.slo, a.seed)
    except ValueError as e:
        print(f"node_assumptions.py: error: {e}", file=sys.stderr)
        return 2
    t0, w0 = time.process_time(), time.time()
    rows = {name: sweep.run_grid(p, capacity.PAPER, a.cache_dir, n_jobs=a.jobs, load="per_cell", progress=False)
            for name, p in pts.items()}
    t = table(rows, capacity.PAPER.rel_tol)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        text = t.to_string(index=False)
    paper = next(iter(VARIANTS))
    flush = flush_share(rows[paper], pts[paper][0].overrides)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        ftext = flush.to_string(index=False)
    lines = [f"{a.model}, {a.slo} SLO (single-agent traces: tight), seed {a.seed}, paper search; "
             f"wall {time.time() - w0:.0f} s, parent CPU {time.process_time() - t0:.0f} s", text, "",
             "The HBF flush's share of a decode step on the paper's node at HBM-first's N* (an upper bound):", ftext]
    print("\n".join(lines), flush=True)
    if not a.no_record:
        record(TITLE, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
