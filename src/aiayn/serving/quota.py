"""Optional API keys with per-key quotas over a sliding window: 403 for a missing or unknown key, 429 with
`Retry-After` (the seconds until the oldest counted use leaves the window) for a key over its quota."""

from __future__ import annotations

import math
import threading
import time
from collections import deque

from aiayn.serving.errors import ApiError
from aiayn.serving.settings import ApiKey


class Quotas:
    def __init__(self, keys: dict[str, ApiKey], window_s: float) -> None:
        self.keys, self.window_s = keys, window_s
        self._uses: dict[str, deque[tuple[float, int]]] = {key: deque() for key in keys}
        self._lock = threading.Lock()

    @property
    def required(self) -> bool:
        return bool(self.keys)

    def charge(self, key: str | None, characters: int, now: float | None = None) -> None:
        """Count one request of `characters` against `key`, or raise the ApiError that refuses it."""
        if not self.keys:
            return
        if not key:
            raise ApiError(403, "Invalid API key: this server needs an api_key", limit="api_key")
        quota = self.keys.get(key)
        if quota is None:
            raise ApiError(403, "Invalid API key", limit="api_key")
        now = time.monotonic() if now is None else now
        with self._lock:
            uses = self._uses[key]
            while uses and uses[0][0] <= now - self.window_s:
                uses.popleft()
            used = sum(n for _, n in uses)
            over = None
            if quota.requests and len(uses) + 1 > quota.requests:
                over = f"{quota.requests} requests per {self.window_s:g} s"
            elif quota.characters and used + characters > quota.characters:
                over = f"{quota.characters} characters per {self.window_s:g} s"
            if over is not None:
                retry = max(1, math.ceil(uses[0][0] + self.window_s - now)) if uses else math.ceil(self.window_s)
                raise ApiError(
                    429, f"Slowdown: the API key's quota of {over} is used up", limit="quota",
                    headers={"Retry-After": str(retry)},
                )  # fmt: skip
            uses.append((now, characters))


__all__ = ["Quotas"]
