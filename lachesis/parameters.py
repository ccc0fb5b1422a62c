"""A notebook's parameters and a params file's plan: what ``lachesis reproduce`` runs, with which values.

:func:`plan` reads a params file into (notebook, parameters) pairs and refuses, before anything runs, a key
or value no notebook declares (:func:`check_spec`); :func:`notebook_setup`, each notebook's first line after
its parameters cell, checks the injected values again (:func:`check_parameters`) and resolves its paths
from the repository root.  The params file is a contract of docs/design.md §1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def notebook_parameters(path: Path) -> dict[str, str | None]:
    """Names declared in a notebook's ``parameters`` cell, each with the type papermill infers from its
    annotation (``str``, ``int``, ``float``, ``bool``; None when it has none)."""
    import papermill as pm

    return {k: (v.get("inferred_type_name") or None) for k, v in pm.inspect_notebook(str(path)).items()}


#: The declared types a parameter's value is checked against; any other declared type is not checked.
CHECKED_TYPES = ("str", "int", "float", "bool")


def type_error(value: Any, declared: str | None) -> str | None:
    """Why ``value`` (as YAML read it) does not fit a parameter declared ``declared`` (None: it fits).  A whole
    number fits ``float``; a bool fits only ``bool``."""
    if declared not in CHECKED_TYPES:
        return None
    ok = {"str": isinstance(value, str), "bool": isinstance(value, bool),
          "int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool)}[declared]
    return None if ok else f"expected {declared}, got {type(value).__name__} {value!r}"


def convert(text: str, declared: str | None) -> Any:
    """A ``-p NAME VALUE`` text as the parameter's declared type (ValueError: it is not one); a parameter of
    no checked type gets the text as YAML reads it."""
    if declared == "str":
        return text
    if declared == "bool":
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        raise ValueError(f"expected bool (true or false), got {text!r}")
    if declared in ("int", "float"):
        try:
            return int(text) if declared == "int" else float(text)
        except ValueError:
            raise ValueError(f"expected {declared}, got {text!r}") from None
    return yaml.safe_load(text)


#: Top-level keys a params file may have.
SPEC_KEYS = ("common", "notebooks", "order", "beside")


def check_spec(params_file: Path, spec: dict[str, Any], declared: dict[str, dict[str, str | None]]) -> None:
    """Refuse, before anything runs, a params file whose keys a notebook does not declare or whose values are
    not of the declared type (``declared``: each notebook's :func:`notebook_parameters`).  A ``common:`` key
    must be declared by at least one notebook (and fit each that declares it); a ``notebooks: NAME:`` key by
    that notebook.  Each error names the file, the key, the notebook and the expected type."""
    if unknown := [k for k in spec if k not in SPEC_KEYS]:
        raise ValueError(f"{params_file}: unknown top-level key {unknown[0]!r}; expected {', '.join(SPEC_KEYS)}")
    for section in ("common", "notebooks"):
        if not isinstance(spec.get(section) or {}, dict):
            raise ValueError(f"{params_file}: {section}: expected a mapping, got {type(spec[section]).__name__}")
    for key, value in (spec.get("common") or {}).items():
        users = [n for n, d in declared.items() if key in d]
        if not users:
            raise ValueError(f"{params_file}: common: {key!r} is a parameter of no notebook"
                             + _close_match(key, {k for d in declared.values() for k in d}))
        for n in users:
            if why := type_error(value, declared[n][key]) or choice_error(key, value):
                raise ValueError(f"{params_file}: common: {key}: {why} (notebook {n})")
    for n, values in (spec.get("notebooks") or {}).items():
        if not isinstance(values or {}, dict):
            raise ValueError(f"{params_file}: notebooks: {n}: expected a mapping of parameters, "
                             f"got {type(values).__name__}")
        for key, value in (values or {}).items():
            if key not in declared[n]:
                raise ValueError(f"{params_file}: notebooks: {n}: {key!r} is not a parameter of notebook {n}"
                                 + _close_match(key, set(declared[n])))
            if why := type_error(value, declared[n][key]) or choice_error(key, value):
                raise ValueError(f"{params_file}: notebooks: {n}: {key}: {why} (notebook {n})")


def _close_match(key: str, known: set[str]) -> str:
    import difflib

    near = difflib.get_close_matches(str(key), sorted(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else f"; its parameters: {', '.join(sorted(known))}"


def parameter_choices() -> dict[str, tuple[tuple[str, ...], bool]]:
    """The grid notebooks' parameters that name a choice: parameter -> (its choices, whether it is a
    comma-separated list of them).  A list may be empty (the notebook's default); a policy may carry knobs
    after ``:``."""
    from lachesis.config import SLOS
    from lachesis.evaluation import grid, knobs
    from lachesis.node import capacity, plan

    one = {"search": tuple(capacity.SEARCH_PRESETS), "load": grid.LOADS, "seed_load": grid.SEED_LOADS,
           "load_base": knobs.KNOBS["load_base"].allowed, "daisy_chain_load": grid.DAISY_CHAIN_LOADS,
           "node": tuple(knobs.NODES), "lifetime_over_ranks": knobs.KNOBS["lifetime_over_ranks"].allowed,
           "laden_close": plan.LADEN_CLOSES, "slo": tuple(SLOS), "multi_workload": grid.MULTI_WORKLOADS,
           "single_workload": grid.SINGLE_WORKLOADS}
    many = {"configs": grid.CONFIG_LABELS, "multi_configs": grid.CONFIG_LABELS, "single_configs": grid.CONFIG_LABELS,
            "models": grid.MODEL_NAMES, "slos": tuple(SLOS), "workloads": grid.MULTI_WORKLOADS + grid.SINGLE_WORKLOADS,
            "policies": tuple(grid.POLICIES), "no_reviewer_policies": tuple(grid.POLICIES), "knobs": tuple(knobs.KNOBS)}
    return {**{k: (tuple(v), False) for k, v in one.items()}, **{k: (tuple(v), True) for k, v in many.items()}}


def choice_error(key: str, value: Any) -> str | None:
    """Why a choice parameter's value (:func:`parameter_choices`) names no choice (None: it does, or the
    parameter is not a choice)."""
    known = parameter_choices().get(key)
    if known is None or not isinstance(value, str):
        return None
    choices, is_list = known
    given = [x.strip() for x in value.split(",") if x.strip()] if is_list else [value]
    bad = [x for x in given if x.partition(":")[0].strip() not in choices]
    return f"unknown choice {bad[0]!r}; expected {'a comma-separated list of ' if is_list else 'one of '}" \
           f"{', '.join(choices)}" if bad else None


#: numeric notebook parameters with a lower bound: (bound, how the refusal states it)
LOWER_BOUNDS: dict[str, tuple[float, str]] = {"seed": (0, ">= 0"), "scale": (1e-9, "> 0")}


def check_parameters(namespace: dict[str, Any]) -> None:
    """In a notebook, just after its parameters cell: refuse a parameter whose value (injected by papermill,
    e.g. ``papermill -p seeds 0`` gives an int) is not of the type its annotation declares, or that names no
    choice of a choice parameter (``-p search bogus``), naming it, before anything runs.  ``namespace``: the
    notebook's ``globals()``."""
    for key, ann in (namespace.get("__annotations__") or {}).items():
        declared = ann if isinstance(ann, str) else getattr(ann, "__name__", None)
        if key in namespace and (why := type_error(namespace[key], declared)):
            hint = " (papermill -p reads numbers as numbers; pass text with -r)" if declared == "str" else ""
            raise TypeError(f"parameter {key}: {why}{hint}")
        if key in namespace and (why := choice_error(key, namespace[key])):
            raise ValueError(f"parameter {key}: {why}")
        if key in namespace and key in LOWER_BOUNDS and isinstance(namespace[key], (int, float)) \
                and not namespace[key] >= LOWER_BOUNDS[key][0]:
            raise ValueError(f"parameter {key}: must be {LOWER_BOUNDS[key][1]}, got {namespace[key]!r}")


#: Notebook parameters naming a folder the notebook writes or reads as it finds it: resolved to a ``Path``.
FOLDER_PARAMETERS = ("out_dir", "cache_dir", "figures")
#: Notebook parameters naming an input, empty for the notebook's default: a given one resolved to a ``str`` and
#: required to exist (a missing input is an error naming the parameter, never a silent skip).
INPUT_PARAMETERS = ("trace", "data", "table", "model_config", "gain_vs_load_paper", "fig09_grid", "fig11_grid",
                    "fig10_composition")


def notebook_setup(namespace: dict[str, Any]) -> dict[str, Any]:
    """A notebook's first cell after its parameters cell: check the injected values (:func:`check_parameters`),
    then resolve its path parameters (:data:`FOLDER_PARAMETERS`, :data:`INPUT_PARAMETERS`) from the repository
    root in place (:func:`lachesis.paths.repo_path`), so a notebook reads and writes the same files from any
    working directory.  ``namespace``: the notebook's ``globals()``.  Returns the parameters as given, for text
    that names a path the way the user wrote it."""
    from lachesis.paths import repo_path

    check_parameters(namespace)
    declared = namespace.get("__annotations__") or {}
    given = {k: namespace[k] for k in declared if k in namespace}
    for key in FOLDER_PARAMETERS:
        if key in given:
            namespace[key] = repo_path(given[key])
    for key in INPUT_PARAMETERS:
        if given.get(key):
            namespace[key] = str(repo_path(given[key], must_exist=True, what=key))
    return given


def project_root(params_file: Path) -> Path:
    """The nearest folder above the params file (or else the working directory) that holds ``notebooks/``."""
    for d in [*Path(params_file).resolve().parents, Path.cwd()]:
        if (d / "notebooks").is_dir():
            return d
    raise FileNotFoundError(f"{params_file}: no notebooks/ folder above it or in {Path.cwd()}")


def load_spec(params_file: Path) -> dict[str, Any]:
    """The params file as a mapping (an empty file is an empty mapping)."""
    spec = yaml.safe_load(Path(params_file).read_text(encoding="utf-8")) or {}
    if not isinstance(spec, dict):
        raise ValueError(f"{params_file}: expected a YAML mapping (common:, notebooks:), got {type(spec).__name__}")
    return spec


def notebook_order(params_file: Path, only: list[str] | None = None) -> list[tuple[str, Path]]:
    """(name, source notebook) of every notebook beside the params file, in the order it runs: those the file's
    ``order:`` names first, then the others by name, so none is skipped.  Unknown names in ``only`` or in the
    file's ``order:``/``beside:``/``notebooks:`` are refused, listing the valid names."""
    spec = load_spec(params_file)
    nb_dir = project_root(params_file) / "notebooks"
    available = sorted(p.stem for p in nb_dir.glob("*.ipynb"))
    order = list(spec.get("order") or [])
    for key in ("order", "beside"):
        if not isinstance(spec.get(key) or [], list) or not all(isinstance(n, str) for n in spec.get(key) or []):
            raise ValueError(f"{params_file}: {key}: expected a list of notebook names, got {spec[key]!r}")
    for what, names in (("--only", only or []), (f"{params_file} order:", order),
                        (f"{params_file} beside:", list(spec.get("beside") or [])),
                        (f"{params_file} notebooks:", list((spec.get("notebooks") or {}).keys()))):
        unknown = [n for n in names if n not in available]
        if unknown:
            raise ValueError(f"{what} names no notebook {', '.join(map(repr, unknown))}; "
                             f"valid names: {', '.join(available)}")
    order += [n for n in available if n not in order]  # an order names the first ones; the rest follow, sorted
    return [(n, nb_dir / f"{n}.ipynb") for n in order]


def plan(params_file: Path, only: list[str] | None = None,
         overrides: list[tuple[str, str]] | None = None) -> list[tuple[str, Path, dict[str, Any]]]:
    """(name, source notebook, parameters) per notebook to run, in :func:`notebook_order`.  Parameters no
    notebook declares and values not of the declared type fail before anything runs (:func:`check_spec`).
    ``overrides``: ``-p NAME VALUE`` pairs for every notebook to run that declares NAME, the text converted to
    the declared type (:func:`convert`); a NAME none of them declares, or a text not of its type, is refused."""
    spec = load_spec(params_file)
    nb_dir = project_root(params_file) / "notebooks"
    order = [n for n, _ in notebook_order(params_file, only)]
    available = sorted(order)
    declared = {n: notebook_parameters(nb_dir / f"{n}.ipynb") for n in available}
    check_spec(params_file, spec, declared)
    chosen = [n for n in order if not only or n in only]
    given: dict[str, dict[str, Any]] = {n: {} for n in chosen}
    for key, text in overrides or []:
        users = [n for n in chosen if key in declared[n]]
        if not users:
            raise ValueError(f"-p {key}: a parameter of none of the notebooks to run ({', '.join(chosen)})"
                             + _close_match(key, {k for n in chosen for k in declared[n]}))
        for n in users:
            try:
                given[n][key] = convert(text, declared[n][key])
            except ValueError as e:
                raise ValueError(f"-p {key}: {e} (the type notebook {n} declares)") from None
            if why := choice_error(key, given[n][key]):
                raise ValueError(f"-p {key}: {why} (notebook {n})")
    out = []
    for name in chosen:
        params = {**(spec.get("common") or {}), **((spec.get("notebooks") or {}).get(name) or {}), **given[name]}
        out.append((name, nb_dir / f"{name}.ipynb", {k: v for k, v in params.items() if k in declared[name]}))
    return out
