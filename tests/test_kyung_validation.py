"""Validation of the HBF model against Kyung et al. [23], Fig. 4 (Llama-4-Maverick, both CV tables).

Every cell is computed by ``lachesis.hbf.kyung_steady_state`` — the same decode_step_time,
weight_storage_bytes_per_gpu and hbf_lifetime_years the decode-node simulator uses — and checked
within ±15% on lifetime.  The lengths follow Kyung's dispersion model (context CV + a Beta(κ) output
share, κ = 90 / 30 at CV 0.1 / 0.3), which reproduces their TPOT rise from the CV 0.1 to the CV 0.3
table (test_cv_raises_tpot_like_theirs), and the step waits for the slowest expert-parallel rank's
prompt landing, which makes the TPOT error flat across ratios
(test_expert_parallel_barrier_flattens_tpot_error_across_ratios).  The faithful roofline (peak
bandwidths, no per-cell constant) misses the ±15% bar on the cells listed in KNOWN_MISSES; they are
strict xfails, so a model change that moves a cell across the bar fails the suite until the list is
updated.  Why they miss (measured below): our TPOT is 8–14% below theirs in every cell while our
bytes per step match theirs (the batch their own lifetime/TPOT pairs imply is ours to a median
0.2%), and lifetime ∝ TPOT at fixed bytes per step; all five misses are 32K cells whose own
lifetime/TPOT pair implies 3–16% fewer bytes per step than the capacity batch, which no step-time
term moves.  The transcribing C++ roofline (jeongminl/HBF-LLMSimulator, PAPER2_NOTES.md) lands
8% below their TPOTs too.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lachesis import hbf
from lachesis.config import SECONDS_PER_YEAR

_REL = "data/validation/kyung2026_fig4_maverick.md"
SHARED = Path(os.environ["LACHESIS_SHARED"]) if os.environ.get("LACHESIS_SHARED") else Path(__file__).parents[2] / "shared"
TABLE = SHARED / _REL

pytestmark = pytest.mark.skipif(
    not TABLE.exists(),
    reason=f"Kyung validation table not found at {TABLE}; set LACHESIS_SHARED to the folder holding {_REL}",
)

CVS = (0.1, 0.3)
RATIOS = ("1:3", "1:1", "3:1", "7:1", "15:1")
CONTEXTS = ("8K", "16K", "32K")
TOL = 0.15

#: Cells where the faithful model's lifetime is outside ±15% (ours/theirs - 1 as measured).
KNOWN_MISSES: dict[tuple[float, str, str], float] = {
    (0.1, "1:3", "32K"): -0.1644,
    (0.1, "3:1", "32K"): -0.1734,
    (0.3, "1:1", "32K"): -0.2150,
    (0.3, "3:1", "32K"): -0.2446,
    (0.3, "15:1", "32K"): -0.1666,
}


@pytest.fixture(scope="module")
def paper() -> pd.DataFrame:
    return hbf.parse_kyung_tables(TABLE)


@pytest.fixture(scope="module")
def grid(paper: pd.DataFrame) -> pd.DataFrame:
    return hbf.kyung_grid(paper)


def _cell(grid: pd.DataFrame, cv: float, ratio: str, ctx: str) -> pd.Series:
    sel = grid[(np.isclose(grid["cv"], cv)) & (grid["ratio"] == ratio) & (grid["context"] == ctx)]
    assert len(sel) == 1, f"{TABLE}: expected one cell CV={cv} {ratio} {ctx}, found {len(sel)}"
    return sel.iloc[0]


def test_table_is_complete_and_grid_printed(grid: pd.DataFrame, capsys: pytest.CaptureFixture[str]) -> None:
    """All 30 cells parse; the grid (ours, theirs, error) goes to the terminal even under capture."""
    assert len(grid) == len(CVS) * len(RATIOS) * len(CONTEXTS)
    show = grid.assign(life_err=(100 * grid["life_err"]).round(1), tpot_err=(100 * grid["tpot_err"]).round(1),
                       life_ours=grid["life_ours"].round(2), tpot_ours_ms=grid["tpot_ours_ms"].round(1))
    cols = ["cv", "ratio", "context", "life_ours", "life_theirs", "life_err", "tpot_ours_ms", "tpot_theirs_ms",
            "tpot_err", "batch_per_gpu"]
    within = int((grid["life_err"].abs() <= TOL).sum())
    with capsys.disabled():
        print(f"\n\nKyung et al. Fig. 4 (Llama-4-Maverick): lifetime years and mean TPOT, ours vs theirs (err in %)")
        print(show[cols].to_string(index=False))
        print(f"lifetime within ±15%: {within}/{len(grid)}; lifetime error median {grid['life_err'].median():+.1%} "
              f"[{grid['life_err'].min():+.1%}, {grid['life_err'].max():+.1%}]; TPOT error median "
              f"{grid['tpot_err'].median():+.1%} [{grid['tpot_err'].min():+.1%}, {grid['tpot_err'].max():+.1%}]\n")


@pytest.mark.parametrize("cv,ratio,ctx", [
    pytest.param(cv, r, c, id=f"cv{cv}-{r}-{c}",
                 marks=[pytest.mark.xfail(strict=True, reason=f"faithful roofline misses by {KNOWN_MISSES[(cv, r, c)]:+.1%}"
                                          " (TPOT below theirs; see module docstring)")]
                 if (cv, r, c) in KNOWN_MISSES else [])
    for cv in CVS for r in RATIOS for c in CONTEXTS
])
def test_lifetime_cell_within_15_percent(grid: pd.DataFrame, cv: float, ratio: str, ctx: str) -> None:
    row = _cell(grid, cv, ratio, ctx)
    assert abs(row["life_err"]) <= TOL, (
        f"CV={cv} {ratio} {ctx}: ours {row['life_ours']:.2f} y vs theirs {row['life_theirs']} y ({row['life_err']:+.1%}); "
        f"TPOT {row['tpot_ours_ms']:.1f} vs {row['tpot_theirs_ms']} ms ({row['tpot_err']:+.1%})")


def test_overall_lifetime_and_tpot_error_bands(grid: pd.DataFrame) -> None:
    """Regression guard: every lifetime within ±30%, every TPOT within ±25%, both medians within ±20%."""
    assert grid["life_err"].abs().max() <= 0.30
    assert grid["tpot_err"].abs().max() <= 0.25
    assert abs(grid["life_err"].median()) <= 0.20 and abs(grid["tpot_err"].median()) <= 0.20


def test_bytes_per_step_match_theirs(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    """The miss is TPOT, not bytes: their lifetime × TPOT pairs imply our batch (median within 3%).

    (a) their implied batch (hbf.kyung_implied_batch) vs ours; (b) our bytes per step at THEIR TPOT
    through the same hbf_lifetime_years reproduce their lifetimes.
    """
    ratio = hbf.kyung_implied_batch(paper) / grid["batch_per_gpu"].to_numpy()
    assert abs(np.median(ratio) - 1) <= 0.03, f"median implied/ours batch {np.median(ratio):.3f}"
    s = hbf.KyungSetting()
    ours = hbf.kyung_steady_state(paper["context_tokens"], paper["in_share"], paper["cv"], s)
    bytes_per_step = (ours["write_gb_per_s"] * 1e9 * ours["tpot_ms"] / 1e3).to_numpy()
    rate_at_their_tpot = bytes_per_step / (paper["tpot_ms"].to_numpy() / 1e3)
    life = hbf.hbf_lifetime_years(s.memory, rate_at_their_tpot, s.endurance,
                                  reserved_bytes=hbf.weight_storage_bytes_per_gpu(s.model, s.deployment))
    err = life / paper["lifetime_years"].to_numpy() - 1
    assert abs(np.median(err)) <= 0.03, f"median {np.median(err):+.1%}"
    assert np.abs(err).max() <= 0.20, f"worst {np.abs(err).max():.1%}"


def test_lifetime_scales_with_context_like_theirs(grid: pd.DataFrame) -> None:
    """Normalized lifetime 16K/8K and 32K/8K (mean over ratios) within ±10% of theirs."""
    for cv in CVS:
        g = grid[np.isclose(grid["cv"], cv)]
        piv_o = g.pivot(index="ratio", columns="context", values="life_ours")
        piv_t = g.pivot(index="ratio", columns="context", values="life_theirs")
        for ctx in ("16K", "32K"):
            ours = (piv_o[ctx] / piv_o["8K"]).mean()
            theirs = (piv_t[ctx] / piv_t["8K"]).mean()
            assert ours == pytest.approx(theirs, rel=0.10), f"CV={cv} {ctx}/8K: ours {ours:.2f}, theirs {theirs:.2f}"


def test_literal_whole_flash_capacity_reading_is_far_off(paper: pd.DataFrame) -> None:
    """Why KyungSetting budgets 512 GB per GPU: batching the whole flash gives ~6x the batch and ~4x the TPOT."""
    g = hbf.kyung_grid(paper, hbf.KyungSetting(capacity="flash"))
    assert g["tpot_err"].min() > 2.0  # > 3x their TPOT everywhere
    assert g["life_err"].max() < -0.20


def test_cv_raises_tpot_like_theirs(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    """From the CV 0.1 to the CV 0.3 table their TPOT rises 1-4 ms per cell (mean ~2.9 ms); ours must too.

    The signature of the dispersion model: at equal means, CV enters only through the size-biased
    in-flight context E[C²]/E[C].  With L_in and L_out independent (the earlier reading) the rise
    shrinks toward 0 at 15:1 (mean 0.7 ms), which this test rejects.
    """
    def rise(g: pd.DataFrame, col: str) -> pd.Series:
        a = g[np.isclose(g["cv"], 0.1)].set_index(["ratio", "context"])[col]
        b = g[np.isclose(g["cv"], 0.3)].set_index(["ratio", "context"])[col]
        return (b - a).dropna()

    ours, theirs = rise(grid, "tpot_ours_ms"), rise(grid, "tpot_theirs_ms")
    assert len(ours) == len(RATIOS) * len(CONTEXTS)
    assert (ours > 0).all()
    assert abs(ours.mean() - theirs.mean()) <= 0.5, f"mean rise ours {ours.mean():.2f} ms, theirs {theirs.mean():.2f} ms"
    assert (ours - theirs.reindex(ours.index)).abs().median() <= 1.0  # theirs are rounded to 1 ms
    old = hbf.kyung_grid(paper, hbf.KyungSetting(dispersion="independent"))
    assert abs(rise(old, "tpot_ours_ms").mean() - theirs.mean()) > 1.5  # the independent reading misses it


def test_dispersion_needs_a_kappa_for_every_cv() -> None:
    with pytest.raises(ValueError, match="κ for CV"):
        hbf.kyung_steady_state(8192, 0.5, 0.2)
    # CV 0 is deterministic under both readings: same numbers
    a = hbf.kyung_steady_state(8192, 0.25, 0.0)
    b = hbf.kyung_steady_state(8192, 0.25, 0.0, hbf.KyungSetting(dispersion="independent"))
    assert a["tpot_ms"].iloc[0] == pytest.approx(b["tpot_ms"].iloc[0])


def test_expected_max_poisson_matches_sampling() -> None:
    rng = np.random.default_rng(0)
    lam = np.array([0.0, 0.05, 0.47, 3.0])
    sampled = rng.poisson(lam, (100_000, 8, len(lam))).max(axis=1).mean(axis=0)
    np.testing.assert_allclose(hbf.expected_max_poisson(lam, 8), sampled, atol=0.02)
    np.testing.assert_allclose(hbf.expected_max_poisson(lam, 1), lam, rtol=1e-9)
    with pytest.raises(ValueError):
        hbf.expected_max_poisson(-1.0, 8)


def test_expert_parallel_barrier_flattens_tpot_error_across_ratios(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    """The signature of the barrier: landing averaged over the ranks leaves TPOT shortfalls that grow
    with the prompt share (1:3 → 15:1), while the slowest-rank landing leaves a flat one.  The
    mean TPOT error per ratio spreads by ≤ 3 points with the barrier and > 5 points without."""
    def spread(g: pd.DataFrame) -> float:
        t = g.groupby("ratio")["tpot_err"].mean()
        return float(t.max() - t.min())

    assert spread(grid) <= 0.03
    assert spread(hbf.kyung_grid(paper, hbf.KyungSetting(ep_barrier=False))) > 0.05
    # the barrier changes the step time only: bytes written per step (the wear) are the same
    a = hbf.kyung_steady_state(paper["context_tokens"], paper["in_share"], paper["cv"])
    b = hbf.kyung_steady_state(paper["context_tokens"], paper["in_share"], paper["cv"], hbf.KyungSetting(ep_barrier=False))
    np.testing.assert_allclose((a.write_gb_per_s * a.tpot_ms).to_numpy(), (b.write_gb_per_s * b.tpot_ms).to_numpy(),
                               rtol=1e-12)
    assert (a.tpot_ms >= b.tpot_ms).all()
