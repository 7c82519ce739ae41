"""BPE-dropout (`data.bpe_dropout`) on a real Multi30k slice: each epoch's pieces spell the same text as the
plain segmentation, differ from it and from the other epochs, are a function of (seed, epoch) only, respect
data.max_len; a run with it killed after a checkpoint resumes to the same losses, update for update."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from aiayn.config import ConfigError, DataConfig, dump_run_config
from aiayn.data import BPEDropout, CorpusError, EpochPairs, ParallelDataset, Tokenizer
from aiayn.training.metrics_log import read_metrics
from tests.training.conftest import tiny_run
from tests.training.test_resume import kill_after_first_checkpoint, run_to_end, trace


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def sides(pairs) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return [pairs[i][0] for i in range(len(pairs))], [pairs[i][1] for i in range(len(pairs))]


def test_each_epoch_spells_the_same_text_in_other_pieces(m30k_bin: Path) -> None:
    data = ParallelDataset(m30k_bin, "train")
    tokenizer = Tokenizer.from_file(data.tokenizer_path)
    plain = sides(data)
    dropout = BPEDropout(data, 0.1, seed=1, max_len=256)
    one, two = sides(dropout.epoch(1)), sides(dropout.epoch(2))
    for side in range(2):
        text = [tokenizer.decode(p.tolist()) for p in plain[side]]
        for sampled in (one[side], two[side]):
            assert [tokenizer.decode(s.tolist()) for s in sampled] == text
        changed = sum(not np.array_equal(s, p) for s, p in zip(one[side], plain[side]))
        assert changed > len(data) // 3  # p = 0.1 per merge re-segments most sentences
        assert sum(len(s) for s in one[side]) > 1.1 * sum(len(p) for p in plain[side])  # skipped merges: more pieces
        assert not same(one[side], two[side])
    epoch = dropout.epoch(1)
    assert np.array_equal(epoch.tgt_lengths, [len(t) for t in one[1]])
    assert epoch.src_lengths.dtype == np.int64 and one[0][0].dtype == plain[0][0].dtype


def test_the_pieces_are_a_function_of_seed_and_epoch(m30k_bin: Path) -> None:
    data = ParallelDataset(m30k_bin, "train")
    first = BPEDropout(data, 0.1, seed=7, max_len=256)
    again = BPEDropout(data, 0.1, seed=7, max_len=256)
    a = sides(first.epoch(3))
    first.epoch(4)  # drawing other epochs in between changes nothing
    assert all(same(x, y) for x, y in zip(a, sides(again.epoch(3))))
    assert all(same(x, y) for x, y in zip(a, sides(first.epoch(3))))
    other = sides(BPEDropout(data, 0.1, seed=8, max_len=256).epoch(3))
    assert not same(a[1], other[1])


def test_a_sampled_sentence_longer_than_max_len_keeps_its_plain_pieces(m30k_bin: Path) -> None:
    data = ParallelDataset(m30k_bin, "train")
    plain = sides(data)
    free = sides(BPEDropout(data, 0.1, seed=1, max_len=10_000).epoch(1))
    capped = sides(BPEDropout(data, 0.1, seed=1, max_len=16).epoch(1))
    for side in range(2):
        kept = [len(f) <= 16 for f in free[side]]
        assert any(kept) and not all(kept)  # both cases occur on this slice
        for f, c, p, k in zip(free[side], capped[side], plain[side], kept):
            assert np.array_equal(c, f if k else p)


def test_each_side_has_its_own_probability(m30k_bin: Path) -> None:
    data = ParallelDataset(m30k_bin, "train")
    plain = sides(data)
    source_only = sides(BPEDropout(data, 0.1, seed=1, max_len=256, p_target=0.0).epoch(1))
    assert same(source_only[1], plain[1]) and not same(source_only[0], plain[0])
    both = sides(BPEDropout(data, 0.1, seed=1, max_len=256).epoch(1))
    assert same(both[0], source_only[0]) and not same(both[1], plain[1])  # a side's draw ignores the other's p
    with pytest.raises(ValueError, match="one of them above 0"):
        BPEDropout(data, 0.0, seed=1, max_len=256, p_target=0.0)


def test_the_option_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"data\.bpe_dropout"):
        DataConfig(bpe_dropout=1.0)
    with pytest.raises(ConfigError, match=r"data\.bpe_dropout"):
        DataConfig(bpe_dropout=-0.1)
    with pytest.raises(ConfigError, match=r"data\.bpe_dropout_target"):
        DataConfig(bpe_dropout=0.1, bpe_dropout_target=1.5)
    assert DataConfig().bpe_dropout == 0.0 and DataConfig().bpe_dropout_target is None


def test_a_kept_epoch_is_read_back_and_old_ones_are_removed(m30k_bin: Path, tmp_path: Path) -> None:
    data = ParallelDataset(m30k_bin, "train")
    keep = tmp_path / "bpe-dropout"
    first = BPEDropout(data, 0.1, seed=1, max_len=256, keep_dir=keep)
    drawn = sides(first.epoch(1))
    unrelated = keep / "notes.txt"
    unrelated.write_text("mine")
    # another process drawing with the same seed gets other pieces (sentencepiece), so it must read the kept file
    script = (
        "import sys, numpy as np; from aiayn.data import BPEDropout, ParallelDataset; "
        "e = BPEDropout(ParallelDataset(sys.argv[1], 'train'), 0.1, 1, 256, keep_dir=sys.argv[2]).epoch(1); "
        "np.save(sys.argv[3], np.concatenate([e[i][1] for i in range(len(e))]))"
    )
    subprocess.run([sys.executable, "-c", script, str(m30k_bin), str(keep), str(tmp_path / "t.npy")], check=True)
    assert np.array_equal(np.load(tmp_path / "t.npy"), np.concatenate(drawn[1]))
    first.epoch(2)
    third = sides(first.epoch(3))
    assert sorted(p.name for p in keep.iterdir()) == ["epoch-000002.npz", "epoch-000003.npz", "notes.txt"]
    assert unrelated.read_text() == "mine"
    other = BPEDropout(data, 0.2, seed=1, max_len=256, keep_dir=keep)  # other settings: drawn anew and replaced
    assert not same(sides(other.epoch(3))[1], third[1])
    assert np.load(keep / "epoch-000003.npz")["settings"].tolist()[0] == 0.2


def test_a_damaged_kept_epoch_is_refused_in_one_line(m30k_bin: Path, tmp_path: Path) -> None:
    data = ParallelDataset(m30k_bin, "train")
    keep = tmp_path / "bpe-dropout"
    BPEDropout(data, 0.1, seed=1, max_len=256, keep_dir=keep).epoch(1)
    path = keep / "epoch-000001.npz"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CorpusError, match=r"epoch-000001\.npz: not a saved BPE-dropout epoch .*delete it"):
        BPEDropout(data, 0.1, seed=1, max_len=256, keep_dir=keep).epoch(1)
    src, tgt = sides(data)
    tgt[5] = np.array([data.vocab_size], dtype=tgt[5].dtype)  # an id past the embedding
    path.write_bytes(EpochPairs.from_lists(1, src, tgt).to_bytes((0.1, 0.1, 1.0, 256.0)))
    with pytest.raises(CorpusError, match=r"epoch-000001\.npz: tgt ids outside the vocabulary"):
        BPEDropout(data, 0.1, seed=1, max_len=256, keep_dir=keep).epoch(1)


UPDATES, SAVE_EVERY = 120, 40  # an epoch of the slice is ~60-70 updates under BPE-dropout: the runs cross one


def test_sigkill_and_resume_gives_identical_losses_under_bpe_dropout(m30k_bin: Path, tmp_path: Path) -> None:
    """Both runs find the same kept epochs (drawn here first): the killed one, resumed, trains on the pieces it
    had and ends bit for bit where the uninterrupted one does; a run that drew anew would differ at update 1."""
    run = tiny_run(m30k_bin, tmp_path / "unused", max_updates=UPDATES, save_every=SAVE_EVERY, valid_every=10)
    run = dataclasses.replace(run, data=dataclasses.replace(run.data, bpe_dropout=0.1))
    config = tmp_path / "tiny.yaml"
    config.write_text(dump_run_config(run), encoding="utf-8")
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    data = ParallelDataset(m30k_bin, "train")
    drawn = BPEDropout(data, 0.1, run.train.seed, run.data.max_len, keep_dir=reference / "bpe-dropout", keep=10)
    for epoch in range(1, 5):
        drawn.epoch(epoch)
    shutil.copytree(reference / "bpe-dropout", killed / "bpe-dropout")
    kept = {p.name: p.read_bytes() for p in (reference / "bpe-dropout").iterdir()}

    assert "bpe-dropout p=0.1 (source), 0.1 (target)" in run_to_end(config, reference)
    epochs = {r["epoch"] for r in read_metrics(reference) if r["kind"] == "train"}
    assert 2 <= len(epochs) <= 4

    kill_after_first_checkpoint(config, killed, SAVE_EVERY)
    log = run_to_end(config, killed)
    assert "resumed from" in log
    assert trace(killed) == trace(reference)
    final = f"checkpoint-{UPDATES:07d}/model.safetensors"
    a, b = load_file(killed / final), load_file(reference / final)
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert {p.name: p.read_bytes() for p in (killed / "bpe-dropout").iterdir()} == kept
