"""Decoding (section 6.1): greedy, beam and sampling searches over the model's step protocol; the translator.

generate(model, src, DecodeConfig(beam=4, lenpen=0.6))  -> per sentence its n-best Hypothesis list
Translator.from_pretrained(model_dir).translate(["A dog runs."])
"""

from aiayn.decoding.beam import beam_search
from aiayn.decoding.greedy import greedy_search
from aiayn.decoding.hypothesis import Hypothesis
from aiayn.decoding.length_penalty import best_future_score, length_penalty, normalised_score
from aiayn.decoding.sampling import filter_logits, sampling_search
from aiayn.decoding.search import generate
from aiayn.decoding.translator import LongInputError, Translation, Translator

__all__ = [
    "Hypothesis",
    "LongInputError",
    "Translation",
    "Translator",
    "beam_search",
    "best_future_score",
    "filter_logits",
    "generate",
    "greedy_search",
    "length_penalty",
    "normalised_score",
    "sampling_search",
]
