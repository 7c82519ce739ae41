"""The models a server holds and the path every request takes: limits, quota, plan, queue, timeout, join.

    service = Service.load([("en-de", Path("runs/demo/checkpoint-best"))], ServeConfig())
    outputs = await service.translate(model, texts, settings, api_key=None)

Both APIs (LibreTranslate's `/translate` and the native `/v1/translate`) call `translate`, so they share
every limit, the batching and the error messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from starlette.concurrency import run_in_threadpool

from aiayn.config import ConfigError, DecodeConfig, with_overrides
from aiayn.decoding import Translator
from aiayn.serving.batcher import Batcher, Job, QueueFull, Result
from aiayn.serving.errors import ApiError
from aiayn.serving.metrics import Metrics
from aiayn.serving.quota import Quotas
from aiayn.serving.settings import ServeConfig
from aiayn.serving.text import Plan, TextError, clean, plan_texts


@dataclass
class Model:
    source: str
    target: str
    name: str  # the model directory's name (never its full path: no path reaches a client)
    translator: Translator
    batcher: Batcher

    @property
    def pair(self) -> str:
        return f"{self.source}-{self.target}"


@dataclass
class Outcome:
    texts: list[str]  # one per request text
    alternatives: list[list[str]]  # per text, hypotheses 2..nbest, each joined like the best
    plan: Plan
    result: Result


class Service:
    def __init__(self, models: list[tuple[str, Translator, str]], config: ServeConfig) -> None:
        self.config, self.metrics = config, Metrics()
        self.quotas = Quotas(config.api_keys, config.quota_window_s)
        self.models: dict[str, Model] = {}
        for pair, translator, name in models:
            source, _, target = pair.partition("-")
            if pair in self.models:
                raise ValueError(f"two models translate {pair}; serve one model per language pair")
            self.models[pair] = Model(source, target, name, translator, Batcher(pair, translator, config, self.metrics))

    @classmethod
    def load(cls, specs: list[tuple[str, Path]], config: ServeConfig, **decode_overrides) -> Service:
        models = [(pair, Translator.from_pretrained(path, **decode_overrides), path.name) for pair, path in specs]
        return cls(models, config)

    def stop(self) -> None:
        for model in self.models.values():
            model.batcher.stop()

    # --- choosing a model ----------------------------------------------------------------------------------

    def languages(self) -> list[str]:
        return sorted({m.source for m in self.models.values()} | {m.target for m in self.models.values()})

    def pick(self, source: str | None, target: str | None) -> Model:
        """The model for source -> target; either may be omitted when only one model fits. `source="auto"`
        takes the only source language served into `target` (no language detection)."""
        if source == "auto":
            source = None
        candidates = [m for m in self.models.values() if source in (None, m.source) and target in (None, m.target)]
        if len(candidates) == 1:
            return candidates[0]
        if source is not None and source not in {m.source for m in self.models.values()}:
            raise ApiError(400, f"{source} is not supported", field="source")
        if target is not None and target not in {m.target for m in self.models.values()}:
            raise ApiError(400, f"{target} is not supported", field="target")
        if not candidates:
            served = ", ".join(self.models)
            raise ApiError(400, f"{source or 'auto'}-{target} is not supported (served: {served})", field="target")
        raise ApiError(400, "several models fit: name both source and target (" + ", ".join(self.models) + ")")

    # --- translating -----------------------------------------------------------------------------------------

    def settings(self, model: Model, overrides: dict) -> tuple[tuple[str, object], ...]:
        """Validated DecodeConfig overrides (beam and nbest under the server's limits), as a sorted tuple."""
        c = self.config
        overrides = {key: value for key, value in overrides.items() if value is not None}
        beam = overrides.get("beam", model.translator.config.beam)
        if beam > c.max_beam:
            raise ApiError(400, f"beam {beam} exceeds the limit of {c.max_beam}", limit="max_beam", field="beam")
        nbest = overrides.get("nbest", 1)
        if nbest > c.max_nbest:
            raise ApiError(400, f"nbest {nbest} exceeds the limit of {c.max_nbest}", limit="max_nbest", field="nbest")
        try:
            with_overrides(model.translator.config, overrides, section="decode")
        except ConfigError as error:
            message = str(error)
            field = next((f.name for f in dataclasses.fields(DecodeConfig) if f"decode.{f.name}" in message), None)
            raise ApiError(422, message.replace("decode.", ""), field=field) from None
        return tuple(sorted(overrides.items()))

    def check_texts(self, texts: list[str], where: str) -> list[str]:
        c = self.config
        if len(texts) > c.max_texts:
            raise ApiError(
                400, f"{len(texts)} texts exceed the limit of {c.max_texts} texts per request", limit="max_texts"
            )
        cleaned = []
        for i, text in enumerate(texts):
            name = f"{where}[{i}]" if len(texts) > 1 or where == "texts" else where
            if len(text) > c.max_chars:
                raise ApiError(
                    400, f"{name} has {len(text)} characters, more than the limit of {c.max_chars}",
                    limit="max_chars", field=name,
                )  # fmt: skip
            try:
                cleaned.append(clean(text, name))
            except TextError as error:
                raise ApiError(400, str(error), field=name) from None
        return cleaned

    async def translate(
        self,
        model: Model,
        texts: list[str],
        settings: tuple[tuple[str, object], ...],
        api_key: str | None = None,
        attention: bool = False,
        where: str = "texts",
    ) -> Outcome:
        c = self.config
        texts = self.check_texts(texts, where)
        self.quotas.charge(api_key, sum(map(len, texts)))
        limit = model.translator.source_limit()
        plan = await run_in_threadpool(plan_texts, texts, model.source, model.translator.tokenizer, limit)
        total = sum(plan.tokens)
        if total > c.max_tokens_per_request:
            raise ApiError(
                400, f"the texts have {total} subword tokens, more than the limit of {c.max_tokens_per_request} "
                "per request", limit="max_tokens_per_request",
            )  # fmt: skip
        if attention and len(plan.segments) > c.max_attention_sentences:
            raise ApiError(
                400, f"return_attention is limited to {c.max_attention_sentences} sentences per request; "
                f"the texts have {len(plan.segments)}", limit="max_attention_sentences",
            )  # fmt: skip
        job = Job(plan.segments, plan.tokens, settings, attention)
        try:
            future = model.batcher.submit(job)
        except QueueFull as error:
            raise ApiError(
                503, f"{error}; retry in {error.retry_after} s", limit="queue_sentences",
                headers={"Retry-After": str(error.retry_after)},
            ) from None  # fmt: skip
        try:
            result: Result = await asyncio.wait_for(asyncio.wrap_future(future), c.request_timeout_s)
        except asyncio.TimeoutError:
            raise ApiError(
                504, f"the translation took longer than the limit of {c.request_timeout_s:g} s",
                limit="request_timeout_s",
            ) from None  # fmt: skip
        except Exception:  # logged by the worker
            raise ApiError(500, "Cannot translate text: translation failed") from None
        best = [t.text for t in result.translations]
        nbest = dict(settings).get("nbest", 1)
        alternatives = [
            plan.join([t.hypotheses[k] if k < len(t.hypotheses) else t.text for t in result.translations])
            for k in range(1, nbest)
        ]
        return Outcome(
            texts=plan.join(best),
            alternatives=[[alt[i] for alt in alternatives] for i in range(len(texts))],
            plan=plan,
            result=result,
        )


__all__ = ["Model", "Outcome", "Service"]
