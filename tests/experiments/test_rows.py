"""Table 3's rows as rules (aiayn.experiments.ablate): applied to the paper's base (vocabulary 37000, shared) they give
the paper's configurations and, where Table 3 prints one, its parameter count within 5%; on a small base they scale."""

from __future__ import annotations

import pytest

from aiayn.config import ConfigError, preset
from aiayn.experiments.ablate import BASE, TABLE3, parameters, select, table3_variants, vary_variants

PAPER_BASE = preset("base", src_vocab_size=37000, tgt_vocab_size=37000)
# What each row's change is at the paper's sizes (Table 3): the overrides the rules must produce.
EXPECTED = {
    "A-h1": {"h": 1, "d_k": 512, "d_v": 512}, "A-h4": {"h": 4, "d_k": 128, "d_v": 128},
    "A-h16": {"h": 16, "d_k": 32, "d_v": 32}, "A-h32": {"h": 32, "d_k": 16, "d_v": 16},
    "B-dk16": {"d_k": 16}, "B-dk32": {"d_k": 32}, "C-N2": {"N": 2}, "C-N4": {"N": 4}, "C-N8": {"N": 8},
    "C-dmodel256": {"d_model": 256, "d_k": 32, "d_v": 32}, "C-dmodel1024": {"d_model": 1024, "d_k": 128, "d_v": 128},
    "C-dff1024": {"d_ff": 1024}, "C-dff4096": {"d_ff": 4096}, "D-drop0.0": {"P_drop": 0.0},
    "D-drop0.2": {"P_drop": 0.2}, "D-ls0.0": {"eps_ls": 0.0}, "D-ls0.2": {"eps_ls": 0.2},
    "E-learned": {"positional": "learned"}, "big": {"d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3},
}  # fmt: skip


def _config(variant):
    sets = dict(s.removeprefix("model.").split("=") for s in variant.sets)
    return PAPER_BASE.with_overrides(**sets)


def test_rules_give_the_papers_configurations() -> None:
    variants, skipped = table3_variants(PAPER_BASE, select("all"))
    assert not skipped and [v.id for v in variants] == [entry[0] for entry in TABLE3]
    for variant in variants:
        config = _config(variant)
        assert {k: getattr(config, k) for k in EXPECTED[variant.id]} == EXPECTED[variant.id], variant.id
        changed = {k for k, v in config.to_dict().items() if PAPER_BASE.to_dict()[k] != v}
        assert changed == {k for k in EXPECTED[variant.id] if getattr(PAPER_BASE, k) != EXPECTED[variant.id][k]}


def test_parameter_counts_match_table3() -> None:
    """Within 5% for base, B, C and big. C-N2 (36M) is the exception: ours is 33.7M, 6.5% below, and so is every
    count by the same ~1.9M (the paper's vocabulary was "about 37000"); its difference to the base (65M - 36M) is
    matched within 5% instead."""
    base = parameters(PAPER_BASE)
    assert base == pytest.approx(65e6, rel=0.05)
    variants, _ = table3_variants(PAPER_BASE, select("B,C,big"))
    assert len(variants) == 10 and all(v.paper.params_m for v in variants)
    for variant in variants:
        count, paper = parameters(_config(variant)), variant.paper.params_m * 1e6
        if variant.id == "C-N2":
            assert count == pytest.approx(paper, rel=0.07)
            assert base - count == pytest.approx(BASE.paper.params_m * 1e6 - paper, rel=0.05)
        else:
            assert count == pytest.approx(paper, rel=0.05), variant.id


def test_scaling_to_a_small_base() -> None:
    tiny = preset("tiny", src_vocab_size=1000, tgt_vocab_size=1000)  # N=4, d_model=128, d_ff=512, h=4, P_drop=0.3
    variants, skipped = table3_variants(tiny, select("A,C,big"))
    values = {v.id: v.values for v in variants}
    assert values["A-h1"] == "h=1, d_k=128, d_v=128" and values["A-h32"] == "h=16, d_k=8, d_v=8"
    assert values["C-N2"] == "N=1" and values["C-N4"] == "N=3" and values["C-N8"] == "N=5"
    assert values["C-dmodel256"] == "d_model=64, d_k=16, d_v=16" and values["C-dff4096"] == "d_ff=1024"
    assert values["big"] == "d_model=256, d_ff=1024, h=8"  # P_drop is 0.3 already
    assert not skipped
    one_layer = preset("tiny", N=1, h=3, d_k=10, d_v=10, src_vocab_size=1000, tgt_vocab_size=1000)
    variants, skipped = table3_variants(one_layer, select("A,C-N2,C-N4,D-drop0.0"))
    assert skipped["C-N2"] == "equals the base" and skipped["C-N4"] == "equals the base"
    assert "not a multiple" in skipped["A-h32"] and {v.id for v in variants} >= {"A-h1", "A-h16", "D-drop0.0"}


def test_selection_and_vary_rows() -> None:
    assert select("base,D-ls0.0,E") == ["D-ls0.0", "E-learned"]
    rows = vary_variants(["train.lr_scale=0.5,2", "model.d_ff=256"])
    assert [r.id for r in rows] == ["vary-train.lr_scale=0.5", "vary-train.lr_scale=2", "vary-model.d_ff=256"]
    assert rows[0].sets == ("train.lr_scale=0.5",) and rows[0].paper is None
    with pytest.raises(ConfigError, match="unknown row 'F'"):
        select("A,F")
    for spec, match in (("train.lr_scal=1", "unknown config key"), ("lr=1", "unknown config key"),
                        ("train.seed=1,2", "set by the sweep"), ("data.vocab_size=1000", "shared data"),
                        ("train.lr_scale", "expected KEY=V1,V2")):  # fmt: skip
        with pytest.raises(ConfigError, match=match):
            vary_variants([spec])
