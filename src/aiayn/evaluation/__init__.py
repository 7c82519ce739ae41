"""Evaluation (section 6): sacrebleu BLEU/chrF and perplexity."""

from aiayn.evaluation.metrics import Score, corpus_bleu, corpus_chrf, perplexity

__all__ = ["Score", "corpus_bleu", "corpus_chrf", "perplexity"]
