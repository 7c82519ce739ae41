"""Visualization: attention maps, positional encodings, architecture, curves and results, drawn from real models."""
