"""Registry, checksum verification, offline override and atomic copies (no network)."""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
from pathlib import Path

import pytest

from lachesis import datasets as ds

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LACHESIS_DATA") or REPO.parent / "shared" / "data" / "traces")
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared traces not found at {SHARED}")

ALL = ["azure_llm_2023", "chatdev_warehouse", "claude_code_more", "claude_code_subagents", "mooncake_fast25",
       "tau2-qwen3.5-justinchiu", "tau2-xai-grok-blakeelias", "who_and_when"]


def test_registry_lists_every_source_with_pinned_urls():
    reg = ds.registry()
    assert sorted(reg["dataset"].unique()) == ALL
    up = reg[reg["origin"] == "upstream"]
    # every downloadable file has a commit-pinned raw URL (40 hex digits in the path) and a sha256
    assert up["raw_url"].str.match(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/").all()
    assert up["sha256_original"].str.fullmatch(r"[0-9a-f]{64}").all()
    # the only files without an upstream pin: the transcribed Qwen sample and the tau2 licence copies
    local_only = set(reg.loc[reg["origin"] == "local-only", "local_path"])
    assert local_only == {"qwen3.5-27B-temp06-gpt41user_airline_test.first3sessions.json.gz",
                          "LICENSE.fork-snapshot-MIT.txt", "LICENSE.upstream-MIT.txt"}
    # hand-read from azure_llm_2023/MANIFEST.tsv
    row = reg[(reg["dataset"] == "azure_llm_2023") & (reg["local_path"] == "AzureLLMInferenceTrace_conv.csv")].iloc[0]
    assert row["sha256_original"] == "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8"
    assert row["bytes_original"] == 719188
    assert row["raw_url"].endswith("/b469a113cedca53ddc3bdea71a143dc4b7d8700c/data/AzureLLMInferenceTrace_conv.csv")


def test_tau2_grok_pins_match_provenance_blob_ids():
    # grok files: git blob ids listed in tau2-xai-grok-blakeelias/PROVENANCE.md; the registry builder
    # checks them (git hash-object of the decompressed bytes) and pins the upstream sha256
    reg = ds.registry()
    grok = reg[(reg["dataset"] == "tau2-xai-grok-blakeelias") & (reg["origin"] == "upstream")]
    assert len(grok) == 5 and (grok["gzipped_here"] == "yes").all()
    assert grok["raw_url"].str.contains("/blakeelias/tau2-bench/cf95bf5acba69b67e31b79fc7a7255307cb446bc/").all()
    assert grok["raw_url"].str.contains("%3A").all()  # ':' in file names is URL-encoded
    one = SHARED / "tau2-xai-grok-blakeelias" / grok.iloc[0]["local_path"]
    assert ds.git_blob_sha1(gzip.decompress(one.read_bytes())) in (SHARED / "tau2-xai-grok-blakeelias"
                                                                     / "PROVENANCE.md").read_text()


def test_committed_registry_equals_a_rebuild_from_the_shared_copy():
    rebuilt = ds.build_registry(SHARED)
    committed = ds.registry()
    assert rebuilt.astype(str).equals(committed.astype(str))


def test_verify_passes_on_the_shared_copy():
    for name in ALL:
        states = ds.verify(name, local=SHARED)
        assert states and all(s.state == "ok" for s in states), [s for s in states if s.state != "ok"][:2]
    assert ds.fetch("tau2-qwen3.5-justinchiu", local=SHARED) == SHARED / "tau2-qwen3.5-justinchiu"


def _copy_dataset(name: str, dest: Path) -> Path:
    shutil.copytree(SHARED / name, dest / name)
    for p in (dest / name).rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return dest / name


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupted_copy_is_detected_naming_the_file(tmp_path, damage):
    d = _copy_dataset("tau2-xai-grok-blakeelias", tmp_path)
    victim = sorted(d.glob("*.json.gz"))[1]
    data = bytearray(victim.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    states = ds.verify("tau2-xai-grok-blakeelias", local=tmp_path)
    bad = [s for s in states if s.state != "ok"]
    assert [s.local_path for s in bad] == [victim.name]
    assert victim.name in bad[0].detail
    with pytest.raises(ds.DatasetError, match=victim.name.replace(".", r"\.")):
        ds.fetch("tau2-xai-grok-blakeelias", local=tmp_path)


def test_uncompressed_upstream_form_is_accepted(tmp_path):
    # a cache holds upstream bytes (not gzip): member() finds them, sha256_original verifies them
    d = _copy_dataset("tau2-qwen3.5-justinchiu", tmp_path)
    gz = d / "qwen3.5-27B-temp06-gpt41user_airline_test.first3sessions.json.gz"
    gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
    gz.unlink()
    assert all(s.state == "ok" for s in ds.verify("tau2-qwen3.5-justinchiu", local=tmp_path))


def test_missing_file_is_reported(tmp_path):
    d = _copy_dataset("azure_llm_2023", tmp_path)
    (d / "LICENSE-CC-BY-4.0").unlink()
    states = ds.verify("azure_llm_2023", local=tmp_path)
    assert [(s.local_path, s.state) for s in states if s.state != "ok"] == [("LICENSE-CC-BY-4.0", "missing")]


def test_copy_into_is_atomic_and_leaves_nothing_half_written(tmp_path):
    src = tmp_path / "src"
    d = _copy_dataset("azure_llm_2023", src)
    csv = d / "AzureLLMInferenceTrace_conv.csv"
    csv.write_bytes(csv.read_bytes()[:-100])  # truncated
    dest = tmp_path / "cache"
    with pytest.raises(ds.DatasetError, match="AzureLLMInferenceTrace_conv.csv"):
        ds.copy_into("azure_llm_2023", src, dest)
    leftovers = [p.name for p in dest.rglob("*") if p.is_file()]
    assert "AzureLLMInferenceTrace_conv.csv" not in leftovers
    assert not [n for n in leftovers if n.endswith(".tmp")]
    # an intact copy lands and verifies
    ok = ds.copy_into("mooncake_fast25", SHARED, dest)
    assert all(s.state == "ok" for s in ds.verify("mooncake_fast25", local=dest)) and ok.is_dir()


def test_cache_dir_and_override_envs(monkeypatch, tmp_path):
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "c"))
    assert ds.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    assert ds.local_root() is None
    # nothing cached: verify says missing, never touches the network
    assert {s.state for s in ds.verify("azure_llm_2023")} == {"missing"}
    monkeypatch.setenv("LACHESIS_DATA", str(SHARED))
    assert ds.local_root() == SHARED
    assert all(s.state == "ok" for s in ds.verify("azure_llm_2023"))


def test_local_only_file_cannot_be_fetched_without_override(monkeypatch, tmp_path):
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    with pytest.raises(ds.DatasetError, match="no public byte-identical origin"):
        ds.fetch("tau2-qwen3.5-justinchiu")


def test_cli_list_and_verify(tmp_path, capsys):
    ns = argparse.Namespace(action="list", names=["azure_llm_2023", "who_and_when"], local=str(SHARED))
    assert ds.cli_datasets(ns) == 0
    out = capsys.readouterr().out
    assert "azure_llm_2023" in out and "verified" in out and "CC-BY-4.0" in out
    d = _copy_dataset("mooncake_fast25", tmp_path)
    (d / "conversation_trace.jsonl").write_bytes(b"{}\n")
    ns = argparse.Namespace(action="verify", names=["mooncake_fast25"], local=str(tmp_path))
    assert ds.cli_datasets(ns) == 1
    assert "conversation_trace.jsonl" in capsys.readouterr().out
    with pytest.raises(ds.DatasetError, match="unknown dataset"):
        ds.verify("no_such_dataset", local=SHARED)


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


def _point_registry_at(monkeypatch, base_url: str, name: str):
    reg = ds.registry()
    reg = reg[reg["dataset"] == name].copy()
    reg["raw_url"] = base_url + "/" + reg["local_path"].str.replace(".gz", "", regex=False)
    monkeypatch.setattr(ds, "registry", lambda path=ds.REGISTRY_PATH: reg)
    return reg


def _serve_from(monkeypatch, origin, url, name):
    """Point the registry at the loopback server and put the shared copy of ``name`` at its origin."""
    reg = _point_registry_at(monkeypatch, url, name)
    for p in reg["local_path"]:
        shutil.copyfile(SHARED / name / p, origin / p)
    return reg


def test_fetch_downloads_verifies_and_caches(monkeypatch, tmp_path, local_http):
    origin, url = local_http
    name = "azure_llm_2023"
    _serve_from(monkeypatch, origin, url, name)
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    d = ds.fetch(name)
    assert d == tmp_path / "cache" / name
    assert all(s.state == "ok" for s in ds.verify(name))
    (origin / "AzureLLMInferenceTrace_conv.csv").unlink()  # a second fetch uses the verified cache
    assert ds.fetch(name) == d


def test_fetch_rejects_a_corrupted_download_and_keeps_nothing(monkeypatch, tmp_path, local_http):
    origin, url = local_http
    name = "azure_llm_2023"
    _serve_from(monkeypatch, origin, url, name)
    csv = origin / "AzureLLMInferenceTrace_conv.csv"
    csv.write_bytes(csv.read_bytes()[:-1000])  # truncated at the origin
    monkeypatch.setenv("LACHESIS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LACHESIS_DATA", raising=False)
    with pytest.raises(ds.DatasetError, match="AzureLLMInferenceTrace_conv.csv"):
        ds.fetch(name)
    assert not (tmp_path / "cache" / name / "AzureLLMInferenceTrace_conv.csv").exists()
    cache = tmp_path / "cache" / name
    assert not [p.name for p in cache.rglob("*") if p.is_file()]  # no temporary left behind either
