"""Serving: an HTTP API over the translator."""
