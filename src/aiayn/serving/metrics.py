"""Prometheus metrics of one server, in a registry of its own (two apps in one process do not collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("aiayn_requests", "HTTP requests", ["endpoint", "status"], registry=r)
        self.latency = Histogram(
            "aiayn_request_seconds",
            "request latency",
            ["endpoint"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.batch_sentences = Histogram(
            "aiayn_batch_sentences", "sentences per model batch", ["model"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=r,
        )  # fmt: skip
        self.batch_requests = Histogram(
            "aiayn_batch_requests", "requests merged into one model batch", ["model"],
            buckets=(1, 2, 4, 8, 16, 32, 64), registry=r,
        )  # fmt: skip
        self.batch_seconds = Histogram("aiayn_batch_seconds", "model time per batch", ["model"], registry=r)
        self.queue = Gauge("aiayn_queue_sentences", "sentences waiting for the model", ["model"], registry=r)
        self.sentences = Counter("aiayn_sentences", "sentences translated", ["model"], registry=r)
        self.source_tokens = Counter("aiayn_source_tokens", "source subword tokens translated", ["model"], registry=r)
        self.target_tokens = Counter("aiayn_target_tokens", "target subword tokens produced", ["model"], registry=r)
        self.tokens_per_second = Gauge(
            "aiayn_target_tokens_per_second", "target tokens per second of model time, last batch", ["model"],
            registry=r,
        )  # fmt: skip


__all__ = ["Metrics"]
