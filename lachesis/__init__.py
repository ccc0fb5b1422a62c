"""Lachesis: lifetime-aware KV cache placement across HBM and high-bandwidth flash (reproducibility package)."""

from lachesis.config import DEFAULT, Config
from lachesis.traces.schema import TraceError
from lachesis.traces.trace import Trace, read_trace, write_trace

__all__ = ["Config", "DEFAULT", "Trace", "TraceError", "read_trace", "write_trace"]
__version__ = "0.2.0"


def __getattr__(name: str):
    """``lachesis.evaluate`` (:func:`lachesis.evaluation.verdict.evaluate`), imported when first used."""
    if name == "evaluate":  # imported on first use, so ``import lachesis`` loads no simulator
        import importlib

        return importlib.import_module("lachesis.evaluation.verdict").evaluate
    raise AttributeError(f"module 'lachesis' has no attribute {name!r}")  # the one place the version is decided (pyproject.toml reads it; CHANGELOG.md)
