"""Validation during training: loss and perplexity on the validation split, and BLEU of translations of its
first sentences (section 6.1 used newstest2013 as the development set to choose models)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn

from aiayn.config import DecodeConfig
from aiayn.data import ParallelDataset, TokenBudgetBatches, Tokenizer, load_batch
from aiayn.decoding import Translator
from aiayn.evaluation import Score, corpus_bleu, perplexity
from aiayn.io import read_text_file
from aiayn.training.distributed import DistContext, all_reduce_sum
from aiayn.training.loss import label_smoothed_nll_loss


@torch.no_grad()
def validation_loss(
    model: nn.Module,
    dataset: ParallelDataset,
    max_tokens: int,
    eps_ls: float,
    pad_id: int,
    ctx: DistContext,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> dict[str, float]:
    """Label-smoothed loss, NLL and perplexity per target token over the whole split (ranks split the batches)."""
    was_training = model.training
    model.eval()
    batches = TokenBudgetBatches(dataset.src_lengths, dataset.tgt_lengths, max_tokens, shuffle=False).epoch(0)
    loss_sum = nll_sum = tokens = 0.0
    for indices in batches[ctx.rank :: ctx.world_size]:
        batch = load_batch(dataset, indices).to(ctx.device)
        with autocast():
            logits = model(batch.src, batch.tgt_in)
        loss, nll = label_smoothed_nll_loss(logits, batch.tgt_out, eps_ls, pad_id)
        loss_sum, nll_sum, tokens = loss_sum + loss.item(), nll_sum + nll.item(), tokens + batch.tgt_tokens
    model.train(was_training)
    loss_sum, nll_sum, tokens = all_reduce_sum([loss_sum, nll_sum, tokens], ctx)
    nll_loss = nll_sum / max(tokens, 1)
    return {"loss": loss_sum / max(tokens, 1), "nll_loss": nll_loss, "ppl": perplexity(nll_loss), "tokens": tokens}


def validation_bleu(
    model: nn.Module,
    dataset: ParallelDataset,
    decode: DecodeConfig,
    max_sentences: int,
    warn: Callable[[str], None],
) -> Score | None:
    """sacrebleu BLEU of the first `max_sentences` validation sentences against the raw references.

    Uses `aiayn.decoding.Translator`; returns None (after a warning) when the raw text is missing.
    """
    src_path, ref_path = dataset.text_path(dataset.src_lang), dataset.text_path(dataset.tgt_lang)
    if src_path is None or ref_path is None:
        warn(f"validation BLEU skipped: no raw text for split {dataset.split!r} in {dataset.data_dir}")
        return None
    # split at "\n" only, as `prepare` wrote them: str.splitlines would also split at U+2028, NEL, form feeds
    sources, references = read_text_file(src_path, max_sentences), read_text_file(ref_path, max_sentences)
    if len(sources) != len(references):
        raise ValueError(f"{src_path} and {ref_path} differ in line count; the validation split is corrupt")
    was_training = model.training
    model.eval()
    try:
        device = str(next(model.parameters()).device)  # decode where the model trains
        translator = Translator(model, Tokenizer.from_file(dataset.tokenizer_path), decode, device=device)
        hypotheses = translator.translate(sources)
    finally:
        model.train(was_training)
    return corpus_bleu(hypotheses, references)


__all__ = ["validation_bleu", "validation_loss"]
