"""Lachesis: lifetime-aware KV cache placement across HBM and high-bandwidth flash (reproducibility package)."""

from lachesis.config import DEFAULT, Config
from lachesis.schema import TraceError
from lachesis.trace import Trace, read_trace, write_trace

__all__ = ["Config", "DEFAULT", "Trace", "TraceError", "read_trace", "write_trace"]
__version__ = "0.2.0"  # the one place the version is decided (pyproject.toml reads it; CHANGELOG.md)
