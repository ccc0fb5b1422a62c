"""How the package runs a notebook: a kernel that draws inline and logs its progress to a file, and the one
output check nbval compares.

:func:`execute` runs a notebook through papermill in such a kernel (``lachesis reproduce``);
:func:`refresh_check_output` stores a notebook's new ``# NBVAL_CHECK_OUTPUT`` output (docs/design.md §6,
"Output checks").
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Protocol

from lachesis.io import write_text

#: The kernel's own log (its startup notice about TCP transport) is not the notebook's output; errors
#: in the notebook still reach the run through its cells.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]
#: The backend a notebook kernel draws with: inline, so every figure is an ``image/png`` output of its cell
#: (in JupyterLab and in an executed copy), headless or not.  A headless shell exports ``MPLBACKEND=Agg``
#: for its own plotting (the Makefile does); a kernel inherits its environment, so kernels started here get
#: this one instead.  Notebooks never choose a backend themselves.
KERNEL_BACKEND = "module://matplotlib_inline.backend_inline"


class Stream(Protocol):
    """Where a kernel's printed text goes: a text stream."""

    def write(self, text: str) -> int: ...

    def flush(self) -> None: ...


@contextmanager
def kernel_env() -> Iterator[None]:
    """Within the block, kernels started by this process draw inline (:data:`KERNEL_BACKEND`)."""
    old = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = KERNEL_BACKEND
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = old


def image_outputs(nb: Any) -> int:
    """How many ``image/png`` outputs a notebook's code cells hold (a figure drawn inline is one)."""
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


def log_argument(log_file: Path) -> str:
    """The kernel option that sends its progress lines to ``log_file`` (:func:`lachesis.logs.to_file`) from its
    start, before the notebook's first cell: a kernel's own, so two notebooks running at once keep theirs."""
    return f"--IPKernelApp.exec_lines=from lachesis import logs; logs.to_file({str(log_file)!r})"


def execute(src: Path, dest: Path, parameters: dict[str, Any], cwd: Path, log_file: Path, output: Stream) -> None:
    """Run the notebook ``src`` with ``parameters`` into ``dest`` (papermill; the kernel draws inline when
    started within :func:`kernel_env`); what its cells print streams to ``output``, its progress lines to
    ``log_file``.  A failing cell raises papermill's execution error."""
    import papermill as pm

    pm.execute_notebook(str(src), str(dest), parameters=parameters, cwd=str(cwd), progress_bar=False,
                        kernel_name="python3", stdout_file=output, stderr_file=output,
                        extra_arguments=[*KERNEL_ARGUMENTS, log_argument(log_file)])


#: The marker nbval (``--nbval-lax``) looks for: the one cell whose output it compares.
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"


def check_cells(nb: Any) -> list[int]:
    """Indexes of a notebook's code cells marked :data:`CHECK_MARK`."""
    return [i for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and any(ln.strip() == CHECK_MARK for ln in c.source.splitlines())]


def refresh_check_output(path: Path) -> str:
    """Run a source notebook at its parameter defaults and store the stdout of its check cell in the
    source as the output nbval expects; return that text.  The source keeps no other output."""
    import nbformat
    import papermill as pm

    path = Path(path)
    src = nbformat.read(path, as_version=4)
    marked = check_cells(src)
    if len(marked) != 1:
        raise ValueError(f"{path}: expected one cell marked {CHECK_MARK!r}, found {len(marked)}")
    cell = src.cells[marked[0]]
    with tempfile.TemporaryDirectory() as tmp, kernel_env():
        pm.execute_notebook(str(path), str(Path(tmp) / path.name), cwd=str(path.parent), progress_bar=False,
                            kernel_name="python3", extra_arguments=KERNEL_ARGUMENTS)
        ran = nbformat.read(Path(tmp) / path.name, as_version=4)
    done = next(c for c in ran.cells if c.get("id") == cell.get("id"))
    text = "".join(o.get("text", "") for o in done.outputs if o.output_type == "stream" and o.name == "stdout")
    if not text:
        raise ValueError(f"{path}: its check cell printed nothing")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    cell.execution_count = 1  # nbval skips the comparison for a cell that was never run

    out = nbformat.writes(src)
    write_text(path, out if out.endswith("\n") else out + "\n")
    return text
