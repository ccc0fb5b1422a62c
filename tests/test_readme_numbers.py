"""The README's numbers are the figures': the ledger block is generated, and a marked sentence prints only numbers its
sources print, with the same scope (a fixture README, ledger and glance table)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from lachesis import readme_numbers as R
from lachesis.evaluation import claims as C

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "readme_numbers" / "README.md"
GLANCE = ("| statistic | ours | paper |\n|---|---|---|\n"
          "| HBM share of write bytes, Lachesis (Fig. 10) | 24.2–66.1% [24.1–66.4%] | 19–51% |\n"
          "| multi-agent Lachesis/HBM-first, tight, 1/7–4/4 (Fig. 9) | 1.46–2.77× [1.44–2.95×] | 1.5–2.95× |\n")


def _row(**kw) -> dict:
    base = dict(section="§5.3", quote="q", kind="range", scope="", unit="", seeds="", holds="", reason="", cause="",
                cells=8, cells_read=8, values_read=24, misses=0, absent=0, note="")
    return {**base, **kw}


def ledger() -> pd.DataFrame:
    both = "Llama-4-Maverick,Qwen3-235B-A22B"
    rows = [
        _row(id="multi.gain.tight", paper="1.5–2.95×", ours="1.46–2.77×", seeds="1.44–2.95×", verdict="close",
             reason="low end −3%, high end −6% of the paper's", scope_workloads="multi_agent", scope_models=both,
             scope_slos="tight", scope_memories="1/7,2/6,3/5,4/4", unit="×"),
        _row(id="multi.years.lachesis", paper="3.3–9.3 y", ours="3.96–9.64 y", seeds="3.9–9.68 y", verdict="close",
             scope_workloads="multi_agent", scope_models=both, scope_slos="tight,loose",
             scope_memories="1/7,2/6,3/5,4/4", unit="y", cells=16, cells_read=16),
        _row(id="single.bfcl_loss", paper="30–31%", ours="−41.2 to −34.9%", seeds="−41.2 to −29.6%", verdict="off",
             reason="low end −237%, high end −213% of the paper's", scope_workloads="bfcl", scope_models=both,
             scope_slos="tight", scope_memories="1/7,4/4", unit="%", cells=4, cells_read=2),
        _row(id="multi.write.hbm_share.lachesis", paper="19–51%", ours="24.2–66.1%", seeds="24.1–66.4%",
             verdict="off", scope_workloads="multi_agent", scope_models="Llama-4-Maverick", scope_slos="loose",
             scope_memories="1/7,2/6,3/5,4/4,8/8*", unit="%", cells=5, cells_read=5),
    ]
    return pd.DataFrame(rows, columns=list(C.COLUMNS))


def readme() -> str:
    return FIXTURE.read_text(encoding="utf-8")


def test_the_fixture_readme_agrees_with_its_ledger_and_glance_table() -> None:
    assert R.check(readme(), ledger(), GLANCE) == []
    assert R.ledger_block(readme()) == C.summary_markdown(ledger())


def test_a_number_no_source_prints_is_named() -> None:
    text = readme().replace("by 1.46–2.8×", "by 1.41–2.8×")
    assert R.check(text, ledger(), GLANCE) == [
        "README line 5: 1.41 is not among the numbers of claim multi.gain.tight, "
        "glance multi-agent Lachesis/HBM-first, tight, 1/7–4/4 (Fig. 9)"]


def test_a_sentence_narrower_than_its_claims_scope_is_named() -> None:
    text = readme().replace("Over both SLOs it reaches", "At the tight SLO it reaches")
    assert R.check(text, ledger(), GLANCE) == [
        "README line 6: the sentence's slo (tight) is not the scope of claim multi.years.lachesis (loose, tight)"]
    text = readme().replace("(Llama-4-Maverick, loose)", "(Qwen3-235B-A22B, loose)")
    assert R.check(text, ledger(), GLANCE) == [
        "README line 8: the sentence's model (Qwen3-235B-A22B) is not the scope of claim "
        "multi.write.hbm_share.lachesis (Llama-4-Maverick)"]


def test_an_unknown_source_an_empty_sentence_and_a_stale_block_are_named() -> None:
    text = readme().replace("claim multi.years.lachesis", "claim multi.years.lachesys")
    assert R.check(text, ledger(), GLANCE) == ["README line 6: no claim 'multi.years.lachesys' in the ledger"]
    text = readme().replace("glance HBM share", "glance HBM shares")
    assert "no glance row 'HBM shares of write bytes, Lachesis (Fig. 10)'" in R.check(text, ledger(), GLANCE)[0]
    text = readme().replace("Unmarked prose.", "Unmarked prose. <!-- numbers: tally -->")
    assert R.check(text, ledger(), GLANCE) == ["README line 3: the marked sentence holds no number ('Unmarked prose.')"]
    led = ledger()
    led.loc[0, "verdict"] = "reproduced"
    assert R.check(readme(), led, GLANCE)[0].startswith("the claim-ledger block differs from figures/claims.csv")
    assert R.check(R.with_ledger_block(readme(), led), led, GLANCE) == []


@pytest.mark.parametrize("text, found", [
    ("1.46–2.77× at 1/7–4/4 and 8/8* (§5.3, Fig. 9, Table 3)", [(1.46, 2), (2.77, 2)]),
    ("Llama-4-Maverick and Qwen3-235B-A22B on τ³-bench and BFCLv4 with HBM4, p99 TPOT", []),
    ("−41.2 to −34.9% of 1,191 sessions per GPU, `fig09_grid.csv`", [(41.2, 1), (34.9, 1), (1191.0, 0)]),
])
def test_numbers_skip_configurations_references_and_names(text, found) -> None:
    assert R.numbers(text) == found


def test_a_scope_is_read_per_dimension_with_configuration_ranges_expanded() -> None:
    assert R.scope("the multi-agent trace without the reviewer at the loose SLO, 2/6–4/4 and 8/8*") == {
        "slo": {"loose"}, "workload": {"multi_agent_no_reviewer"}, "memory": {"2/6", "3/5", "4/4", "8/8*"}}
    assert R.scope("single-agent Qwen3") == {"model": {"Qwen3-235B-A22B"}, "workload": {"tau3", "bfcl"}}


def test_the_readme_agrees_with_the_committed_figures() -> None:
    """The README's ledger block is the committed ledger's summary, and each marked sentence prints only numbers of
    the ledger row or glance line it names, with the same scope."""
    root = Path(__file__).resolve().parents[1]
    assert R.check_files(root / "README.md", root / "figures") == []


def test_sync_rewrites_both_generated_blocks_and_names_a_stale_sentence(tmp_path: Path) -> None:
    """``make numbers`` on a copy: the ledger block and the glance table come from the figures, and a marked
    sentence whose number the figures do not print is named."""
    import shutil

    from lachesis import glance

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "figures", tmp_path / "figures", ignore=shutil.ignore_patterns("notebooks", "*.p*"))
    (tmp_path / "docs").mkdir()
    page = (root / "docs" / "results.md").read_text(encoding="utf-8")
    (tmp_path / "docs" / "results.md").write_text(page.replace(glance.page_table(page), "| stale |\n"),
                                                  encoding="utf-8")
    text = (root / "README.md").read_text(encoding="utf-8")
    block = R.ledger_block(text)
    (tmp_path / "README.md").write_text(text.replace(block, "stale\n"), encoding="utf-8")
    assert R.sync(tmp_path) == []
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == text
    assert glance.page_table((tmp_path / "docs" / "results.md").read_text(encoding="utf-8")) == \
        glance.table(tmp_path / "figures")
    marked = next(ln for ln in text.splitlines() if "<!-- numbers: claim" in ln)
    number = re.search(r"\d+\.\d+", marked).group()
    (tmp_path / "README.md").write_text(text.replace(marked, marked.replace(number, "0.123", 1)), encoding="utf-8")
    assert any("0.123" in p for p in R.sync(tmp_path))
