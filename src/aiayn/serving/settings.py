"""The server's limits and batching settings: one frozen dataclass, one field per `aiayn serve` flag.

Every limit answers with a 4xx naming it (`aiayn.serving.errors`); the defaults keep one request well under a
second of model time for a Multi30k-sized model on 2 CPU cores.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ApiKey:
    """Quotas of one API key over a sliding `window_s` seconds; 0 means unlimited."""

    requests: int = 0  # requests per window
    characters: int = 0  # characters of text per window


@dataclass(frozen=True)
class ServeConfig:
    # --- limits (4xx naming the limit) ---
    max_chars: int = 5000  # characters of one text (LibreTranslate's char_limit)
    max_texts: int = 64  # texts in one request (`q` list / `texts`)
    max_tokens_per_request: int = 8192  # subword tokens of all source sentences of one request
    max_beam: int = 8
    max_nbest: int = 4  # also caps LibreTranslate's `alternatives` + 1
    max_attention_sentences: int = 8  # sentences of one request with `return_attention` (the maps are large)
    max_body_bytes: int = 1 << 20  # request body; larger ones get 413 before they are read in full
    request_timeout_s: float = 30.0  # waiting plus model time of one request; then 504, the others go on
    # --- dynamic batching ---
    batch_tokens: int = 2048  # token budget of one model batch (padded source positions, as DecodeConfig.max_tokens)
    batch_wait_ms: float = 5.0  # an idle worker waits this long for more work before starting a batch
    queue_sentences: int = 2048  # sentences waiting for the model; beyond this, 503 + Retry-After
    batching: bool = True  # False: one request at a time, its sentences one by one (the baseline)
    # --- API keys ---
    api_keys: dict[str, ApiKey] = field(default_factory=dict)  # empty: no key needed
    quota_window_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_texts", "max_tokens_per_request", "max_beam", "max_nbest", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"serve.{name} must be >= 1, got {getattr(self, name)}")
        if self.request_timeout_s <= 0 or self.batch_wait_ms < 0 or self.batch_tokens < 1 or self.queue_sentences < 1:
            raise ValueError("serve: need request_timeout_s > 0, batch_wait_ms >= 0, batch_tokens, queue_sentences > 0")


__all__ = ["ApiKey", "ServeConfig"]
