"""Where the package's progress lines go: the ``lachesis`` logger (:mod:`logging`), never a notebook's page.

A line per event (``[sweep] 3/8 …``) is logged at INFO.  ``lachesis reproduce`` starts each notebook's kernel
with :func:`to_file` (``build/logs/<notebook>.log``), so an executed page holds the notebook's results, not its
progress; with no handler set, a terminal (the ``lachesis`` command, a script) gets the lines on stderr, and a
Jupyter kernel keeps them off the notebook (its progress bar shows the work).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

LOGGER = logging.getLogger("lachesis")
#: set by :func:`to_file`: the progress goes to that file, and no progress bar is drawn into the notebook
_FILE: list[Path] = []


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (its stdout is ipykernel's stream)."""
    return type(sys.stdout).__module__.startswith("ipykernel")


def to_file(path: str | Path) -> Path:
    """From now on, this process's progress lines go to ``path`` (created, truncated), one per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    for old in [h for h in LOGGER.handlers if isinstance(h, logging.FileHandler)]:
        LOGGER.removeHandler(old)
        old.close()
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    _FILE[:] = [path]
    return path


def bars() -> bool:
    """Whether a progress bar should be drawn (not when the progress goes to a log file)."""
    return not _FILE


class _TqdmStderr(logging.Handler):
    """A terminal's handler: each line on stderr through ``tqdm.write``, so a bar on the same terminal stays whole."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm.auto import tqdm

        tqdm.write(self.format(record), file=sys.stderr)


def line(text: str) -> None:
    """Log one progress line.  With no handler set, a terminal gets it on stderr; a Jupyter kernel leaves it to
    logging's own setting (a notebook's page stays without it)."""
    if not LOGGER.handlers and not in_kernel():
        LOGGER.addHandler(_TqdmStderr())
        LOGGER.setLevel(logging.INFO)
        LOGGER.propagate = False
    LOGGER.info(text)
