"""Real public agent traces: a checksummed registry, a cache, an offline override.

Every file of every registered source is a row of ``lachesis/data/registry.tsv``; a source is read
from the offline override (``local=`` or ``LACHESIS_DATA``) or the user cache, each file verified
against its checksum.  The registry's columns, the lookup order and the assumptions: docs/design.md §7.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable
from urllib.parse import quote

import pandas as pd

from lachesis.io import atomic_write
from lachesis.paths import package_data

REGISTRY_PATH = package_data("registry.tsv")
REGISTRY_COLUMNS = ("dataset", "local_path", "original_path", "raw_url", "sha256_original", "bytes_original",
                    "gzipped_here", "sha256_local", "bytes_local", "licence", "origin")

#: Licence of each source (from its PROVENANCE.md).
LICENCES: dict[str, str] = {
    "azure_llm_2023": "CC-BY-4.0",
    "chatdev_warehouse": "Apache-2.0",
    "claude_code_more": "MIT/Apache-2.0 (per repo)",
    "claude_code_subagents": "MIT",
    "mooncake_fast25": "Apache-2.0",
    "tau2-qwen3.5-justinchiu": "MIT",
    "tau2-xai-grok-blakeelias": "MIT",
    "who_and_when": "MIT",
}

#: What each source is for, and which adapter reads it (``lachesis.traces.adapters.<module>``).
ADAPTERS: dict[str, str] = {
    "azure_llm_2023": "azure",
    "chatdev_warehouse": "chatdev",
    "claude_code_more": "claude_code",
    "claude_code_subagents": "claude_code",
    "mooncake_fast25": "mooncake",
    "tau2-qwen3.5-justinchiu": "tau2",
    "tau2-xai-grok-blakeelias": "tau2",
    "who_and_when": "who_and_when",
}

_GROK_REPO, _GROK_COMMIT = "blakeelias/tau2-bench", "cf95bf5acba69b67e31b79fc7a7255307cb446bc"
#: The tau2 licence copies: byte-identical to ``LICENSE`` of the repository at the commit their
#: PROVENANCE.md names (checked against the git objects).
_TAU2_LICENCES = {
    ("tau2-xai-grok-blakeelias", "LICENSE.upstream-MIT.txt"): (_GROK_REPO, _GROK_COMMIT),
    ("tau2-qwen3.5-justinchiu", "LICENSE.fork-snapshot-MIT.txt"): ("justinchiu/tau2-bench",
                                                                   "a969a0c0a29bc47ba8580107932f5298ee636045"),
}


class DatasetError(ValueError):
    """A dataset file is missing, unreachable or fails its checksum, or the name is unknown: names the
    dataset and file (a ValueError, so the command line reports it in one line)."""


# ------------------------------------------------------------------------------------------------
# Hashing helpers
# ------------------------------------------------------------------------------------------------


def sha256_file(path: Path, decompress: bool = False) -> tuple[str, int]:
    """sha256 and byte count of a file (of its decompressed bytes when ``decompress``), streamed."""
    h, n = hashlib.sha256(), 0
    opener = gzip.open if decompress else open
    with opener(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def git_blob_sha1(data: bytes) -> str:
    """The id ``git hash-object`` gives these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ------------------------------------------------------------------------------------------------
# Registry generation (from a full copy's MANIFEST/PROVENANCE files)
# ------------------------------------------------------------------------------------------------


def build_registry(traces_root: str | os.PathLike[str]) -> pd.DataFrame:
    """Rebuild the registry table from ``<traces_root>/*/MANIFEST.tsv`` and the tau2 PROVENANCE pins.

    Every manifest row is checked against the file it names (sha256 of the local bytes, and of the
    decompressed bytes for gzip files); a mismatch raises naming the file.
    """
    root = Path(traces_root)
    rows: list[dict[str, object]] = []
    for manifest in sorted(root.glob("**/MANIFEST.tsv")):
        dataset = manifest.relative_to(root).parts[0]
        prefix = manifest.parent.relative_to(root / dataset)
        with open(manifest, newline="", encoding="utf-8") as fh:
            for lineno, rec in enumerate(csv.DictReader(fh, delimiter="\t"), start=2):
                rel = (prefix / rec["local_path"]).as_posix()
                path = root / dataset / rel
                gz = rec["gzipped_here"].strip() == "yes"
                sha_orig = rec.get("sha256_original") or rec.get("sha256")
                bytes_orig = int(rec.get("bytes_original") or rec.get("bytes") or "")
                sha_local, n_local = sha256_file(path)
                if rec.get("sha256_local") and rec["sha256_local"] != sha_local:
                    raise DatasetError(f"{manifest}:{lineno}: {rel}: sha256_local in the manifest does not match the "
                                       f"file")
                got, n = sha256_file(path, decompress=gz) if gz else (sha_local, n_local)
                if (got, n) != (sha_orig, bytes_orig):
                    raise DatasetError(f"{manifest}:{lineno}: {rel}: upstream sha256/bytes do not match the file")
                rows.append(dict(dataset=dataset, local_path=rel, original_path=rec["original_path"],
                                 raw_url=rec["raw_url"], sha256_original=sha_orig, bytes_original=bytes_orig,
                                 gzipped_here="yes" if gz else "no", sha256_local=sha_local, bytes_local=n_local,
                                 licence=LICENCES.get(dataset, "see PROVENANCE.md"), origin="upstream"))
    rows += _tau2_rows(root)
    df = pd.DataFrame(rows, columns=list(REGISTRY_COLUMNS))
    return df.sort_values(["dataset", "local_path"]).reset_index(drop=True)


def _tau2_rows(root: Path) -> list[dict[str, object]]:
    """The two tau2 folders have no manifest: pin grok files by the git blob ids of PROVENANCE.md."""
    rows: list[dict[str, object]] = []
    grok = root / "tau2-xai-grok-blakeelias"
    if grok.is_dir():
        blobs = dict(re.findall(r"\| (\S+_airline_\S+) \| ([0-9a-f]{40})", (grok / "PROVENANCE.md").read_text()))
        for path in sorted(grok.glob("*.json.gz")):
            stem = path.name[:-3]
            data = gzip.decompress(path.read_bytes())
            blob = blobs.get(stem[:-5])
            if blob is None or git_blob_sha1(data) != blob:
                raise DatasetError(f"{path}: git blob id does not match PROVENANCE.md ({blob})")
            sha_local, n_local = sha256_file(path)
            rows.append(dict(dataset=grok.name, local_path=path.name, original_path=f"data/simulations/{stem}",
                             raw_url=f"https://raw.githubusercontent.com/{_GROK_REPO}/{_GROK_COMMIT}/data/simulations/"
                                     + quote(stem),
                             sha256_original=hashlib.sha256(data).hexdigest(), bytes_original=len(data),
                             gzipped_here="yes", sha256_local=sha_local, bytes_local=n_local,
                             licence=LICENCES[grok.name], origin="upstream"))
    for folder in ("tau2-xai-grok-blakeelias", "tau2-qwen3.5-justinchiu"):
        d = root / folder
        if not d.is_dir():
            continue
        for path in sorted(p for p in d.iterdir() if p.is_file() and p.name != "PROVENANCE.md"):
            if folder.startswith("tau2-xai") and path.name.endswith(".json.gz"):
                continue
            gz = path.name.endswith(".gz")
            sha_local, n_local = sha256_file(path)
            sha_orig, n_orig = sha256_file(path, decompress=True) if gz else (sha_local, n_local)
            pin = _TAU2_LICENCES.get((folder, path.name))
            rows.append(dict(dataset=folder, local_path=path.name, original_path="LICENSE" if pin else "",
                             raw_url=f"https://raw.githubusercontent.com/{pin[0]}/{pin[1]}/LICENSE" if pin else "",
                             sha256_original=sha_orig, bytes_original=n_orig, gzipped_here="yes" if gz else "no",
                             sha256_local=sha_local, bytes_local=n_local, licence=LICENCES[folder],
                             origin="upstream" if pin else "local-only"))
    return rows


def write_registry(df: pd.DataFrame, path: Path = REGISTRY_PATH) -> Path:
    """Write the registry TSV atomically."""
    atomic_write(path, lambda t: df.to_csv(t, sep="\t", index=False))
    return path


def registry(path: Path = REGISTRY_PATH) -> pd.DataFrame:
    """The committed registry table."""
    df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in REGISTRY_COLUMNS if c not in df.columns]
    if missing:
        raise DatasetError(f"{path}: registry lacks columns {missing}")
    for c in ("bytes_original", "bytes_local"):
        df[c] = df[c].astype("int64")
    return df


def names() -> list[str]:
    """Dataset names in the registry."""
    return sorted(registry()["dataset"].unique())


def _files(name: str) -> pd.DataFrame:
    reg = registry()
    sel = reg[reg["dataset"] == name]
    if sel.empty:
        raise DatasetError(f"unknown dataset {name!r}; known: {sorted(reg['dataset'].unique())}")
    return sel


# ------------------------------------------------------------------------------------------------
# Locations: offline override and cache
# ------------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """The user cache: env ``LACHESIS_CACHE`` or ``pooch.os_cache('lachesis')``."""
    env = os.environ.get("LACHESIS_CACHE")
    if env:
        return Path(env)
    import pooch

    return Path(pooch.os_cache("lachesis"))


def local_root(local: str | os.PathLike[str] | None = None) -> Path | None:
    """The offline override folder: the argument, else env ``LACHESIS_DATA``, else None."""
    val = local if local is not None else os.environ.get("LACHESIS_DATA")
    return Path(val) if val else None


def member(dataset_dir: Path, local_path: str) -> Path:
    """The path of one registry file inside a dataset folder, in its gzip or upstream (plain) form."""
    p = dataset_dir / local_path
    if p.exists():
        return p
    if local_path.endswith(".gz") and (dataset_dir / local_path[:-3]).exists():
        return dataset_dir / local_path[:-3]
    raise DatasetError(f"{dataset_dir.name}: file {local_path} is missing from {dataset_dir}")


def verify_file(path: Path, row: pd.Series) -> str:
    """Check one file against its registry row; return 'ok' or raise DatasetError naming the file."""
    label = f"{row['dataset']}/{row['local_path']}"
    if not path.exists():
        raise DatasetError(f"{label}: missing ({path})")
    got, n = sha256_file(path)
    if got == row["sha256_local"] or got == row["sha256_original"]:
        return "ok"
    if path.name.endswith(".gz"):
        try:
            got, n = sha256_file(path, decompress=True)
        except (OSError, EOFError) as e:  # truncated or not gzip
            raise DatasetError(f"{label}: corrupted gzip file {path}: {e}") from None
        if got == row["sha256_original"]:
            return "ok"
    raise DatasetError(f"{label}: checksum mismatch for {path} (sha256 {got[:12]}…, {n} bytes; "
                       f"expected {row['sha256_local'][:12]}… or upstream {row['sha256_original'][:12]}…, "
                       f"{row['bytes_original']} bytes): corrupted or truncated")


@dataclass
class FileState:
    dataset: str
    local_path: str
    state: str  # ok | missing | corrupt
    detail: str = ""


def verify(name: str, local: str | os.PathLike[str] | None = None) -> list[FileState]:
    """Verify every file of a dataset where it lives (override folder if given, else the cache)."""
    base = local_root(local)
    return _verify_in(name, (base if base is not None else cache_dir()) / name)


def _verify_in(name: str, ddir: Path) -> list[FileState]:
    out = []
    for _, row in _files(name).iterrows():
        try:
            path = member(ddir, row["local_path"])
        except DatasetError as e:
            out.append(FileState(name, row["local_path"], "missing", str(e)))
            continue
        try:
            verify_file(path, row)
            out.append(FileState(name, row["local_path"], "ok"))
        except DatasetError as e:
            out.append(FileState(name, row["local_path"], "corrupt", str(e)))
    return out


def locate(name: str, local: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder holding every file of a dataset, verified: the override folder (argument or
    ``LACHESIS_DATA``) first, then the cache; None when neither has all of them intact."""
    base = local_root(local)
    for ddir in ([base / name] if base is not None else []) + [cache_dir() / name]:
        if all(s.state == "ok" for s in _verify_in(name, ddir)):
            return ddir
    return None


def missing_sources(names: Iterable[str] | None = None, local: str | os.PathLike[str] | None = None) -> list[str]:
    """Registered sources (all, or ``names``) whose verified files are neither in the override folder nor
    in the cache; never downloads. Unknown names raise :class:`DatasetError`."""
    chosen = list(names) if names is not None else sorted(registry()["dataset"].unique())
    return [n for n in chosen if locate(n, local) is None]


def public_sources() -> list[str]:
    """The default set: registered sources every file of which has a public, byte-identical origin
    (``origin == upstream``), so ``lachesis datasets fetch`` can get them.  A source with a local-only file
    is read only when asked for by name (with an offline copy)."""
    reg = registry()
    private = set(reg.loc[reg["origin"] != "upstream", "dataset"])
    return sorted(set(reg["dataset"]) - private)


def fetch_missing(names: Iterable[str] | None = None, local: str | os.PathLike[str] | None = None,
                  log=None) -> tuple[list[str], list[tuple[str, str]]]:
    """Fetch the sources (default :func:`public_sources`) that are neither in the override folder nor in the
    cache, through the checksummed registry.  Returns (fetched, not fetched with the one-line reason); a
    failure (offline, a checksum) does not stop the others."""
    fetched, failed = [], []
    for name in missing_sources(public_sources() if names is None else names, local):
        try:
            fetch(name, local)
            fetched.append(name)
            if log is not None:
                print(f"  fetched {name} into {cache_dir() / name}", file=log, flush=True)
        except Exception as e:  # noqa: BLE001 — offline, unreachable, corrupt: named, and the others go on
            why = " ".join(str(e).split())[:400] or e.__class__.__name__
            failed.append((name, why))
            if log is not None:
                print(f"  could not fetch {name}: {why}", file=log, flush=True)
    return fetched, failed


def fetch_hint(name: str) -> str:
    """The command that makes a registered source available (or why none can)."""
    if (_files(name)["origin"] != "upstream").any():
        return (f"{name} has files with no public byte-identical origin: put a copy in DIR/{name} and run "
                f"`lachesis datasets verify {name} --local DIR` (or set LACHESIS_DATA=DIR)")
    return f"lachesis datasets fetch {name}"


def fetch(name: str, local: str | os.PathLike[str] | None = None, progress: bool = False) -> Path:
    """Make a dataset available and return its folder (the override's or the cache's ``<name>/``).

    With an override folder the files are verified and used in place. Otherwise each file is
    downloaded by pooch from its pinned URL into the cache, checked against ``sha256_original``.
    """
    base = local_root(local)
    files = _files(name)
    if base is not None:
        ddir = base / name
        for _, row in files.iterrows():
            verify_file(member(ddir, row["local_path"]), row)
        return ddir
    import pooch

    ddir = cache_dir() / name
    todo = []
    for _, row in files.iterrows():
        try:  # already cached and intact?
            verify_file(member(ddir, row["local_path"]), row)
        except DatasetError:
            todo.append(row)
    for row in todo:  # before any download: a file nobody can download stops the fetch
        if row["origin"] != "upstream" or not row["raw_url"]:
            raise DatasetError(f"{name}/{row['local_path']}: no public byte-identical origin is known; "
                               "use the offline override (--local DIR or LACHESIS_DATA)")
    for row in todo:
        target = Path(row["local_path"][:-3] if row["gzipped_here"] == "yes" else row["local_path"])
        try:
            pooch.retrieve(row["raw_url"], known_hash="sha256:" + row["sha256_original"], fname=target.name,
                           path=ddir / target.parent, progressbar=progress)
        except ValueError as e:  # pooch's hash mismatch
            raise DatasetError(f"{name}/{row['local_path']}: download from {row['raw_url']} failed its checksum: {e}") \
                from None
        except OSError as e:  # no network, HTTP error (requests' errors are OSErrors), unwritable cache
            raise DatasetError(f"{name}/{row['local_path']}: download from {row['raw_url']} failed: {e}") from None
    return ddir


def copy_into(name: str, src_root: str | os.PathLike[str], dest_root: str | os.PathLike[str]) -> Path:
    """Copy a verified dataset from one folder into another (e.g. the cache), atomically per file."""
    src, dest = Path(src_root) / name, Path(dest_root) / name
    for _, row in _files(name).iterrows():
        path = member(src, row["local_path"])
        target = dest / path.relative_to(src)

        def write(tmp: Path, path: Path = path, row: pd.Series = row) -> None:
            shutil.copyfile(path, tmp)
            _verify_tmp(tmp, path.name, row)  # raising here removes the temporary file
        atomic_write(target, write)
    return dest


def _verify_tmp(tmp: Path, final_name: str, row: pd.Series) -> None:
    """Verify a temporary copy as if it had its final name (so the gzip fallback applies)."""
    got, _ = sha256_file(tmp)
    if got in (row["sha256_local"], row["sha256_original"]):
        return
    if final_name.endswith(".gz"):
        try:
            if sha256_file(tmp, decompress=True)[0] == row["sha256_original"]:
                return
        except (OSError, EOFError):
            pass
    raise DatasetError(f"{row['dataset']}/{row['local_path']}: checksum mismatch after copy")


# ------------------------------------------------------------------------------------------------
# Listing
# ------------------------------------------------------------------------------------------------


def summary(names_: Iterable[str] | None = None, local: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """One row per dataset: files, bytes, where it is (cache/override), verified state, licence."""
    reg = registry()
    rows = []
    for name in (list(names_) if names_ else sorted(reg["dataset"].unique())):
        f = _files(name)
        states = verify(name, local)
        n_ok = sum(s.state == "ok" for s in states)
        n_missing = sum(s.state == "missing" for s in states)
        where = "override" if local_root(local) is not None else "cache"
        state = ("verified" if n_ok == len(states) else
                 "absent" if n_missing == len(states) else
                 f"{n_ok}/{len(states)} ok, {n_missing} missing, {len(states) - n_ok - n_missing} corrupt")
        rows.append(dict(dataset=name, files=len(f), bytes_upstream=int(f["bytes_original"].sum()),
                         bytes_here=int(f["bytes_local"].sum()), where=where, state=state,
                         local_only_files=int((f["origin"] != "upstream").sum()), licence=LICENCES.get(name, "")))
    return pd.DataFrame(rows)


if __name__ == "__main__":  # python -m lachesis.traces.datasets build-registry <folder of sources with MANIFEST.tsv>
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "build-registry":
        print(write_registry(build_registry(sys.argv[2])))
    else:
        sys.exit("usage: python -m lachesis.traces.datasets build-registry <traces_root>")
