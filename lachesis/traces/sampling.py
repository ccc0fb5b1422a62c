"""Seeded draws of the synthetic corpus: one buffered stream per session, and quasi-random quantiles
for a session's size variables, so that a workload's totals land close to Table 3 without rescaling
(docs/design.md §7)."""

from __future__ import annotations

import bisect
import math
import zlib
from functools import lru_cache
from statistics import NormalDist

import numpy as np


def session_draws(seed: int, sid: str, stream: int = 0) -> Draws:
    """Per-session draws from (seed, stable hash of the session id, stream)."""
    return Draws(np.random.default_rng([seed, zlib.crc32(sid.encode()), stream]))


class Draws:
    """Buffered scalar draws from one numpy Generator (scalar numpy calls are slow)."""

    def __init__(self, rng: np.random.Generator, block: int = 256):
        self.rng, self.block = rng, block
        self._z = self._u = np.empty(0)
        self._iz = self._iu = 0

    def z(self) -> float:
        if self._iz >= len(self._z):
            self._z, self._iz = self.rng.standard_normal(self.block).tolist(), 0
        self._iz += 1
        return self._z[self._iz - 1]

    def u(self) -> float:
        if self._iu >= len(self._u):
            self._u, self._iu = self.rng.random(self.block).tolist(), 0
        self._iu += 1
        return self._u[self._iu - 1]

    def ln(self, mean: float, sigma: float) -> float:
        """A log-normal draw with the given mean."""
        return mean * math.exp(sigma * self.z() - sigma * sigma / 2)

    def tok(self, mean: float, sigma: float) -> int:
        return max(1, int(round(self.ln(mean, sigma))))

    def integers(self, n: int) -> int:
        return min(int(self.u() * n), n - 1)

    def pick(self, cum: list[float]) -> int:
        """Index drawn with cumulative probabilities ``cum`` (last entry 1)."""
        return pick_quantile(self.u(), cum)


def poisson_ppf(q: float, lam: float) -> int:
    """Smallest n with P(Pois(lam) <= n) >= q."""
    pmf = math.exp(-lam)
    cdf, n = pmf, 0
    while cdf < q and n < 10_000:
        n += 1
        pmf *= lam / n
        cdf += pmf
    return n


NORMAL = NormalDist()


#: Quasi-random (Kronecker/Weyl) quantiles q = frac(offset_d + i·a_d + j·b_d) for session i, item j,
#: dimension d (ASSUMPTION, variance control: docs/design.md §7).  Session steps a_d: fractional parts
#: of square roots of primes.  Item steps b_d: irrationals in (0.3, 0.75), so that consecutive workers
#: of one session jump across the unit interval (no trend of a worker's noise with its spawn position).
_KRON_A = tuple(math.sqrt(p) % 1.0 for p in (2, 3, 5, 7, 11, 13, 17, 19))
_KRON_B = ((math.sqrt(5) - 1) / 2, math.sqrt(2) - 1, math.sqrt(3) - 1, (math.sqrt(13) - 3) / 2,
           2 - math.sqrt(2), math.sqrt(5) - 2 + 0.236067977, math.sqrt(7) - 2, 1 / math.e)


@lru_cache(maxsize=256)
def _kron_offsets(seed: int, workload: str) -> tuple[float, ...]:
    return tuple(np.random.default_rng([seed, zlib.crc32(workload.encode()), 99]).random(len(_KRON_A)).tolist())


def quantile(seed: int, workload: str, dim: int, i: int, j: int = 0) -> float:
    """Quasi-random quantile in (0, 1) of dimension ``dim`` for session ``i``, item ``j``."""
    v = (_kron_offsets(seed, workload)[dim] + i * _KRON_A[dim] + j * _KRON_B[dim]) % 1.0
    return min(max(v, 1e-9), 1 - 1e-9)


def item_quantiles(dim: int, n_items: int, grid: int = 20_000) -> np.ndarray:
    """The quantiles of items 0..n_items−1 of one session over a uniform grid of session offsets,
    shape (grid, n_items): item j sits at frac(v + j·b_dim), so expectations over a session's items
    (which the item step correlates) can be taken exactly over v."""
    v = (np.arange(grid) + 0.5) / grid
    return np.mod(v[:, None] + np.arange(n_items)[None, :] * _KRON_B[dim], 1.0)


def pick_quantile(q: float, cum: list[float]) -> int:
    return min(bisect.bisect_right(cum, q * cum[-1]), len(cum) - 1)

