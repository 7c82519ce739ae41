"""Configuration: small frozen dataclasses whose fields carry the paper's names.

`ModelConfig` presets `base` and `big` are Table 3 of the paper (rows "base" and "big"); `small` and `tiny`
are sized for CPU training. Every field can be overridden with `with_overrides` (strings from a command line
are parsed to the field's type).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration field is unknown or has an invalid value."""


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of the encoder-decoder Transformer (sections 3 and 5.4, Table 3).

    Departures from the paper are named flags: `norm_first` (pre-norm), `positional="learned"`
    (Table 3 row E), `share_embeddings=False` / `tie_output=False` (untied weights).
    """

    src_vocab_size: int = 37000
    tgt_vocab_size: int = 37000
    N: int = 6  # layers in each stack (3.1); `N_dec` overrides it for the decoder
    N_dec: int | None = None
    d_model: int = 512
    d_ff: int = 2048
    h: int = 8
    d_k: int = 64
    d_v: int = 64
    P_drop: float = 0.1  # residual and embedding dropout (5.4)
    eps_ls: float = 0.1  # label smoothing (5.4); used by the training loss
    attention_dropout: float = 0.0  # not in the paper; tensor2tensor used 0.1
    activation_dropout: float = 0.0  # dropout after the ReLU of eq. 2; not in the paper
    norm_first: bool = False  # False: LayerNorm(x + Dropout(Sublayer(x))) as in 3.1; True: pre-norm
    layer_norm_eps: float = 1e-5
    positional: Literal["sinusoidal", "learned"] = "sinusoidal"  # 3.5, Table 3 row E
    max_positions: int = 1024  # size of the learned table; sinusoids extend beyond it
    share_embeddings: bool = True  # one matrix for source and target embeddings (3.4)
    tie_output: bool = True  # pre-softmax linear shares the target embedding matrix (3.4)
    scale_embeddings: bool = True  # multiply embeddings by sqrt(d_model) (3.4)
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int = 3

    def __post_init__(self) -> None:
        positive = ("src_vocab_size", "tgt_vocab_size", "N", "d_model", "d_ff", "h", "d_k", "d_v")
        for name in positive:
            if int(getattr(self, name)) <= 0:
                raise ConfigError(f"model.{name} must be positive, got {getattr(self, name)}")
        if self.N_dec is not None and self.N_dec <= 0:
            raise ConfigError(f"model.N_dec must be positive, got {self.N_dec}")
        for name in ("P_drop", "eps_ls", "attention_dropout", "activation_dropout"):
            if not 0.0 <= float(getattr(self, name)) < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ConfigError(f"model.positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even model.d_model, got {self.d_model}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(
                "model.share_embeddings needs one shared vocabulary, but "
                f"src_vocab_size={self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}"
            )
        specials = {self.pad_id, self.bos_id, self.eos_id, self.unk_id}
        if len(specials) != 4 or max(specials) >= min(self.src_vocab_size, self.tgt_vocab_size):
            raise ConfigError("model.pad_id/bos_id/eos_id/unk_id must be distinct ids inside the vocabulary")

    @property
    def decoder_layers(self) -> int:
        return self.N if self.N_dec is None else self.N_dec

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        return from_dict(cls, data, section="model")

    def with_overrides(self, **overrides: Any) -> ModelConfig:
        return with_overrides(self, overrides, section="model")


def _preset(N: int, d_model: int, d_ff: int, h: int, P_drop: float, **extra: Any) -> ModelConfig:
    d_k = d_model // h
    return ModelConfig(N=N, d_model=d_model, d_ff=d_ff, h=h, d_k=d_k, d_v=d_k, P_drop=P_drop, **extra)


PRESETS: dict[str, ModelConfig] = {
    # Table 3, row "base": N=6, d_model=512, d_ff=2048, h=8, d_k=d_v=64, P_drop=0.1, eps_ls=0.1 (65M params).
    "base": _preset(N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1),
    # Table 3, row "big": N=6, d_model=1024, d_ff=4096, h=16, d_k=d_v=64, P_drop=0.3, eps_ls=0.1 (213M).
    "big": _preset(N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3),
    # CPU-sized: Table 3 row C's d_model=256 with fewer layers; heavy dropout suits small corpora.
    "small": _preset(N=3, d_model=256, d_ff=1024, h=4, P_drop=0.3),
    # The 4-layer, d_model=128 shape that tops Multi30k (Wu et al. 2021), trainable on 2 CPU cores.
    "tiny": _preset(N=4, d_model=128, d_ff=512, h=4, P_drop=0.3),
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    """Return the named preset (`base`, `big`, `small`, `tiny`) with optional field overrides."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name].with_overrides(**overrides) if overrides else PRESETS[name]


@dataclass(frozen=True)
class DecodeConfig:
    """Search settings; defaults are section 6.1: beam 4, alpha 0.6, max length input + 50."""

    beam: int = 4
    lenpen: float = 0.6
    lenpen_form: Literal["gnmt", "power"] = "gnmt"  # ((5+|Y|)/6)^alpha (Wu et al.) or |Y|^alpha (fairseq)
    max_len_a: float = 1.0
    max_len_b: int = 50
    nbest: int = 1
    greedy: bool = False
    sampling: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_tokens: int = 4096  # token budget of one batch of source sentences
    max_source_positions: int = 1024
    on_long_line: Literal["truncate", "error"] = "truncate"
    seed: int = 1

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise ConfigError(f"decode.beam must be >= 1, got {self.beam}")
        if self.nbest < 1 or self.nbest > self.beam:
            raise ConfigError(f"decode.nbest must be in [1, beam={self.beam}], got {self.nbest}")
        if self.lenpen_form not in ("gnmt", "power"):
            raise ConfigError(f"decode.lenpen_form must be 'gnmt' or 'power', got {self.lenpen_form!r}")
        if self.on_long_line not in ("truncate", "error"):
            raise ConfigError(f"decode.on_long_line must be 'truncate' or 'error', got {self.on_long_line!r}")
        if self.temperature <= 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise ConfigError("decode.temperature must be > 0, top_p in (0, 1], top_k >= 0")


# --- generic helpers shared by every config dataclass ------------------------------------------------------


def parse_value(text: str, current: Any, name: str) -> Any:
    """Parse a command-line string to the type of the field's current value."""
    if not isinstance(text, str):
        return text
    try:
        if isinstance(current, bool):
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if isinstance(current, int):
            try:
                return int(text)
            except ValueError:
                number = float(text)  # accept "1e5"
                if not number.is_integer():
                    raise
                return int(number)
        if isinstance(current, float):
            return float(text)
        if current is None:
            low = text.strip().lower()
            if low in ("none", "null", ""):
                return None
            for cast in (int, float):
                try:
                    return cast(text)
                except ValueError:
                    pass
            return text
        if isinstance(current, (list, tuple)):
            return [item.strip() for item in text.split(",") if item.strip()]
    except ValueError:
        raise ConfigError(f"{name}: cannot parse {text!r} as {type(current).__name__}") from None
    return text


def with_overrides(config: T, overrides: dict[str, Any], section: str) -> T:
    """Return a copy of a config dataclass with fields replaced; unknown fields raise `ConfigError`."""
    known = {f.name: f for f in fields(config)}  # type: ignore[arg-type]
    values = {}
    for key, value in overrides.items():
        if key not in known:
            raise ConfigError(f"unknown field {section}.{key}; known fields: {', '.join(known)}")
        values[key] = parse_value(value, getattr(config, key), f"{section}.{key}")
    return dataclasses.replace(config, **values)  # type: ignore[type-var]


def from_dict(cls: type[T], data: dict[str, Any], section: str) -> T:
    """Build a config dataclass from a mapping, naming any unknown field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{section}: expected a mapping, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown field(s) in {section}: {', '.join(unknown)}")
    try:
        return cls(**data)
    except TypeError as error:
        raise ConfigError(f"{section}: {error}") from None


__all__ = [
    "ConfigError",
    "DecodeConfig",
    "ModelConfig",
    "PRESETS",
    "from_dict",
    "parse_value",
    "preset",
    "with_overrides",
]
