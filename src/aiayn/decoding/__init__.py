"""Decoding (section 6.1): greedy, beam and sampling searches over the model's step protocol; the translator."""
