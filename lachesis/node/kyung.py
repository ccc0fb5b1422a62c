"""Validation of the HBF model against Kyung et al. [23], Fig. 4: HBF lifetime and TPOT under saturated batching.

Kyung et al. report, per model, the HBF lifetime (years) and mean TPOT (ms) of stateless requests
under saturated continuous batching on one 8-GPU node with 5 HBF stacks per GPU, for L_in:L_out
ratios × mean context lengths × two length dispersions.  :func:`kyung_steady_state` computes the
same quantities from the SAME :class:`lachesis.node.step_cost.StepModel`,
:func:`~lachesis.node.block_capacity.weight_storage_bytes_per_gpu`
and :func:`~lachesis.node.endurance.hbf_lifetime_years` the decode-node simulator uses; :func:`kyung_grid`
compares every cell of a table parsed by :func:`parse_kyung_tables`, taking each table's model from
its heading (a known model, or one the caller defines from its public config) and refusing a
mismatch.  The published Maverick table ships with the package (:func:`default_kyung_table`).
Nothing here is fitted to the table; every setting is a named field of :class:`KyungSetting`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from importlib.abc import Traversable
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from lachesis.config import (
    GB,
    MEMORY_KYUNG,
    Deployment,
    Endurance,
    GPUSpec,
    MemoryConfig,
    ModelSpec,
)
from lachesis.models import known_model, with_dtypes
from lachesis.node.block_capacity import weight_storage_bytes_per_gpu
from lachesis.node.endurance import hbf_lifetime_years
from lachesis.node.quantity import ArrayLike
from lachesis.node.step_cost import step_model
from lachesis.paths import package_data
from lachesis.plotting import compare_table

__all__ = ["KyungTableError", "check_tolerance", "parse_kyung_tables", "default_kyung_table", "KyungSetting",
           "kyung_steady_state", "kyung_grid", "kyung_operators", "kyung_summary", "kyung_comparison",
           "kyung_implied_batch", "kyung_sensitivity", "expected_max_poisson",
           "resolve_model"]

KYUNG_TABLE = "kyung2026_fig4_maverick.md"
GIB = 1024**3


def default_kyung_table() -> Traversable:
    """The published Fig. 4 table (Llama-4-Maverick) shipped in ``lachesis/data/validation/``."""
    return package_data("validation", KYUNG_TABLE)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------


class KyungTableError(ValueError):
    """A malformed validation table: names the file, the line and the field."""

    def __init__(self, source: str | Path, line: int, field_: str, problem: str):
        super().__init__(f"{source}:{line}: field {field_!r}: {problem}")
        self.source, self.line, self.field, self.problem = str(source), line, field_, problem


_NUM = r"[0-9]+(?:\.[0-9]+)?"
_HEAD = re.compile(rf"^#{{2,4}}\s*(?P<model>.+?)\s*[—–-]+\s*CV\s*=\s*(?P<cv>{_NUM})\s*"
                   rf"(?:[,;]\s*(?:κ|kappa)\s*=\s*(?P<kappa>{_NUM}|∞|inf)\s*)?$", re.IGNORECASE)
_HEAD_LIKE = re.compile(r"^#{2,4}\s.*\bCV\b", re.IGNORECASE)
_CELL = re.compile(rf"^\**\s*(?P<life>{_NUM})\s*\(\s*(?P<tpot>{_NUM})\s*(?:ms)?\s*\)\s*\**$")
_RATIO = re.compile(r"^(?P<a>[0-9]+)\s*:\s*(?P<b>[0-9]+)$")
_CTX = re.compile(r"^(?P<n>[0-9]+)\s*(?P<k>[Kk]?)$")
_SEP = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def parse_kyung_tables(source: str | Path | Traversable) -> pd.DataFrame:
    """Parse transcribed Fig. 4 tables: one row per cell (model, cv, kappa, ratio, context, lifetime, TPOT).

    Each table sits under a heading ``### <model> — CV = <x>`` (any of - – —, optionally
    ``, κ = <k>`` or ``, kappa = <k>``); free text between a heading and its table (e.g. a
    "Normalized lifetime" line) is skipped.  The table is ``| L_in:L_out | 8K | ... |`` with cells
    ``<years> (<TPOT ms>)``; ``8K`` = 8 × 1024 tokens.  Anything else raises
    :class:`KyungTableError` naming the file, line and field.
    """
    name = str(source)
    try:
        lines = source.read_text(encoding="utf-8").splitlines() if not isinstance(source, str) else \
            Path(source).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise KyungTableError(name, 0, "file", f"cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise KyungTableError(name, 0, "file", f"not UTF-8 text ({e.reason})") from None
    rows: list[dict] = []
    i, n_tables = 0, 0
    while i < len(lines):
        text = lines[i].strip()
        m = _HEAD.match(text)
        if not m:
            if _HEAD_LIKE.match(text):
                raise KyungTableError(name, i + 1, "heading", f"{text!r} is not '### <model> — CV = <x>[, κ = <k>]'")
            i += 1
            continue
        model, cv = m["model"].strip(" *"), float(m["cv"])
        kappa = math.nan if m["kappa"] is None else (math.inf if m["kappa"].lower() in ("∞", "inf")
                                                     else float(m["kappa"]))
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("|"):
            if lines[j].strip().startswith("#"):
                break
            j += 1
        if j >= len(lines) or not lines[j].strip().startswith("|"):
            raise KyungTableError(name, i + 1, "table", f"no table under heading {text!r}")
        header = [h.strip() for h in lines[j].strip().strip("|").split("|")]
        if header[0].replace(" ", "").lower() != "l_in:l_out" or len(header) < 2:
            raise KyungTableError(name, j + 1, "header",
                                  f"expected '| L_in:L_out | 8K | ...', got {lines[j].strip()!r}")
        ctxs = []
        for h in header[1:]:
            mc = _CTX.match(h)
            if not mc or int(mc["n"]) <= 0:
                raise KyungTableError(name, j + 1, "header", f"context column {h!r} is not like '8K'")
            ctxs.append(int(mc["n"]) * (1024 if mc["k"] else 1))
        if j + 1 >= len(lines) or not _SEP.match(lines[j + 1].strip()):
            raise KyungTableError(name, j + 2, "separator", "expected a '|---|' separator row")
        k = j + 2
        n_rows = 0
        while k < len(lines) and lines[k].strip().startswith("|"):
            cells = [c.strip() for c in lines[k].strip().strip("|").split("|")]
            if len(cells) != len(header):
                raise KyungTableError(name, k + 1, "row", f"{len(cells)} cells, header has {len(header)}")
            mr = _RATIO.match(cells[0])
            if not mr or int(mr["a"]) <= 0 or int(mr["b"]) <= 0:
                raise KyungTableError(name, k + 1, "L_in:L_out", f"{cells[0]!r} is not a ratio like '1:3'")
            a, b = int(mr["a"]), int(mr["b"])
            for ctx, h, cell in zip(ctxs, header[1:], cells[1:]):
                mv = _CELL.match(cell)
                if not mv or float(mv["life"]) <= 0 or float(mv["tpot"]) <= 0:
                    raise KyungTableError(name, k + 1, h, f"cell {cell!r} is not '<years> (<TPOT ms>)' with both > 0")
                rows.append(dict(model=model, cv=cv, kappa=kappa, ratio=f"{a}:{b}", in_share=a / (a + b), context=h,
                                 context_tokens=ctx, lifetime_years=float(mv["life"]), tpot_ms=float(mv["tpot"]),
                                 line=k + 1))
            n_rows += 1
            k += 1
        if n_rows == 0:
            raise KyungTableError(name, j + 3, "row", "table has no data rows")
        n_tables += 1
        i = k
    if n_tables == 0:
        raise KyungTableError(name, 1, "heading", "no '### <model> — CV = <x>' table found")
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# The setting and the steady state
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KyungSetting:
    """Kyung et al.'s [23] Fig. 4 setting, per GPU of one 8-GPU node.

    ``model``: None takes each table's model from its heading (:func:`resolve_model`); a model
    given here must match the table's.  Weights and KV are BF16 whatever the model's own config
    says (``*_dtype_bytes``, Kyung's setting).  Memory: 256 GB HBM at 8 TB/s for activations plus
    5 HBF stacks, reads priced per tier (:data:`lachesis.config.MEMORY_KYUNG`).

    ASSUMPTION (capacity, ``capacity="budget"``): the batch is as many sequences as a per-GPU
    weights+KV budget of ``budget_bytes`` (512 GB, 2 × the 256 GB HBM) holds at the workload's
    context length, the weights inside the budget.  Reason: Kyung's Fig. 5 names 512 GB as the
    "weights + reserved-KV capacity" of the HBF bar whose TPOT equals Fig. 4's; batching the whole
    5 × 512 GB flash (``capacity="flash"``) gives several times their TPOTs.  The lifetime still
    wears the whole flash minus the weights (``reserved_bytes``).
    ASSUMPTION (units, ``capacity_unit``): capacities are in the unit Kyung et al.'s simulator
    sizes them in.  ``"GiB"``: LLMSimulator [1] and its HBF fork [41] write every memory capacity
    as N × 1024³ bytes (``hardware_config.h``: H100 ``80.0 * 1024 * 1024 * 1024``, the HBF
    presets ``512.0 * n * 1024 * 1024 * 1024``), so a "512 GB" budget and stack there hold
    512 GiB; ``"GB"`` reads them decimal as the paper prints them (a sensitivity row).
    Lengths (``dispersion="context_beta"``, Kyung's Fig. 4 caption, "low dispersion (CV=0.1,
    κ=90)" and "high dispersion (CV=0.3, κ=30)"): a request's context C has the cell's mean and
    coefficient of variation CV, and its output share r = L_out/C is Beta-distributed with mean
    L_out/(L_in + L_out) and concentration κ (from the table heading, else ``ratio_kappa`` by CV),
    independent of C; L_in = (1-r)C.  Only first and second moments enter (E[C²] = mean²(1 + CV²),
    E[r²] = μ² + μ(1-μ)/(κ+1)).  In-flight sequences are size-biased by L_out (continuous batching)
    at a uniform decode age, so CV raises the context read per step through E[C²]/E[C].
    ``dispersion="independent"`` draws L_in and L_out independently, each with the CV.
    ASSUMPTION (landing): admitted prompts' KV lands in HBF in the same per-step flush as the
    appended tokens (HBF's write port is the only way into flash), so it is in the step time.
    ASSUMPTION (expert-parallel barrier, ``ep_barrier``): the GPUs meet at every MoE layer's
    exchange, so a step lasts as long as its slowest rank.  Completions per rank per step are
    Poisson with Little's-law mean λ = B / E[L_out], independent across ranks, and the rank that
    admits lands its whole prompt while the others wait: the landing term of the step is
    E[max of n_gpus Poisson(λ)] × E[L_in] × KV bytes/token at HBF write bandwidth; the bytes
    written (the wear) keep the mean.  ``ep_barrier=False`` averages the landing over the ranks.
    """

    model: ModelSpec | None = None
    memory: MemoryConfig = MEMORY_KYUNG
    deployment: Deployment = field(default_factory=lambda: Deployment(n_gpus=8, gpu=GPUSpec("B200-class", 2250e12)))
    endurance: Endurance = field(default_factory=Endurance)
    weight_dtype_bytes: int = 2
    kv_dtype_bytes: int = 2
    capacity: Literal["budget", "flash"] = "budget"
    budget: float = 512  # in capacity_unit
    capacity_unit: Literal["GiB", "GB"] = "GiB"
    landing_in_step: bool = True
    ep_barrier: bool = True
    dispersion: Literal["context_beta", "independent"] = "context_beta"
    #: (CV, κ) pairs of Kyung's Fig. 4 tables, used when a table heading gives no κ; CV 0 = deterministic.
    ratio_kappa: tuple[tuple[float, float], ...] = ((0.1, 90.0), (0.3, 30.0))

    @property
    def unit_bytes(self) -> float:
        if self.capacity_unit not in ("GiB", "GB"):
            raise ValueError(f"KyungSetting: capacity_unit must be 'GiB' or 'GB', got {self.capacity_unit!r}")
        return GIB if self.capacity_unit == "GiB" else GB

    @property
    def flash(self) -> MemoryConfig:
        """The memory with each HBF stack's capacity in this setting's unit (512 → 512 × unit)."""
        hbf = self.memory.hbf
        cap = round(hbf.capacity_bytes / GB) * self.unit_bytes
        return replace(self.memory, hbf=replace(hbf, capacity_bytes=cap))

    def kappa_for(self, cv: ArrayLike, kappa: ArrayLike = math.nan) -> np.ndarray:
        """Beta concentration κ per cell: the table's where given, else by CV (∞ at CV 0); unknown CVs raise."""
        cv_, k_ = np.broadcast_arrays(np.atleast_1d(np.asarray(cv, dtype=float)),
                                      np.atleast_1d(np.asarray(kappa, dtype=float)))
        out = k_.copy()
        todo = np.isnan(out)
        out[todo & (cv_ == 0)] = np.inf
        for c, k in self.ratio_kappa:
            out[todo & np.isclose(cv_, c)] = k
        if np.any(np.isnan(out)):
            bad = sorted(set(cv_[np.isnan(out)].tolist()))
            raise ValueError(f"KyungSetting: no ratio concentration κ for CV {bad}; known {self.ratio_kappa}")
        if np.any(out <= 0):
            raise ValueError("KyungSetting: κ must be > 0")
        return out


def kyung_steady_state(context_tokens: ArrayLike, in_share: ArrayLike, cv: ArrayLike,
                       setting: KyungSetting = KyungSetting(), model: ModelSpec | None = None,
                       kappa: ArrayLike = math.nan) -> pd.DataFrame:
    """Steady-state saturated continuous batching of stateless requests: TPOT and HBF lifetime per cell.

    Vectorized over cells.  Per GPU: batch B = floor(KV capacity / (context × KV bytes/token));
    each step reads the weights and B × E[in-flight context] tokens of KV from HBF (size-biased by
    L_out under the setting's dispersion model), appends one token per sequence and lands
    B/E[L_out] admitted prompts of E[L_in] tokens (Little's law: admissions = completions).  Step
    time is the operator-level :class:`lachesis.node.step_cost.StepModel`; the lifetime is
    :func:`lachesis.node.endurance.hbf_lifetime_years` with the weights' flash reserved.
    """
    s = setting
    model = model or s.model
    if model is None:
        raise ValueError("kyung_steady_state: no model (give one, or set KyungSetting.model)")
    model = with_dtypes(model, s.kv_dtype_bytes, s.weight_dtype_bytes)
    ctx, share, cv_, kap = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=float))
                                                 for v in (context_tokens, in_share, cv, kappa)))
    if np.any(ctx <= 0) or np.any((share <= 0) | (share >= 1)) or np.any(cv_ < 0):
        raise ValueError("kyung_steady_state: need context > 0, 0 < in_share < 1, cv >= 0")
    mem = s.flash
    kv_tok = model.kv_bytes_per_token
    w_store = weight_storage_bytes_per_gpu(model, s.deployment)
    cap = (s.budget * s.unit_bytes if s.capacity == "budget" else mem.hbf_bytes) - w_store
    if cap <= 0:
        raise ValueError(f"kyung_steady_state: no KV capacity left after {w_store / GB:.1f} GB of weights "
                         f"({model.name})")
    batch = np.floor(cap / (ctx * kv_tok))
    if np.any(batch < 1):
        raise ValueError(f"kyung_steady_state: the KV capacity holds no sequence of {ctx.max():.0f} tokens "
                         f"({model.name})")
    l_in, l_out = ctx * share, ctx * (1 - share)
    # size-biased by L_out, uniform decode age j in [0, L_out): context read = E[L_out (L_in + (L_out-1)/2)] / E[L_out]
    if s.dispersion == "independent":
        e_ctx = l_in + (l_out * (1 + cv_**2) - 1) / 2
    elif s.dispersion == "context_beta":
        mu = 1 - share  # mean output share r; L_out = rC, L_in = (1-r)C, r independent of C
        k = s.kappa_for(cv_, kap)
        e_r2 = np.where(np.isinf(k), mu**2, mu**2 + mu * (1 - mu) / (k + 1))
        e_ctx = ctx * (1 + cv_**2) * (mu - e_r2 / 2) / mu - 0.5
    else:
        raise ValueError(f"kyung_steady_state: unknown dispersion {s.dispersion!r}")
    kv_read = batch * e_ctx * kv_tok
    append = batch * kv_tok
    admissions = batch / l_out  # per rank per step (Little's law)
    landed = admissions * l_in * kv_tok  # mean prompt bytes landed per rank per step: what wears
    slowest = expected_max_poisson(admissions, s.deployment.n_gpus) if s.ep_barrier else admissions
    flush = append + slowest * l_in * kv_tok if s.landing_in_step else append
    bd = step_model(mem, model, s.deployment).breakdown(batch, 0.0, kv_read, flush)
    step = bd["total"].to_numpy()
    rate = (append + landed) / step
    life = np.asarray(hbf_lifetime_years(mem, rate, s.endurance, reserved_bytes=w_store))
    ops_ms = {f"{c}_ms": bd[c].to_numpy() * 1e3 for c in bd.columns if c != "total"}
    return pd.DataFrame(dict(context_tokens=ctx, in_share=share, cv=cv_, batch_per_gpu=batch,
                             inflight_context=e_ctx, kv_read_gb=kv_read / GB, flush_gb=flush / GB, **ops_ms,
                             tpot_ms=step * 1e3, write_gb_per_s=rate / GB, lifetime_years=life))


def expected_max_poisson(lam: ArrayLike, n: int) -> np.ndarray:
    """E[max of ``n`` independent Poisson(``lam``) counts], elementwise: Σ_a≥0 (1 - F(a)^n)."""
    lam = np.atleast_1d(np.asarray(lam, dtype=float))
    if np.any(lam < 0) or np.any(~np.isfinite(lam)) or n < 1:
        raise ValueError("expected_max_poisson: need finite lam >= 0 and n >= 1")
    top = int(stats.poisson.ppf(1 - 1e-15, max(float(lam.max()), 1e-12))) + 2
    a = np.arange(top)[:, None]
    return (1.0 - stats.poisson.cdf(a, lam[None, :]) ** n).sum(axis=0)


# ---------------------------------------------------------------------------------------------
# Comparison with the table
# ---------------------------------------------------------------------------------------------


def resolve_model(table_model: str, setting: KyungSetting = KyungSetting(),
                  models: Iterable[ModelSpec] | Mapping[str, ModelSpec] | None = None) -> ModelSpec:
    """The model a table heading names: the setting's (it must match), else a known or given model.

    Names match ignoring case, spaces and dashes ("Llama 4 Maverick" = "Llama-4-Maverick").
    A mismatch or an unknown name raises a one-line ValueError.
    """
    extra = dict(models) if isinstance(models, Mapping) else {m.name: m for m in (models or ())}
    if setting.model is not None:
        extra = {setting.model.name: setting.model}
        try:
            return known_model(table_model, extra)
        except KeyError:
            raise ValueError(f"the table's rows are for {table_model!r} but the setting's model is "
                             f"{setting.model.name!r}; refusing to score one model's cells with another") from None
    try:
        return known_model(table_model, extra)
    except KeyError as e:
        raise ValueError(e.args[0]) from None


def _per_model(paper: pd.DataFrame, setting: KyungSetting,
               models: Iterable[ModelSpec] | Mapping[str, ModelSpec] | None):
    """(table rows, our steady state) per model named in the table's headings."""
    for name, rows in paper.groupby("model", sort=False):
        model = resolve_model(str(name), setting, models)
        kappa = rows["kappa"].to_numpy() if "kappa" in rows else math.nan
        yield rows, kyung_steady_state(rows["context_tokens"].to_numpy(), rows["in_share"].to_numpy(),
                                       rows["cv"].to_numpy(), setting, model, kappa)


def kyung_grid(paper: pd.DataFrame, setting: KyungSetting = KyungSetting(),
               models: Iterable[ModelSpec] | Mapping[str, ModelSpec] | None = None) -> pd.DataFrame:
    """Every cell of the parsed tables beside ours, with relative errors (ours/theirs - 1).

    Each table's model comes from its heading via :func:`resolve_model` (``models`` adds models a
    user defined, e.g. with :func:`lachesis.models.model_from_hf_config`).
    """
    parts = []
    for rows, ours in _per_model(paper, setting, models):
        out = rows[["model", "cv", "ratio", "context"]].reset_index(drop=True).copy()
        out["life_ours"] = ours["lifetime_years"].to_numpy()
        out["life_theirs"] = rows["lifetime_years"].to_numpy()
        out["life_err"] = out["life_ours"] / out["life_theirs"] - 1
        out["tpot_ours_ms"] = ours["tpot_ms"].to_numpy()
        out["tpot_theirs_ms"] = rows["tpot_ms"].to_numpy()
        out["tpot_err"] = out["tpot_ours_ms"] / out["tpot_theirs_ms"] - 1
        out["batch_per_gpu"] = ours["batch_per_gpu"].to_numpy()
        parts.append(out)
    return pd.concat(parts, ignore_index=True)


def kyung_operators(paper: pd.DataFrame, setting: KyungSetting = KyungSetting(),
                    models: Iterable[ModelSpec] | Mapping[str, ModelSpec] | None = None) -> pd.DataFrame:
    """Our decode step of each table cell by operator (ms; columns = operators, flush, tpot), one row per cell."""
    parts = []
    for rows, ours in _per_model(paper, setting, models):
        ms = ours[[c for c in ours.columns if c.endswith("_ms")]]
        ms.index = [f"{r.model} CV {r.cv} {r.ratio} {r.context}" for r in rows.itertuples()]
        parts.append(ms.rename(columns=lambda c: c.removesuffix("_ms")))
    return pd.concat(parts)


def check_tolerance(tol: Any) -> float:
    """``tol`` as a relative tolerance: a finite number > 0 (0.15 = within ±15%); a one-line ValueError otherwise."""
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol <= 0:
        raise ValueError(f"tolerance: expected a finite number > 0 (a fraction: 0.15 = within ±15%), got {tol!r}")
    return float(tol)


def kyung_summary(grid: pd.DataFrame, tol: float = 0.15) -> dict[str, float]:
    """Headline statistics of a :func:`kyung_grid`: cells within ``tol``, error medians and ranges."""
    tol = check_tolerance(tol)
    le, te = grid["life_err"], grid["tpot_err"]
    return dict(cells=float(len(grid)), within_tol=float((le.abs() <= tol).sum()), tol=tol,
                tpot_within_tol=float((te.abs() <= tol).sum()),
                life_err_median=float(le.median()), life_err_min=float(le.min()), life_err_max=float(le.max()),
                tpot_err_median=float(te.median()), tpot_err_min=float(te.min()), tpot_err_max=float(te.max()))


def kyung_comparison(grid: pd.DataFrame) -> pd.DataFrame:
    """Ours beside Kyung et al.'s: lifetime and TPOT of four cells spread over the grid (first, a third,
    half way, last), and per (model, CV) the mean lifetime growth from the first to the last context."""

    contexts = list(dict.fromkeys(grid["context"]))
    first, last = contexts[0], contexts[-1]
    rows = []
    for i in sorted({0, len(grid) // 3, len(grid) // 2, len(grid) - 1}):
        x = grid.iloc[i]
        rows += [(f"lifetime y, {x.model} CV {x.cv} {x.ratio} {x.context}", round(x.life_ours, 2), x.life_theirs),
                 (f"TPOT ms, {x.model} CV {x.cv} {x.ratio} {x.context}", round(x.tpot_ours_ms, 1), x.tpot_theirs_ms)]
    for (m, cv), g in grid.groupby(["model", "cv"]):
        piv = g.pivot(index="ratio", columns="context", values=["life_ours", "life_theirs"])
        rows.append((f"lifetime {last}/{first}, {m} CV {cv}",
                     round(float((piv["life_ours"][last] / piv["life_ours"][first]).mean()), 2),
                     round(float((piv["life_theirs"][last] / piv["life_theirs"][first]).mean()), 2)))
    return compare_table(rows, note="paper column = Kyung et al. Fig. 4 (published table)")


def kyung_implied_batch(paper: pd.DataFrame, setting: KyungSetting = KyungSetting(),
                        models: Iterable[ModelSpec] | Mapping[str, ModelSpec] | None = None) -> np.ndarray:
    """Per-GPU batch implied by THEIR lifetime and TPOT under our byte accounting (a diagnostic).

    Inverts :func:`lachesis.node.endurance.hbf_lifetime_years` for their write rate, × their TPOT = bytes
    written per step, ÷ (KV/token × (1 + L_in/L_out)) = sequences.  Equal to our batch ⇔ bytes per
    step agree, so any lifetime miss comes from the step time.
    """
    out = np.empty(len(paper))
    pos = np.arange(len(paper))
    for name, idx in paper.groupby("model", sort=False).indices.items():
        s = setting
        model = with_dtypes(resolve_model(str(name), s, models), s.kv_dtype_bytes, s.weight_dtype_bytes)
        rows = paper.iloc[idx]
        w = weight_storage_bytes_per_gpu(model, s.deployment)
        one = np.asarray(hbf_lifetime_years(s.flash, 1.0, s.endurance, reserved_bytes=w))  # years at 1 B/s
        rate = one / rows["lifetime_years"].to_numpy(dtype=float)
        share = rows["in_share"].to_numpy(dtype=float)
        per_seq = model.kv_bytes_per_token * (1 + share / (1 - share))
        out[pos[idx]] = rate * rows["tpot_ms"].to_numpy(dtype=float) / 1e3 / per_seq
    return out


def kyung_sensitivity(paper: pd.DataFrame, tol: float = 0.15,
                      models: Iterable[ModelSpec] | Mapping[str, ModelSpec] | None = None) -> pd.DataFrame:
    """:func:`kyung_summary` under each named alternative of the setting (one row per variant)."""
    tol = check_tolerance(tol)
    base = KyungSetting()
    dep = base.deployment
    variants = {
        "default (GiB capacities, per-tier reads, landing in the step flush on the slowest rank, context CV + Beta(κ))":
            base,
        "units: budget and flash in decimal GB (512e9 B)": replace(base, capacity_unit="GB"),
        "landing averaged over the ranks (no expert-parallel barrier)": replace(base, ep_barrier=False),
        "lengths: L_in, L_out independent, each with the CV (κ unused)": replace(base, dispersion="independent"),
        "landing overlapped (not in the step time)": replace(base, landing_in_step=False),
        "reads over HBM + HBF aggregate bandwidth (the Lachesis default pricing)":
            replace(base, memory=replace(base.memory, read_pricing="aggregate")),
        "attention unfused (scores written to HBM and read back)":
            replace(base, deployment=replace(dep, attention_kernel="unfused")),
        "literal: whole flash minus weights holds the batch": replace(base, capacity="flash"),
    }
    rows = [dict(variant=k, **kyung_summary(kyung_grid(paper, v, models), tol)) for k, v in variants.items()]
    return pd.DataFrame(rows)
