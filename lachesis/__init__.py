"""Lachesis: lifetime-aware KV cache placement across HBM and high-bandwidth flash (reproducibility package)."""

from lachesis.config import DEFAULT, Config
from lachesis.traces.schema import TraceError
from lachesis.traces.trace import Trace, read_trace, write_trace
from lachesis.version import __version__

__all__ = ["Config", "DEFAULT", "Trace", "TraceError", "__version__", "read_trace", "write_trace"]


def __getattr__(name: str):
    """``lachesis.evaluate`` (:func:`lachesis.evaluation.verdict.evaluate`), imported when first used."""
    if name == "evaluate":  # imported on first use, so ``import lachesis`` loads no simulator
        import importlib

        return importlib.import_module("lachesis.evaluation.verdict").evaluate
    raise AttributeError(f"module 'lachesis' has no attribute {name!r}")
