"""Dynamic batching: one worker thread per model merges concurrent requests into model batches.

Requests put `Job`s (their segments, the decode settings, a future) into a bounded queue and await the future,
so the event loop never runs the model. The worker takes the oldest job and, when it was idle, waits up to
`batch_wait_ms` for more; it then merges the waiting jobs with the same decode settings, oldest first, up to
`batch_tokens` source tokens, and hands them to `Translator.translate_detailed`, which sorts the sentences by
length and cuts them into batches of that token budget. Results are routed back to each job in its order.
A job whose request timed out before the worker reached it is skipped. With `batching=False` the worker runs
one job at a time and its sentences one by one (what LibreTranslate does: the baseline of the load test).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field

from aiayn.decoding import Translation, Translator
from aiayn.serving.attention import attention_maps
from aiayn.serving.metrics import Metrics
from aiayn.serving.settings import ServeConfig

log = logging.getLogger("aiayn.serving")


class QueueFull(RuntimeError):
    """The model's queue holds `queue_sentences` sentences; retry after about `retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("the server is busy: its translation queue is full")
        self.retry_after = retry_after


@dataclass
class Result:
    translations: list[Translation]
    attention: list[dict | None]


@dataclass
class Job:
    segments: list[str]
    tokens: list[int]  # subword tokens of each segment
    settings: tuple[tuple[str, object], ...]  # DecodeConfig overrides, sorted (jobs merge only when equal)
    attention: bool = False
    future: Future = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)

    @property
    def size(self) -> int:
        return sum(n + 1 for n in self.tokens)  # EOS included, as the model's token budget counts


class Batcher:
    def __init__(self, name: str, translator: Translator, config: ServeConfig, metrics: Metrics) -> None:
        self.name, self.translator, self.config, self.metrics = name, translator, config, metrics
        self._pending: deque[Job] = deque()
        self._waiting = 0  # sentences in _pending
        self._condition = threading.Condition()
        self._stopped = False
        self._seconds_per_sentence = 0.05  # running estimate, for Retry-After
        self._thread = threading.Thread(target=self._loop, name=f"aiayn-model-{name}", daemon=True)
        self._thread.start()

    # --- called from the event loop ----------------------------------------------------------------------------

    def submit(self, job: Job) -> Future:
        if not job.segments:
            job.future.set_result(Result([], []))
            return job.future
        with self._condition:
            if self._waiting + len(job.segments) > self.config.queue_sentences:
                raise QueueFull(max(1, round(self._waiting * self._seconds_per_sentence)))
            self._pending.append(job)
            self._waiting += len(job.segments)
            self.metrics.queue.labels(self.name).set(self._waiting)
            self._condition.notify()
        return job.future

    def stop(self) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify_all()
        self._thread.join(timeout=10)

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # --- the worker thread -------------------------------------------------------------------------------------

    def _take(self) -> list[Job]:
        """Block until work is there; return the jobs of the next model call (empty when stopping)."""
        c = self.config
        with self._condition:
            while not self._pending and not self._stopped:
                self._condition.wait()
            if self._stopped:
                return []
            if c.batching:
                deadline = self._pending[0].enqueued + c.batch_wait_ms / 1000
                while (remaining := deadline - time.monotonic()) > 0 and self._room() > 0:
                    self._condition.wait(remaining)
            jobs, keep, budget = [], deque(), c.batch_tokens
            settings = self._pending[0].settings
            while self._pending:
                job = self._pending.popleft()
                fits = not jobs or (c.batching and job.settings == settings and job.size <= budget)
                (jobs if fits else keep).append(job)
                if fits:
                    budget -= job.size
            self._pending = keep
            self._waiting = sum(len(job.segments) for job in keep)
            self.metrics.queue.labels(self.name).set(self._waiting)
            return jobs

    def _room(self) -> int:
        """Token budget left after the waiting jobs that share the oldest job's settings."""
        settings = self._pending[0].settings
        return self.config.batch_tokens - sum(job.size for job in self._pending if job.settings == settings)

    def _loop(self) -> None:
        while True:
            jobs = self._take()
            if not jobs:
                return
            jobs = [job for job in jobs if job.future.set_running_or_notify_cancel()]  # drop timed-out ones
            if not jobs:
                continue
            try:
                self._run(jobs)
            except Exception as error:  # reported to the requests as a 500; the worker lives on
                log.exception("translation failed")
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(error)

    def _run(self, jobs: list[Job]) -> None:
        segments = [s for job in jobs for s in job.segments]
        overrides = dict(jobs[0].settings)
        start = time.perf_counter()
        if self.config.batching:
            translations = self.translator.translate_detailed(
                segments, max_tokens=self.config.batch_tokens, on_long_line="error", **overrides
            )
        else:
            translations = [
                self.translator.translate_detailed([s], on_long_line="error", **overrides)[0] for s in segments
            ]
        elapsed = time.perf_counter() - start
        target_tokens = sum(len(t.pieces[0]) + 1 for t in translations if t.pieces)
        m, name = self.metrics, self.name
        m.batch_sentences.labels(name).observe(len(segments))
        m.batch_requests.labels(name).observe(len(jobs))
        m.batch_seconds.labels(name).observe(elapsed)
        m.sentences.labels(name).inc(len(segments))
        m.source_tokens.labels(name).inc(sum(sum(job.tokens) for job in jobs))
        m.target_tokens.labels(name).inc(target_tokens)
        m.tokens_per_second.labels(name).set(target_tokens / max(elapsed, 1e-9))
        self._seconds_per_sentence = 0.8 * self._seconds_per_sentence + 0.2 * elapsed / len(segments)
        at = 0
        for job in jobs:
            mine = translations[at : at + len(job.segments)]
            at += len(job.segments)
            pairs = zip(job.segments, mine)
            maps = [attention_maps(self.translator, s, t) if job.attention else None for s, t in pairs]
            job.future.set_result(Result(mine, maps))


__all__ = ["Batcher", "Job", "QueueFull", "Result"]
