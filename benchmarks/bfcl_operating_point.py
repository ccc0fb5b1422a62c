"""Where BFCLv4's stated trend appears (§5.5): Lachesis's device-years from one HBM slot to four, against the load.

§5.5 states that on BFCLv4 Lachesis's lifetime peaks at one to three HBM slots and falls past the peak, "30–31%
fewer device-years at four HBM slots in eight than at one", because a larger HBM "admits no more KV once it holds
every reasoning-laden context segment the deployment has live at one time".  The mechanism makes the trend a
function of the operating point: while one HBM stack holds less than the live reasoning-laden KV, a second,
third and fourth stack absorb more writes and lifetime can rise; once one stack holds it all, every added slot
only removes an HBF stack (4/7 of the flash: 42.9% fewer device-years at an unchanged write rate).

For each model, on the paper's node (eight GPUs in lockstep, stalling landings, an aged cache), this runs
HBM-first and Lachesis at 1/7 and 4/4 at the same loads — fractions of the deployment's load (HBM-first's N* at
1/7, tight SLO) — and prints, per load, Lachesis's 4/4 ÷ 1/7 device-years, HBM ÷ the live reasoning-laden KV at
1/7 (per GPU, time-averaged), whether each run meets the SLO, and the HBM share of Lachesis's writes.

    .venv/bin/python benchmarks/bfcl_operating_point.py [--workload bfcl] [--fractions 0.3,0.4,0.5,0.6,0.8,1.0]
                                                      [--models Llama-4-Maverick,Qwen3-235B-A22B] [--no-record]

Runs are cached under ``build/sweep_cache_paper`` (the paper-scale grid's cache, whose searches it reuses);
the table goes to ``benchmarks/RESULTS.md`` (section "BFCLv4's trend against the operating point").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from results import record  # noqa: E402

from lachesis.config import memory_config  # noqa: E402
from lachesis.evaluation import grid, knobs, sweep  # noqa: E402
from lachesis.node.capacity import PAPER  # noqa: E402

TITLE = "BFCLv4's trend against the operating point (`benchmarks/bfcl_operating_point.py`)"
NODE = knobs.node("paper")


def rows(workload: str, model: str, fractions: list[float], cache: str) -> list[dict]:
    base = grid.Point(workload, "1/7", model, "tight", "hbm_first", overrides=NODE)
    n_held = int(sweep.evaluate_point(base, PAPER, cache)["n_star"])
    hbm_bytes = memory_config("1/7").hbm_bytes
    out = []
    for f in fractions:
        n = max(1, round(f * n_held))
        r = {"model": model, "fraction": f, "n_per_gpu": n}
        for mem in ("1/7", "4/4"):
            for pol in ("hbm_first", "lachesis"):
                e = sweep.run_at_load(grid.Point(workload, mem, model, "tight", pol, overrides=NODE), n, PAPER, cache)
                r[f"{pol}_{mem}_years"] = e["lifetime_years"]
                r[f"{pol}_{mem}_slo"] = bool(e["slo_met"])
                if pol == "lachesis":
                    tiers = e["bytes_by_tier"]
                    r[f"hbm%_{mem}"] = 100 * tiers["hbm"] / (tiers["hbm"] + tiers["hbf"])
                if mem == "1/7" and pol == "hbm_first":
                    laden = (e.get("live_kv_by_class") or {}).get("reasoning_laden", float("nan"))
                    r["live_laden_gb"] = laden / 1e9
                    r["hbm/live_laden_1/7"] = hbm_bytes / laden if laden else float("nan")
        r["lachesis 4/4÷1/7"] = r["lachesis_4/4_years"] / r["lachesis_1/7_years"]
        r["hbm_first 4/4÷1/7"] = r["hbm_first_4/4_years"] / r["hbm_first_1/7_years"]
        out.append(r)
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="bfcl")
    ap.add_argument("--models", default="Llama-4-Maverick,Qwen3-235B-A22B")
    ap.add_argument("--fractions", default="0.3,0.4,0.5,0.6,0.8,1.0",
                    help="of the deployment's load (HBM-first N* at 1/7)")
    ap.add_argument("--cache-dir", default=str(ROOT / "build" / "sweep_cache_paper"))
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    fr = [float(x) for x in a.fractions.split(",")]
    df = pd.DataFrame([r for m in a.models.split(",") for r in rows(a.workload, m, fr, a.cache_dir)])
    cols = ["model", "fraction", "n_per_gpu", "live_laden_gb", "hbm/live_laden_1/7", "lachesis_1/7_years",
            "lachesis_4/4_years", "lachesis 4/4÷1/7", "hbm_first 4/4÷1/7", "hbm%_1/7", "hbm%_4/4",
            "hbm_first_1/7_slo", "lachesis_4/4_slo"]
    lines = [f"{a.workload}, tight SLO, the paper's node; loads as fractions of the deployment's load (HBM-first's N* "
             "at 1/7); paper: Lachesis 4/4 ÷ 1/7 = 0.69–0.70 on BFCLv4 (30–31% fewer device-years); 4/7 = 0.571 is "
             "the bare loss of three HBF stacks at an unchanged write rate",
             df[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}")]
    print("\n".join(lines))
    if not a.no_record:
        print(f"wrote {record(TITLE, lines)}")


if __name__ == "__main__":
    main()
