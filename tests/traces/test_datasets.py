"""Registry, checksum verification, offline override, cache and atomic copies (no network, no mirror):
the mechanisms run on a copy of the committed excerpts laid out like the full data, with MANIFESTs."""

from __future__ import annotations

import csv
import gzip
import hashlib
import shutil
from pathlib import Path

import pytest
from fixture_paths import TRACE_FIXTURES as FIX  # the committed excerpts, named once

from lachesis.cli import main
from lachesis.traces import datasets as ds

ALL = ["azure_llm_2023", "chatdev_warehouse", "claude_code_more", "claude_code_subagents", "mooncake_fast25",
       "tau2-qwen3.5-justinchiu", "tau2-xai-grok-blakeelias", "who_and_when"]
MANIFEST = ["local_path", "original_path", "git_blob_sha1", "gzipped_here", "sha256_original", "bytes_original",
            "sha256_local", "raw_url"]


# ------------------------------------------------------------------------------- the committed registry


def test_registry_lists_every_source_with_pinned_urls():
    reg = ds.registry()
    assert sorted(reg["dataset"].unique()) == ALL == ds.names()
    up = reg[reg["origin"] == "upstream"]
    # every downloadable file has a commit-pinned raw URL (40 hex digits in the path) and a sha256
    assert up["raw_url"].str.match(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/").all()
    assert up["sha256_original"].str.fullmatch(r"[0-9a-f]{64}").all()
    # the only file without an upstream pin: the transcribed Qwen sample
    assert set(reg.loc[reg["origin"] == "local-only", "local_path"]) == {
        "qwen3.5-27B-temp06-gpt41user_airline_test.first3sessions.json.gz"}
    # the tau2 licence copies are pinned to LICENSE at the commits their PROVENANCE names
    lic = reg[reg["local_path"].str.startswith("LICENSE.")].set_index("dataset")["raw_url"]
    assert lic["tau2-xai-grok-blakeelias"].endswith(
        "/blakeelias/tau2-bench/cf95bf5acba69b67e31b79fc7a7255307cb446bc/LICENSE")
    assert lic["tau2-qwen3.5-justinchiu"].endswith(
        "/justinchiu/tau2-bench/a969a0c0a29bc47ba8580107932f5298ee636045/LICENSE")
    # hand-read from azure_llm_2023/MANIFEST.tsv
    row = reg[(reg["dataset"] == "azure_llm_2023") & (reg["local_path"] == "AzureLLMInferenceTrace_conv.csv")].iloc[0]
    assert row["sha256_original"] == "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8"
    assert row["bytes_original"] == 719188
    assert row["raw_url"].endswith("/b469a113cedca53ddc3bdea71a143dc4b7d8700c/data/AzureLLMInferenceTrace_conv.csv")
    # grok: git blob ids of PROVENANCE.md, ':' in file names URL-encoded
    grok = up[up["dataset"] == "tau2-xai-grok-blakeelias"]
    assert (grok["gzipped_here"] == "yes").sum() == 5 and grok["raw_url"].str.contains("%3A").sum() == 5


# ---------------------------------------------------------------- a mirror-like copy of the excerpts


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _with_manifest(d: Path) -> None:
    """Write the MANIFEST.tsv the registry builder reads for every file of a source folder."""
    rows = []
    for f in sorted(p for p in d.rglob("*") if p.is_file()):
        data = f.read_bytes()
        gz = f.name.endswith(".gz")
        orig = gzip.decompress(data) if gz else data
        rel = f.relative_to(d).as_posix()
        rows.append(dict(local_path=rel, original_path=rel, git_blob_sha1="", gzipped_here="yes" if gz else "no",
                         sha256_original=_sha(orig), bytes_original=len(orig), sha256_local=_sha(data),
                         raw_url=f"https://example.invalid/{d.name}/{rel.removesuffix('.gz')}"))
    with open(d / "MANIFEST.tsv", "w", newline="") as fh:
        w = csv.DictWriter(fh, MANIFEST, delimiter="\t")
        w.writeheader()
        w.writerows(rows)


def _mirror(root: Path, names: tuple[str, ...] = ("azure_llm_2023", "mooncake_fast25", "who_and_when")) -> Path:
    """Copies of some fixture sources laid out like the full data, each with its MANIFEST.tsv."""
    for name in names:
        _with_manifest(shutil.copytree(FIX / name, root / name, ignore=shutil.ignore_patterns("NOTICE.md")))
    return root


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A mirror-like copy of three sources, and the registry built from it in place of the committed one."""
    root = _mirror(tmp_path / "mirror")
    reg = ds.build_registry(root)
    monkeypatch.setattr(ds, "registry", lambda path=ds.REGISTRY_PATH: reg)
    return root


def test_build_registry_reads_manifests_and_checks_them(tmp_path):
    root = _mirror(tmp_path / "m")
    reg = ds.build_registry(root)
    assert sorted(reg["dataset"].unique()) == ["azure_llm_2023", "mooncake_fast25", "who_and_when"]
    assert len(reg[reg["dataset"] == "who_and_when"]) == 8 and (reg["origin"] == "upstream").all()
    row = reg[reg["local_path"] == "conversation_trace.jsonl"].iloc[0]
    assert row["sha256_local"] == _sha((FIX / "mooncake_fast25" / "conversation_trace.jsonl").read_bytes())
    out = ds.write_registry(reg, tmp_path / "registry.tsv")
    assert ds.registry(out).astype(str).equals(reg.astype(str))
    # a file that no longer matches its manifest row is named
    victim = root / "who_and_when" / "Hand-Crafted" / "33.json"
    victim.write_text(victim.read_text() + " ")
    with pytest.raises(ds.DatasetError, match=r"Hand-Crafted/33\.json: sha256_local in the manifest does not match"):
        ds.build_registry(root)


def test_tau2_rows_pin_grok_files_by_their_provenance_blob_ids(tmp_path):
    d = shutil.copytree(FIX / "tau2-xai-grok-blakeelias", tmp_path / "tau2-xai-grok-blakeelias",
                        ignore=shutil.ignore_patterns("NOTICE.md"))
    lines = [f"| {p.name[:-len('.json.gz')]} | {ds.git_blob_sha1(gzip.decompress(p.read_bytes()))} |"
             for p in sorted(d.glob("*.json.gz"))]
    (d / "PROVENANCE.md").write_text("\n".join(lines) + "\n")
    (d / "LICENSE.upstream-MIT.txt").write_text("MIT License\n")
    reg = ds.build_registry(tmp_path).set_index("local_path")
    data = reg[reg.index.str.endswith(".json.gz")]
    assert len(data) == 3 and (data["origin"] == "upstream").all() and (data["gzipped_here"] == "yes").all()
    assert data["raw_url"].str.contains("/blakeelias/tau2-bench/cf95bf5acba69b67e31b79fc7a7255307cb446bc/"
                                        "data/simulations/").all()
    assert reg.loc["LICENSE.upstream-MIT.txt", "raw_url"].endswith("/LICENSE")
    (d / "PROVENANCE.md").write_text("\n".join(x[:-4] + "0" * 3 + x[-1:] for x in lines))  # a wrong blob id
    with pytest.raises(ds.DatasetError, match=r"git blob id does not match PROVENANCE\.md"):
        ds.build_registry(tmp_path)


def test_verify_and_fetch_use_the_override_in_place(mirror):
    for name in ("azure_llm_2023", "mooncake_fast25", "who_and_when"):
        states = ds.verify(name, local=mirror)
        assert states and all(s.state == "ok" for s in states)
    assert ds.fetch("who_and_when", local=mirror) == mirror / "who_and_when"


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupted_copy_is_detected_naming_the_file(mirror, damage):
    victim = mirror / "who_and_when" / "Algorithm-Generated" / "93.json"
    data = bytearray(victim.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    bad = [s for s in ds.verify("who_and_when", local=mirror) if s.state != "ok"]
    assert [(s.local_path, s.state) for s in bad] == [("Algorithm-Generated/93.json", "corrupt")]
    assert "93.json" in bad[0].detail
    with pytest.raises(ds.DatasetError, match=r"93\.json"):
        ds.fetch("who_and_when", local=mirror)


def test_uncompressed_upstream_form_is_accepted(tmp_path, monkeypatch):
    # a cache holds upstream bytes (not gzip): member() finds them, sha256_original verifies them
    root = _mirror(tmp_path / "m", ("chatdev_warehouse",))
    reg = ds.build_registry(root)
    monkeypatch.setattr(ds, "registry", lambda path=ds.REGISTRY_PATH: reg)
    for gz in (root / "chatdev_warehouse").rglob("*.log.gz"):
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    assert all(s.state == "ok" for s in ds.verify("chatdev_warehouse", local=root))


def test_missing_file_is_reported(mirror):
    (mirror / "who_and_when" / "Hand-Crafted" / "57.json").unlink()
    states = ds.verify("who_and_when", local=mirror)
    assert [(s.local_path, s.state) for s in states if s.state != "ok"] == [("Hand-Crafted/57.json", "missing")]


def test_copy_into_is_atomic_and_leaves_nothing_half_written(mirror, tmp_path):
    csv_path = mirror / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
    good = csv_path.read_bytes()
    csv_path.write_bytes(good[:-100])  # truncated
    dest = tmp_path / "cache"
    with pytest.raises(ds.DatasetError, match="AzureLLMInferenceTrace_conv.csv"):
        ds.copy_into("azure_llm_2023", mirror, dest)
    leftovers = [p.name for p in dest.rglob("*") if p.is_file()]
    assert "AzureLLMInferenceTrace_conv.csv" not in leftovers and not [n for n in leftovers if n.endswith(".tmp")]
    csv_path.write_bytes(good)  # an intact copy lands and verifies
    assert ds.copy_into("azure_llm_2023", mirror, dest).is_dir()
    assert all(s.state == "ok" for s in ds.verify("azure_llm_2023", local=dest))


def test_cache_dir_override_env_and_missing_sources(mirror, monkeypatch, tmp_path):
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "c"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    assert ds.cache_dir() == tmp_path / "c" and ds.local_root() is None
    # nothing cached: verify says missing and every source is missing, never touching the network
    assert {s.state for s in ds.verify("azure_llm_2023")} == {"missing"}
    assert ds.missing_sources() == ["azure_llm_2023", "mooncake_fast25", "who_and_when"]
    # the override holds them (argument or LACHESIS_DATA); a copy in the cache counts as well
    assert ds.missing_sources(local=mirror) == []
    monkeypatch.setenv("LACHESIS_DATA", str(mirror))
    assert ds.local_root() == mirror and ds.missing_sources(["azure_llm_2023"]) == []
    monkeypatch.delenv("LACHESIS_DATA")
    ds.copy_into("mooncake_fast25", mirror, tmp_path / "c")
    assert ds.missing_sources() == ["azure_llm_2023", "who_and_when"]
    assert ds.locate("mooncake_fast25") == tmp_path / "c" / "mooncake_fast25"
    with pytest.raises(ds.DatasetError, match="unknown dataset 'nope'"):
        ds.missing_sources(["nope"])


def test_missing_sources_and_fetch_hints_of_the_committed_registry(monkeypatch, tmp_path):
    # offline, nothing cached, no override: every registered source is missing; each has a way to get it
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    assert ds.missing_sources() == ALL
    assert ds.fetch_hint("azure_llm_2023") == "lachesis datasets fetch azure_llm_2023"
    assert ds.fetch_hint("tau2-xai-grok-blakeelias") == "lachesis datasets fetch tau2-xai-grok-blakeelias"
    assert "no public byte-identical origin" in ds.fetch_hint("tau2-qwen3.5-justinchiu")


def test_local_only_file_cannot_be_fetched_without_override(monkeypatch, tmp_path):
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    with pytest.raises(ds.DatasetError, match="no public byte-identical origin"):
        ds.fetch("tau2-qwen3.5-justinchiu")


def test_cli_list_and_verify(mirror, tmp_path, capsys):
    assert main(["datasets", "list", "azure_llm_2023", "who_and_when", "--local", str(mirror)]) == 0
    out = capsys.readouterr().out
    assert "azure_llm_2023" in out and "verified" in out and "CC-BY-4.0" in out
    (mirror / "mooncake_fast25" / "conversation_trace.jsonl").write_bytes(b"{}\n")
    assert main(["datasets", "verify", "mooncake_fast25", "--local", str(mirror)]) == 1
    assert "conversation_trace.jsonl" in capsys.readouterr().out
    with pytest.raises(ds.DatasetError, match="unknown dataset"):
        ds.verify("no_such_dataset", local=mirror)


@pytest.fixture
def local_http(tmp_path):
    """A loopback HTTP server over a temporary folder (stands in for the public origin; no network)."""
    import functools
    import http.server
    import threading

    root = tmp_path / "origin"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield root, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _serve(monkeypatch, mirror: Path, origin: Path, url: str, name: str):
    """Point the registry at the loopback server and put the upstream bytes of ``name`` at its origin."""
    reg = ds.build_registry(mirror)
    reg = reg[reg["dataset"] == name].copy()
    reg["raw_url"] = url + "/" + reg["local_path"].str.replace(".gz", "", regex=False)
    monkeypatch.setattr(ds, "registry", lambda path=ds.REGISTRY_PATH: reg)
    for p in reg["local_path"]:
        (origin / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(mirror / name / p, origin / p)
    return reg


def test_fetch_downloads_verifies_and_caches(mirror, monkeypatch, tmp_path, local_http):
    origin, url = local_http
    _serve(monkeypatch, mirror, origin, url, "azure_llm_2023")
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    d = ds.fetch("azure_llm_2023")
    assert d == tmp_path / "cache" / "azure_llm_2023" and ds.missing_sources() == []
    (origin / "AzureLLMInferenceTrace_conv.csv").unlink()  # a second fetch uses the verified cache
    assert ds.fetch("azure_llm_2023") == d


def test_fetch_rejects_a_corrupted_download_and_keeps_nothing(mirror, monkeypatch, tmp_path, local_http):
    origin, url = local_http
    _serve(monkeypatch, mirror, origin, url, "azure_llm_2023")
    csv_path = origin / "AzureLLMInferenceTrace_conv.csv"
    csv_path.write_bytes(csv_path.read_bytes()[:-1000])  # truncated at the origin
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    with pytest.raises(ds.DatasetError, match="AzureLLMInferenceTrace_conv.csv"):
        ds.fetch("azure_llm_2023")
    cache = tmp_path / "cache" / "azure_llm_2023"
    assert not [p.name for p in cache.rglob("*") if p.is_file()]  # no temporary left behind either


def test_fetch_without_network_names_the_file(mirror, monkeypatch, tmp_path, local_http):
    origin, url = local_http
    _serve(monkeypatch, mirror, origin, url, "azure_llm_2023")
    (origin / "AzureLLMInferenceTrace_conv.csv").unlink()  # 404 at the origin
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    with pytest.raises(ds.DatasetError,
                       match=r"azure_llm_2023/AzureLLMInferenceTrace_conv\.csv: download from .* failed"):
        ds.fetch("azure_llm_2023")


# -- fetching every source: each one that could not be fetched named ----------------------------------


def test_datasets_fetch_tries_every_source_and_names_each_it_could_not_fetch(tmp_path, capsys, monkeypatch) -> None:
    """With no names, a local-only source (and a failed download) does not stop the others: each is named on
    stderr and the command exits 1 after trying them all."""
    from lachesis.traces import datasets as ds

    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    real, tried = ds.fetch, []
    every = ds.names()
    local_only = [n for n in every if ds.fetch_hint(n) != f"lachesis datasets fetch {n}"]
    public = [n for n in every if n not in local_only]
    assert local_only and len(public) >= 2 and min(map(every.index, local_only)) < max(map(every.index, public))
    offline = public[0]

    def fetch(name, local=None, progress=False):
        tried.append(name)
        if name in local_only:
            return real(name, local)  # refused before any download: no public origin
        if name == offline:
            raise ds.DatasetError(f"{name}/x.json: download from https://example.org/x.json failed: no network")
        return tmp_path / "cache" / name

    monkeypatch.setattr(ds, "fetch", fetch)
    assert main(["datasets", "fetch"]) == 1
    assert tried == every  # every source tried, in order
    out, err = capsys.readouterr()
    assert [ln.split(":")[0] for ln in out.splitlines()] == [n for n in public if n != offline]
    lines = err.strip().splitlines()
    assert len(lines) == len(local_only) + 2, lines
    for n in (*local_only, offline):
        assert any(ln.startswith(f"lachesis datasets: {n}: could not fetch: ") for ln in lines), n
    assert lines[-1] == (f"lachesis datasets: {len(local_only) + 1} of {len(every)} source(s) not fetched: "
                         f"{', '.join(n for n in every if n in local_only or n == offline)}")
    assert main(["datasets", "fetch", *public[1:]]) == 0
