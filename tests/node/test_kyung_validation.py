"""Validation of the HBF model against Kyung et al. [23] (lachesis.node.kyung), on the table shipped with the package.

Every cell is computed by ``lachesis.node.kyung.kyung_steady_state`` — the same operator-level
``StepModel``, weight_storage_bytes_per_gpu and hbf_lifetime_years the decode-node simulator uses —
and checked within ±15% on lifetime.  Cells the model misses are strict xfails (KNOWN_MISSES), so a
change that moves a cell across the bar fails the suite until the list is updated.  Each miss is a
cell whose own lifetime/TPOT pair implies over 10% fewer bytes per step than the capacity batch
writes (test_misses_are_cells_whose_own_pair_disagrees): no step-time term can move that part.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from lachesis.models import LLAMA4_MAVERICK, model_from_dict
from lachesis.node import kyung, step_cost

TABLE = kyung.default_kyung_table()
CVS = (0.1, 0.3)
RATIOS = ("1:3", "1:1", "3:1", "7:1", "15:1")
CONTEXTS = ("8K", "16K", "32K")
TOL = 0.15

#: Cells where the model's lifetime is outside ±15% (ours/theirs - 1 as measured).
KNOWN_MISSES: dict[tuple[float, str, str], float] = {
    (0.3, "1:1", "32K"): -0.169,
    (0.3, "3:1", "32K"): -0.199,
}

#: Kyung et al. Fig. 5, Llama-4-Maverick, L_in:L_out 1:3, deterministic lengths: TPOT (ms) of the HBF
#: and the half-bandwidth HBF device per (weights+KV budget GB, context), as transcribed in
#: jeongminl/HBF-LLMSimulator Fig4_Fig5_extracted_numbers.md (commit d2ab254).  A second figure of the
#: same setting, used only as a cross-check of the capacity unit.
FIG5_TPOT_MS = {(512, 8192): (51, 100), (768, 8192): (75, 144), (512, 32768): (49, 97), (768, 32768): (72, 142)}


@pytest.fixture(scope="module")
def paper() -> pd.DataFrame:
    return kyung.parse_kyung_tables(TABLE)


@pytest.fixture(scope="module")
def grid(paper: pd.DataFrame) -> pd.DataFrame:
    return kyung.kyung_grid(paper)


def _cell(grid: pd.DataFrame, cv: float, ratio: str, ctx: str) -> pd.Series:
    sel = grid[(np.isclose(grid["cv"], cv)) & (grid["ratio"] == ratio) & (grid["context"] == ctx)]
    assert len(sel) == 1, f"{TABLE}: expected one cell CV={cv} {ratio} {ctx}, found {len(sel)}"
    return sel.iloc[0]


def test_packaged_table_is_complete_and_grid_printed(grid: pd.DataFrame, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped table parses to 30 cells; the grid (ours, theirs, error) goes to the terminal even under capture."""
    assert "lachesis" in str(TABLE) and "shared" not in str(TABLE)
    assert "doi 10.1109/LCA.2026.3695938" in TABLE.read_text(encoding="utf-8")  # the citation travels with it
    assert len(grid) == len(CVS) * len(RATIOS) * len(CONTEXTS)
    show = grid.assign(life_err=(100 * grid["life_err"]).round(1), tpot_err=(100 * grid["tpot_err"]).round(1),
                       life_ours=grid["life_ours"].round(2), tpot_ours_ms=grid["tpot_ours_ms"].round(1))
    cols = ["cv", "ratio", "context", "life_ours", "life_theirs", "life_err", "tpot_ours_ms", "tpot_theirs_ms",
            "tpot_err", "batch_per_gpu"]
    s = kyung.kyung_summary(grid, TOL)
    with capsys.disabled():
        print("\n\nKyung et al. Fig. 4 (Llama-4-Maverick): lifetime years and mean TPOT, ours vs theirs (err in %)")
        print(show[cols].to_string(index=False))
        print(f"lifetime within ±15%: {s['within_tol']:.0f}/{s['cells']:.0f}; lifetime error median "
              f"{s['life_err_median']:+.1%} [{s['life_err_min']:+.1%}, {s['life_err_max']:+.1%}]; TPOT error median "
              f"{s['tpot_err_median']:+.1%} [{s['tpot_err_min']:+.1%}, {s['tpot_err_max']:+.1%}]\n")


@pytest.mark.parametrize("cv,ratio,ctx", [
    pytest.param(cv, r, c, id=f"cv{cv}-{r}-{c}",
                 marks=[pytest.mark.xfail(strict=True, reason=f"misses by {KNOWN_MISSES[(cv, r, c)]:+.1%}; their own "
                                          "lifetime/TPOT pair implies fewer bytes per step (module docstring)")]
                 if (cv, r, c) in KNOWN_MISSES else [])
    for cv in CVS for r in RATIOS for c in CONTEXTS
])
def test_lifetime_cell_within_15_percent(grid: pd.DataFrame, cv: float, ratio: str, ctx: str) -> None:
    row = _cell(grid, cv, ratio, ctx)
    assert abs(row["life_err"]) <= TOL, (
        f"CV={cv} {ratio} {ctx}: ours {row['life_ours']:.2f} y vs theirs {row['life_theirs']} y "
        f"({row['life_err']:+.1%}); TPOT {row['tpot_ours_ms']:.1f} vs {row['tpot_theirs_ms']} ms "
        f"({row['tpot_err']:+.1%})")


def test_overall_lifetime_and_tpot_error_bands(grid: pd.DataFrame) -> None:
    """At least 27 of 30 lifetimes within ±15%; every lifetime within ±25%, every TPOT within ±10%."""
    s = kyung.kyung_summary(grid, TOL)
    assert s["within_tol"] >= 27
    assert grid["life_err"].abs().max() <= 0.25
    assert grid["tpot_err"].abs().max() <= 0.10 and s["tpot_within_tol"] == len(grid)


def test_bytes_per_step_match_theirs(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    """Their lifetime × TPOT pairs imply our batch (median within 3%): bytes per step agree, so a miss is step time."""
    ratio = kyung.kyung_implied_batch(paper) / grid["batch_per_gpu"].to_numpy()
    assert abs(np.median(ratio) - 1) <= 0.03, f"median implied/ours batch {np.median(ratio):.3f}"


def test_misses_are_cells_whose_own_pair_disagrees(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    """Each missed cell's lifetime/TPOT pair implies > 10% fewer bytes per step than the capacity batch writes,
    while our TPOT there is within 5% of theirs."""
    implied = kyung.kyung_implied_batch(paper) / grid["batch_per_gpu"].to_numpy()
    for key in KNOWN_MISSES:
        i = _cell(grid, *key).name
        assert implied[i] < 0.90 and abs(grid.loc[i, "tpot_err"]) <= 0.05, (key, implied[i], grid.loc[i, "tpot_err"])


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


def test_fig5_tpots_cross_check_the_capacity_unit() -> None:
    """Kyung's Fig. 5 (another figure, same setting): with capacities in GiB, as the simulator lineage sizes them,
    the HBF and half-bandwidth HBF TPOTs at 512/768 GB and 8K/32K land within 5%; decimal GB lands 6-10% low."""
    s = replace(kyung.KyungSetting(), model=LLAMA4_MAVERICK)
    for unit, lo, hi in (("GiB", -0.05, 0.05), ("GB", -0.11, -0.06)):
        for (budget, ctx), theirs in FIG5_TPOT_MS.items():
            base = replace(s, capacity_unit=unit, budget=budget)
            half = replace(base, memory=replace(base.memory, hbf=replace(base.memory.hbf, read_bw=0.8e12)))
            for st, t in zip((base, half), theirs):
                ours = kyung.kyung_steady_state(ctx, 0.25, 0.0, st)["tpot_ms"].iloc[0]
                assert lo <= ours / t - 1 <= hi, (unit, budget, ctx, ours, t)


def test_literal_whole_flash_capacity_reading_is_far_off(paper: pd.DataFrame) -> None:
    """Why KyungSetting budgets 512 per GPU: batching the whole flash gives several times their TPOT."""
    g = kyung.kyung_grid(paper, kyung.KyungSetting(capacity="flash"))
    assert g["tpot_err"].min() > 2.0
    assert g["life_err"].max() < -0.10


def test_cv_raises_tpot_like_theirs(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    """From the CV 0.1 to the CV 0.3 table their TPOT rises 1-4 ms per cell (mean ~2.9 ms); ours must too.

    CV enters only through the size-biased in-flight context E[C²]/E[C].  With L_in and L_out
    independent the rise shrinks toward 0 at 15:1, which this test rejects.
    """
    def rise(g: pd.DataFrame, col: str) -> pd.Series:
        a = g[np.isclose(g["cv"], 0.1)].set_index(["ratio", "context"])[col]
        b = g[np.isclose(g["cv"], 0.3)].set_index(["ratio", "context"])[col]
        return (b - a).dropna()

    ours, theirs = rise(grid, "tpot_ours_ms"), rise(grid, "tpot_theirs_ms")
    assert len(ours) == len(RATIOS) * len(CONTEXTS)
    assert (ours > 0).all()
    assert abs(ours.mean() - theirs.mean()) <= 0.5, \
        f"mean rise ours {ours.mean():.2f} ms, theirs {theirs.mean():.2f} ms"
    assert (ours - theirs.reindex(ours.index)).abs().median() <= 1.0  # theirs are rounded to 1 ms
    old = kyung.kyung_grid(paper, kyung.KyungSetting(dispersion="independent"))
    assert abs(rise(old, "tpot_ours_ms").mean() - theirs.mean()) > 1.5


def test_expert_parallel_barrier_flattens_tpot_error_across_ratios(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    """Landing averaged over the ranks leaves TPOT shortfalls that grow with the prompt share (1:3 → 15:1); the
    slowest-rank landing leaves a flat one (mean error per ratio spreads ≤ 3 points, > 5 without)."""
    def spread(g: pd.DataFrame) -> float:
        t = g.groupby("ratio")["tpot_err"].mean()
        return float(t.max() - t.min())

    assert spread(grid) <= 0.03
    assert spread(kyung.kyung_grid(paper, kyung.KyungSetting(ep_barrier=False))) > 0.05
    s = replace(kyung.KyungSetting(), model=LLAMA4_MAVERICK)
    a = kyung.kyung_steady_state(paper["context_tokens"], paper["in_share"], paper["cv"], s)
    b = kyung.kyung_steady_state(paper["context_tokens"], paper["in_share"], paper["cv"], replace(s, ep_barrier=False))
    # the barrier changes the step time only: bytes written per step (the wear) are the same
    np.testing.assert_allclose((a.write_gb_per_s * a.tpot_ms).to_numpy(), (b.write_gb_per_s * b.tpot_ms).to_numpy(),
                               rtol=1e-12)
    assert (a.tpot_ms >= b.tpot_ms).all()


def test_sensitivity_rows(paper: pd.DataFrame, grid: pd.DataFrame) -> None:
    sens = kyung.kyung_sensitivity(paper, TOL)
    assert sens.iloc[0]["within_tol"] == kyung.kyung_summary(grid, TOL)["within_tol"]
    assert len(sens) >= 6 and sens["variant"].is_unique
    dec = sens[sens.variant.str.startswith("units")].iloc[0]
    assert dec.within_tol < sens.iloc[0].within_tol  # decimal GB: reported, not hidden


# --- the steady-state model on a hand-checked cell ---------------------------------------------

def test_steady_state_hand_checked_cell() -> None:
    s = replace(kyung.KyungSetting(), model=LLAMA4_MAVERICK)
    r = kyung.kyung_steady_state(8192, 0.5, 0.0, s).iloc[0]
    # 8K, 1:1, CV 0: (512 GiB - 124,966,348,800 B of weights) / (8192 x 196,608 B) -> 263 sequences per GPU
    w = 124_966_348_800
    assert r.batch_per_gpu == (512 * 2**30 - w) // (8192 * 196_608) == 263
    ctx = 4096 + (4096 - 1) / 2  # in-flight context: L_in + uniform decode age
    kv = 263 * ctx * 196_608
    # the step waits for the slowest of 8 ranks' landings: completions per rank per step ~ Poisson(263/4096),
    # E[max of 8] = Σ_a (1 - F(a)^8) prompts of 4096 tokens; the mean (263/4096) is what wears
    lam = 263 / 4096
    e_max = sum(1 - stats.poisson.cdf(a, lam) ** 8 for a in range(30))
    flush = 263 * 196_608 + e_max * 4096 * 196_608
    step = step_cost.decode_step_time(263, 0.0, kv, flush, s.flash, LLAMA4_MAVERICK, s.deployment)
    assert r.tpot_ms == pytest.approx(step * 1e3)
    written = 263 * 196_608 * 2  # one appended token + L_in/L_out = 1 landed prompt token per sequence
    life = (5 * 512 * 2**30 - w) * 1e5 / (1.02 * written / step) / 31_557_600
    assert r.lifetime_years == pytest.approx(life)


def test_dispersion_moments_match_monte_carlo() -> None:
    """The closed-form in-flight context (context CV + Beta(κ) share, size-biased by L_out) vs sampling."""
    rng = np.random.default_rng(0)
    n, mean_ctx, cv, share_in, kappa = 400_000, 8192.0, 0.3, 0.75, 30.0
    c = rng.normal(mean_ctx, cv * mean_ctx, n)
    mu = 1 - share_in
    r = rng.beta(mu * kappa, (1 - mu) * kappa, n)
    l_out, l_in = r * c, (1 - r) * c
    mc = np.sum(l_out * (l_in + (l_out - 1) / 2)) / np.sum(l_out)
    ours = kyung.kyung_steady_state(mean_ctx, share_in, cv, model=LLAMA4_MAVERICK)["inflight_context"].iloc[0]
    assert ours == pytest.approx(mc, rel=0.005)


def test_kappa_from_the_table_or_the_setting() -> None:
    with pytest.raises(ValueError, match="κ for CV"):
        kyung.kyung_steady_state(8192, 0.5, 0.2, model=LLAMA4_MAVERICK)
    by_cv = kyung.kyung_steady_state(8192, 0.25, 0.3, model=LLAMA4_MAVERICK)
    given = kyung.kyung_steady_state(8192, 0.25, 0.3, model=LLAMA4_MAVERICK, kappa=30.0)
    assert given.tpot_ms.iloc[0] == pytest.approx(by_cv.tpot_ms.iloc[0])
    other = kyung.kyung_steady_state(8192, 0.25, 0.2, model=LLAMA4_MAVERICK, kappa=5.0)  # any CV once κ is given
    assert other.inflight_context.iloc[0] > 0
    # CV 0 is deterministic under both readings
    a = kyung.kyung_steady_state(8192, 0.25, 0.0, model=LLAMA4_MAVERICK)
    b = kyung.kyung_steady_state(8192, 0.25, 0.0, kyung.KyungSetting(dispersion="independent"), model=LLAMA4_MAVERICK)
    assert a["tpot_ms"].iloc[0] == pytest.approx(b["tpot_ms"].iloc[0])


def test_expected_max_poisson_matches_sampling() -> None:
    rng = np.random.default_rng(0)
    lam = np.array([0.0, 0.05, 0.47, 3.0])
    sampled = rng.poisson(lam, (100_000, 8, len(lam))).max(axis=1).mean(axis=0)
    np.testing.assert_allclose(kyung.expected_max_poisson(lam, 8), sampled, atol=0.02)
    np.testing.assert_allclose(kyung.expected_max_poisson(lam, 1), lam, rtol=1e-9)
    with pytest.raises(ValueError):
        kyung.expected_max_poisson(-1.0, 8)


# --- the model comes from the table ----------------------------------------------------------

SMALL = model_from_dict(dict(name="Tiny-Dense-1B", layers=16, hidden=2048, q_heads=32, kv_heads=8, head_dim=64,
                             vocab=32000, dense_ffn=8192))


def _table(model: str, cv: str = "0.1") -> str:
    return f"### {model} — CV = {cv}\n| L_in:L_out | 8K |\n|---|---|\n| 1:1 | 5.0 (40) |\n"


def test_table_model_is_looked_up_or_refused(tmp_path: Path) -> None:
    p = tmp_path / "t.md"
    p.write_text(_table("Tiny-Dense-1B"))
    t = kyung.parse_kyung_tables(p)
    with pytest.raises(ValueError, match="unknown model 'Tiny-Dense-1B'"):
        kyung.kyung_grid(t)
    g = kyung.kyung_grid(t, models=[SMALL])  # a user's own model, e.g. from model_from_hf_config
    assert g.model.iloc[0] == "Tiny-Dense-1B" and g.batch_per_gpu.iloc[0] > 0
    with pytest.raises(ValueError, match="refusing to score"):  # rows of one model scored as another
        kyung.kyung_grid(t, replace(kyung.KyungSetting(), model=LLAMA4_MAVERICK))
    assert kyung.resolve_model("llama-4-maverick") is LLAMA4_MAVERICK


# --- the table parser ------------------------------------------------------------------------

GOOD = """# header
### Llama 4 Maverick — CV = 0.1
| L_in:L_out | 8K | 16K |
|---|---|---|
| 1:3 | 6.2 (52) | 12.8 (52) |
| 15:1 | 0.8 (80) | 1.5 (79) |
"""


def test_parser_reads_cells(tmp_path: Path) -> None:
    p = tmp_path / "t.md"
    p.write_text(GOOD)
    df = kyung.parse_kyung_tables(p)
    assert len(df) == 4 and np.isnan(df.kappa).all()
    r = df.iloc[1]
    assert (r.ratio, r.context_tokens, r.lifetime_years, r.tpot_ms, r.cv) == ("1:3", 16384, 12.8, 52.0, 0.1)
    assert df.iloc[2].in_share == pytest.approx(15 / 16)


@pytest.mark.parametrize("heading,kappa", [
    ("### Llama-4-Maverick — CV = 0.1, kappa = 90", 90.0),
    ("### Llama-4-Maverick – CV = 0.1, κ = 90", 90.0),
    ("### Llama-4-Maverick - CV=0.1", None),
    ("## Llama 4 Maverick — CV = 0.1; κ=90", 90.0),
    ("### **Llama 4 Maverick** — CV = 0.1", None),
])
def test_parser_accepts_heading_variants_and_free_text(tmp_path: Path, heading: str, kappa: float | None) -> None:
    text = GOOD.replace("### Llama 4 Maverick — CV = 0.1", heading
                        + "\nNormalized lifetime (8K/16K): **1.00 / 2.04**\n")
    text += "\nNormalized lifetime: 1.00 / 2.04\n"
    p = tmp_path / "t.md"
    p.write_text(text)
    df = kyung.parse_kyung_tables(p)
    assert len(df) == 4 and (df.cv == 0.1).all()
    assert kyung.resolve_model(df.model.iloc[0]) is LLAMA4_MAVERICK
    assert (np.isnan(df.kappa).all() if kappa is None else (df.kappa == kappa).all())


@pytest.mark.parametrize("bad,field,line", [
    (GOOD.replace("6.2 (52)", "6.2 [52]"), "8K", 5),
    (GOOD.replace("|---|---|---|\n", ""), "separator", 4),
    (GOOD.replace("| 15:1 |", "| 15-1 |"), "L_in:L_out", 6),
    (GOOD.replace("| 16K |", "| 16k tokens |"), "header", 3),
    (GOOD.replace("| 1.5 (79) |", "|"), "row", 6),
    (GOOD.replace("CV = 0.1", "CV = high"), "heading", 2),
    (GOOD.replace("0.8 (80)", "0 (80)"), "8K", 6),
    ("### Llama 4 Maverick — CV = 0.1\n\n### next — CV = 0.3\n", "table", 1),
    ("no tables here\n", "heading", 1),
])
def test_parser_rejects_malformed_tables_naming_file_line_field(tmp_path: Path, bad: str, field: str,
                                                                line: int) -> None:
    p = tmp_path / "bad.md"
    p.write_text(bad)
    with pytest.raises(kyung.KyungTableError) as e:
        kyung.parse_kyung_tables(p)
    assert (e.value.field, e.value.line) == (field, line) and f"bad.md:{line}:" in str(e.value)
    assert "\n" not in str(e.value)


def test_parser_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(kyung.KyungTableError, match="cannot read"):
        kyung.parse_kyung_tables(tmp_path / "absent.md")
    (tmp_path / "bin.md").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(kyung.KyungTableError, match="not UTF-8"):
        kyung.parse_kyung_tables(tmp_path / "bin.md")


def test_comparison_rows(grid: pd.DataFrame) -> None:
    cmp = kyung.kyung_comparison(grid).set_index("statistic")
    x = grid.iloc[0]
    row = cmp.loc[f"lifetime y, {x.model} CV {x.cv} {x.ratio} {x.context}"]
    assert row["ours"] == round(x.life_ours, 2) and float(row["paper"]) == pytest.approx(x.life_theirs)
    growth = [s for s in cmp.index if s.startswith("lifetime ") and "/" in s]
    assert len(growth) == grid.groupby(["model", "cv"]).ngroups
    assert (cmp["note"] == "paper column = Kyung et al. Fig. 4 (published table)").all()


def test_kyung_figure_is_drawn_in_the_figures_one_style(grid: pd.DataFrame) -> None:
    """No global theme: the rcParams after drawing are those before, and its panels look like every other
    figure's (matplotlib's defaults: white panels, no grid)."""
    import matplotlib as mpl
    import matplotlib.pyplot as plt

    from lachesis.plotting import kyung_figure

    before = dict(mpl.rcParams)
    fig = kyung_figure(grid, 0.15)
    assert dict(mpl.rcParams) == before
    other, ref = plt.subplots()
    for ax in fig.axes[:2]:
        assert ax.get_facecolor() == ref.get_facecolor()
        assert ax.xaxis.get_gridlines()[0].get_visible() == ref.xaxis.get_gridlines()[0].get_visible()
    assert [ax.get_title(loc="left") for ax in fig.axes[:3]] == ["(a) lifetime", "(b) mean TPOT", "(c) lifetime error"]
    plt.close(fig)
    plt.close(other)


# -- the tolerance: a finite number > 0 ---------------------------------------------------------------


@pytest.mark.parametrize("tol", [-0.5, 0.0, float("nan"), float("inf"), "0.15", True])
def test_kyung_tolerance_must_be_finite_and_positive(tol) -> None:
    grid = pd.DataFrame({"life_err": [0.1, -0.3], "tpot_err": [0.05, 0.2]})
    with pytest.raises(ValueError, match="tolerance: expected a finite number > 0") as e:
        kyung.kyung_summary(grid, tol)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="tolerance"):
        kyung.kyung_sensitivity(pd.DataFrame(), tol)  # refused before any grid is computed


def test_kyung_tolerance_valid_still_counts() -> None:
    grid = pd.DataFrame({"life_err": [0.1, -0.3], "tpot_err": [0.05, 0.2]})
    assert kyung.kyung_summary(grid, 0.15)["within_tol"] == 1
