"""Evaluation: sacrebleu BLEU/chrF and perplexity."""
