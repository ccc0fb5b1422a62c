"""nbval on the notebooks (``make test``): kernels draw inline, and every notebook must show a figure.

The run that ``make test`` already makes is reused: nbval executes each notebook's cells at its CI-sized
defaults in a kernel started with the inline backend (:func:`lachesis.kernel.kernel_env`; the shell's
``MPLBACKEND=Agg`` is for in-process plotting only), and one more test per notebook, ``<nb>::inline_figure``,
runs after its last cell and fails unless some cell produced an ``image/png`` output — what a reader sees in
JupyterLab.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from lachesis.kernel import kernel_env

_IMAGES: dict[str, int] = defaultdict(int)


def _is_cell(item: pytest.Item) -> bool:
    return type(item).__name__ == "IPyNbCell"


class InlineFigure(pytest.Item):
    """Passes when the notebook's cells, as nbval ran them, showed at least one ``image/png``."""

    def runtest(self) -> None:
        if not _IMAGES[str(self.parent.path)]:
            raise AssertionError(f"{self.parent.path.name}: no cell produced an inline figure (image/png)")

    def reportinfo(self):
        return self.path, None, f"{self.parent.path.name}::inline_figure"


def pytest_collection_modifyitems(session, config, items):  # noqa: ARG001
    out, last = [], {}
    for i, item in enumerate(items):
        if _is_cell(item):
            last[item.parent] = i
    ends = {i: parent for parent, i in last.items()}
    for i, item in enumerate(items):
        out.append(item)
        if i in ends:
            out.append(InlineFigure.from_parent(ends[i], name="inline_figure"))
    items[:] = out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """The notebook's kernel starts during its first cell's setup: give it the inline backend."""
    with kernel_env():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    if _is_cell(item):
        outs = getattr(item, "test_outputs", None) or []
        _IMAGES[str(item.parent.path)] += sum("image/png" in (o.get("data") or {}) for o in outs)
