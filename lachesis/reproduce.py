"""Run the notebooks through papermill with a params file (the README's reproduce command).

The params file (YAML) has ``common:`` parameters for every notebook and ``notebooks:`` with one
entry per notebook name (its file stem) overriding them.  A notebook only receives the parameters
its ``parameters`` cell declares.  Executed copies go to ``build/notebooks/`` (ignored by git).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml


def notebook_parameters(path: Path) -> set[str]:
    """Names declared in a notebook's ``parameters`` cell."""
    import papermill as pm

    return set(pm.inspect_notebook(str(path)).keys())


def project_root(params_file: Path) -> Path:
    """The nearest folder above the params file (or else the working directory) that holds ``notebooks/``."""
    for d in [*Path(params_file).resolve().parents, Path.cwd()]:
        if (d / "notebooks").is_dir():
            return d
    raise FileNotFoundError(f"{params_file}: no notebooks/ folder above it or in {Path.cwd()}")


def run_notebooks(params_file: Path, only: list[str] | None = None, build: Path | None = None) -> list[Path]:
    import papermill as pm

    params_file = Path(params_file)
    spec = yaml.safe_load(params_file.read_text()) or {}
    root = project_root(params_file)
    nb_dir = root / "notebooks"
    build = build or root / "build" / "notebooks"
    build.mkdir(parents=True, exist_ok=True)
    order = spec.get("order") or sorted(p.stem for p in nb_dir.glob("*.ipynb"))
    done = []
    for name in order:
        if only and name not in only:
            continue
        src = nb_dir / f"{name}.ipynb"
        if not src.exists():
            raise FileNotFoundError(f"{params_file}: notebook {name!r} not found at {src}")
        declared = notebook_parameters(src)
        params = {**(spec.get("common") or {}), **((spec.get("notebooks") or {}).get(name) or {})}
        params = {k: v for k, v in params.items() if k in declared}
        t0 = time.perf_counter()
        print(f"[reproduce] {name}  {params}", flush=True)
        out = build / f"{name}.ipynb"
        pm.execute_notebook(str(src), str(out), parameters=params, cwd=str(nb_dir), progress_bar=False,
                            kernel_name="python3")
        print(f"[reproduce] {name} done in {time.perf_counter() - t0:.1f} s -> {out}", flush=True)
        done.append(out)
    return done


def cli_reproduce(args: argparse.Namespace) -> int:
    run_notebooks(Path(args.params), args.only)
    return 0
