"""Configuration: small frozen dataclasses whose fields carry the paper's names.

`ModelConfig` presets `base` and `big` are Table 3 of the paper (rows "base" and "big"); `small` and `tiny`
are sized for CPU training. Every field can be overridden with `with_overrides` (strings from a command line
are parsed to the field's type).

A training run is a `RunConfig`: one YAML file whose sections `model:`, `data:`, `train:` and `decode:` map
one-to-one onto `ModelConfig` (plus `preset:`), `DataConfig`, `TrainConfig` (section 5) and `DecodeConfig`;
`load_run_config(path, ["train.max_updates=3", ...])` reads it and applies `--set` overrides. Reading and
type coercion (by the fields' type hints) live in `aiayn.config_loading`; its public names are importable here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from aiayn.config_loading import (
    ConfigError,
    check_choices,
    check_finite,
    check_known,
    dump_yaml,
    from_dict,
    parse_sets,
    read_yaml,
    split_sections,
    with_overrides,
)


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of the encoder-decoder Transformer (sections 3 and 5.4, Table 3).

    Departures from the paper are named flags: `norm_first` (pre-norm), `positional="learned"`
    (Table 3 row E), `share_embeddings=False` / `tie_output=False` (untied weights). Models made elsewhere
    (OPUS-MT, fairseq; docs/INTEROP.md) add `activation`, `positional_layout`, `positional_frequencies`,
    `positional_offset`, `final_logits_bias` and `decoder_start`, whose defaults are the paper's.
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
    bos_id: int | None = 1  # None: the vocabulary has no BOS (Marian); then `decoder_start` names another row
    eos_id: int = 2
    unk_id: int = 3
    # --- settings of models made elsewhere (aiayn.interop, docs/INTEROP.md); the defaults are the paper's ---
    activation: Literal["relu", "swish", "gelu"] = "relu"  # eq. 2's max(0, .); Marian: swish (SiLU); BART: gelu
    # 3.5's sin/cos: interleaved (sin at even, cos at odd dimensions, as written) or concat (all sines, then all
    # cosines: tensor2tensor, Marian, fairseq); frequencies 10000^(-2i/d_model) (paper) or fairseq's
    # 10000^(-i/(d_model/2 - 1)); positions counted from `positional_offset` (fairseq: padding_idx + 1)
    positional_layout: Literal["interleaved", "concat"] = "interleaved"
    positional_frequencies: Literal["paper", "fairseq"] = "paper"
    positional_offset: int = 0
    final_logits_bias: bool = False  # a [V] vector added to the logits (Marian's `final_logits_bias`)
    decoder_start: Literal["bos", "pad", "eos"] = "bos"  # the decoder's first input: BOS (ours), pad (Marian), eos

    def __post_init__(self) -> None:
        check_finite(self, "model")
        positive = ("src_vocab_size", "tgt_vocab_size", "N", "d_model", "d_ff", "h", "d_k", "d_v")
        for name in positive:
            if int(getattr(self, name)) <= 0:
                raise ConfigError(f"model.{name} must be positive, got {getattr(self, name)}")
        if self.N_dec is not None and self.N_dec <= 0:
            raise ConfigError(f"model.N_dec must be positive, got {self.N_dec}")
        for name in ("P_drop", "eps_ls", "attention_dropout", "activation_dropout"):
            if not 0.0 <= float(getattr(self, name)) < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0.0 < self.layer_norm_eps < 1.0:
            raise ConfigError(f"model.layer_norm_eps must be in (0, 1), got {self.layer_norm_eps}")
        check_choices(self, "model")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even model.d_model, got {self.d_model}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(
                "model.share_embeddings needs one shared vocabulary, but "
                f"src_vocab_size={self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}"
            )
        named = [self.pad_id, self.eos_id, self.unk_id] + ([] if self.bos_id is None else [self.bos_id])
        specials = set(named)
        vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        if len(specials) != len(named) or min(specials) < 0 or max(specials) >= vocab:
            raise ConfigError("model.pad_id/bos_id/eos_id/unk_id must be distinct ids inside the vocabulary")
        if self.bos_id is None and self.decoder_start == "bos":
            raise ConfigError("model.bos_id is null, so model.decoder_start must be 'pad' or 'eos'")
        if self.positional_offset < 0:
            raise ConfigError(f"model.positional_offset must be >= 0, got {self.positional_offset}")
        if self.positional_frequencies == "fairseq" and self.d_model < 4:
            raise ConfigError("model.positional_frequencies='fairseq' needs d_model >= 4")

    @property
    def decoder_layers(self) -> int:
        return self.N if self.N_dec is None else self.N_dec

    @property
    def decoder_start_id(self) -> int:
        """The id the decoder reads first (position 0): bos_id, pad_id or eos_id, by `decoder_start`."""
        return {"bos": self.bos_id, "pad": self.pad_id, "eos": self.eos_id}[self.decoder_start]

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


MAX_BEAM = 1024  # hypotheses per sentence; beyond it the search is refused before allocating anything
MAX_OUTPUT_LEN = 1 << 16  # the most output tokens the length settings may allow


@dataclass(frozen=True)
class DecodeConfig:
    """Search settings; defaults are section 6.1: beam 4, alpha 0.6, max length input + 50.

    Output length: at most floor(max_len_a * |x| + max_len_b) tokens (|x| = source subwords without EOS), then
    EOS; at least `min_len` tokens before EOS may end a hypothesis. With `sampling`, `beam` samples are drawn
    per sentence and the best `nbest` by score are returned.
    """

    beam: int = 4
    lenpen: float = 0.6
    lenpen_form: Literal["gnmt", "power"] = "gnmt"  # ((5+|Y|)/6)^alpha (Wu et al.) or |Y|^alpha (fairseq)
    # how an ensemble's members are combined at each step (aiayn.decoding.ensemble): the mean of their
    # probabilities (fairseq), or of their log-probabilities, renormalised (a product of experts)
    ensemble_mean: Literal["arithmetic", "geometric"] = "arithmetic"
    max_len_a: float = 1.0
    max_len_b: int = 50
    min_len: int = 0  # EOS is forbidden before this many output tokens (benchmarks force lengths with it)
    nbest: int = 1
    greedy: bool = False
    sampling: bool = False
    temperature: float = 1.0
    top_k: int = 0  # 0: no top-k filter
    top_p: float = 1.0  # 1.0: no nucleus filter
    max_tokens: int = 4096  # token budget of one batch of source sentences (padded source positions)
    max_source_positions: int = 1024  # longest source, EOS included; longer inputs are truncated or refused
    on_long_line: Literal["truncate", "error"] = "truncate"
    seed: int = 1
    use_cache: bool = True  # False recomputes the whole prefix every step (the naive decoder; tests, benchmarks)
    need_attention: bool = False  # return each hypothesis' encoder-decoder attention (last layer, head mean)
    # which implementation of eq. (1) runs; auto = chosen by aiayn.kernels for the device and workload
    attention_impl: Literal["auto", "explicit", "sdpa"] = "auto"
    # which kernel computes float32 CPU products; auto = chosen by aiayn.kernels for the device and workload
    linear_kernel: Literal["auto", "onednn", "torch"] = "auto"
    # weights' arithmetic: bf16 keeps log-softmax and scores in float32; int8 = every linear layer and the
    # vocabulary projection, per-row weight scales;
    # auto = bf16 on a GPU or a CPU with native bf16 matrix units (AMX, AVX-512 BF16), else float32
    precision: Literal["auto", "float32", "bf16", "int8"] = "auto"

    def __post_init__(self) -> None:
        check_finite(self, "decode")
        if not 1 <= self.beam <= MAX_BEAM:
            raise ConfigError(f"decode.beam must be in [1, {MAX_BEAM}], got {self.beam}")
        if self.max_len_b > MAX_OUTPUT_LEN or self.max_len_a > MAX_OUTPUT_LEN:
            raise ConfigError(f"decode.max_len_a and decode.max_len_b must be at most {MAX_OUTPUT_LEN}")
        if abs(self.lenpen) > 100:
            raise ConfigError(f"decode.lenpen must be in [-100, 100], got {self.lenpen}")
        if self.nbest < 1 or self.nbest > self.beam:
            raise ConfigError(f"decode.nbest must be in [1, beam={self.beam}], got {self.nbest}")
        if self.greedy and self.nbest > 1:
            raise ConfigError(f"decode.greedy gives one hypothesis per sentence; got nbest={self.nbest}")
        check_choices(self, "decode")
        if self.temperature <= 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            raise ConfigError("decode.temperature must be > 0, top_p in (0, 1], top_k >= 0")
        if self.max_len_a < 0 or self.max_len_b < 0 or self.min_len < 0:
            raise ConfigError("decode.max_len_a, decode.max_len_b and decode.min_len must be >= 0")
        if self.max_tokens < 1:
            raise ConfigError(f"decode.max_tokens must be positive, got {self.max_tokens}")
        if self.max_source_positions < 2:
            raise ConfigError(f"decode.max_source_positions must be >= 2, got {self.max_source_positions}")


@dataclass(frozen=True)
class DataConfig:
    """The training data: a binarized directory written by `aiayn prepare`, batched as in section 5.1.

    When `dir` does not exist yet and `train_prefix`/`valid_prefix` are given, `aiayn train` prepares it first
    from raw text `PREFIX.{src_lang,tgt_lang}` under `raw_dir` (default: `aiayn.data.resolve_data_dir()`,
    i.e. $AIAYN_DATA_DIR), with a joint BPE vocabulary of `vocab_size`.
    """

    dir: str = "data-bin/multi30k-en-de"  # binarized directory; relative paths are from the working directory
    train_split: str = "train"
    valid_split: str = "valid"
    max_tokens: int = 4096  # padded source and padded target tokens per micro-batch, each at most this (5.1)
    max_sentences: int | None = None  # optional cap on pairs per micro-batch
    src_lang: str = "en"
    tgt_lang: str = "de"
    raw_dir: str | None = None
    train_prefix: str | None = None  # e.g. multi30k/train, relative to raw_dir
    valid_prefix: str | None = None
    test_prefixes: tuple[str, ...] = ()
    vocab_size: int = 8000  # the paper: a shared BPE vocabulary of about 37000 tokens
    max_len: int = 256  # longest side in subwords; longer training pairs are dropped when preparing
    bpe_dropout: float = 0.0  # BPE-dropout (Provilkov et al., 2020): each epoch's training pieces resampled; 0: off
    bpe_dropout_target: float | None = None  # its probability on the target side; null: bpe_dropout's

    def __post_init__(self) -> None:
        object.__setattr__(self, "test_prefixes", tuple(self.test_prefixes))
        check_finite(self, "data")
        if self.max_tokens <= 0:
            raise ConfigError(f"data.max_tokens must be positive, got {self.max_tokens}")
        if self.max_sentences is not None and self.max_sentences <= 0:
            raise ConfigError(f"data.max_sentences must be positive or null, got {self.max_sentences}")
        if self.vocab_size <= 4 or self.max_len <= 0:
            raise ConfigError("data.vocab_size must exceed the 4 special ids and data.max_len be positive")
        if not 0.0 <= self.bpe_dropout < 1.0:
            raise ConfigError(f"data.bpe_dropout must lie in [0, 1) (0: off), got {self.bpe_dropout}")
        if self.bpe_dropout_target is not None and not 0.0 <= self.bpe_dropout_target < 1.0:
            raise ConfigError(f"data.bpe_dropout_target must lie in [0, 1) or be null, got {self.bpe_dropout_target}")


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe of section 5: optimizer, schedule, batching, stopping, checkpoints and logging.

    The effective batch is data.max_tokens x update_freq x world_size tokens per side (the paper: ~25000).
    """

    out_dir: str = "runs/default"  # run directory: config.yaml, metrics.jsonl, checkpoint-*/
    seed: int = 1  # model initialisation, dropout and batch order
    adam_beta1: float = 0.9  # Adam as in 5.3: beta1=0.9, beta2=0.98, eps=1e-9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    # adam: all parameters (5.3); muon: Muon for the encoder's and decoder's matrices, Adam for the rest, one
    # schedule for both (not in the paper; torch >= 2.9)
    optimizer: Literal["adam", "muon"] = "adam"
    muon_momentum: float = 0.95  # Muon's Nesterov momentum
    lr_scale: float = 1.0  # eq. 3 times this: lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    warmup: int = 4000  # warmup_steps of eq. 3
    # after the warmup: inverse_sqrt = eq. 3; linear = from eq. 3's peak down to 0 at train.decay_updates
    lr_decay: Literal["inverse_sqrt", "linear"] = "inverse_sqrt"
    # the update a linear decay reaches 0 at; 0 = train.max_updates; auto = where train.max_minutes ends: redrawn at
    # each validation from the current rate to the update the remaining minutes reach at the recent pace
    decay_updates: int | Literal["auto"] = 0
    clip_norm: float = 0.0  # clip the gradient norm to this; 0 = off (the paper does not clip)
    update_freq: int = 1  # micro-batches accumulated per update (gradient accumulation)
    max_updates: int = 0  # stop after this many updates; 0 = no limit (paper: 100k base, 300k big)
    max_epochs: int = 0  # 0 = no limit
    max_minutes: float = 0.0  # wall-time budget over all resumptions of the run; 0 = no limit
    log_every: int = 100  # updates per metrics.jsonl record and progress-bar refresh
    valid_every: int = 1000  # validation loss/perplexity every N updates; 0 = at each epoch end
    bleu: bool = True  # validation BLEU, translating with the decode: section's search
    bleu_every: int = 0  # every M updates; 0 = at each epoch end
    bleu_max_sentences: int = 500  # first sentences of the validation set scored, to bound time
    save_every: int = 1000  # checkpoint every K updates (and at the end); 0 = only at the end
    keep_last: int = 5  # numbered checkpoints kept (the paper averaged the last 5 for base, 20 for big)
    device: str = "auto"  # auto (cuda when available) | cpu | cuda | cuda:N
    # auto: bf16 on a GPU that has it or a CPU with native bf16 matrix units (AMX, AVX-512 BF16) for d_model >= 256,
    # else fp32; fastest: on such a CPU, the faster of fp32 and bf16 on the run's first batches (timed at the start,
    # logged, kept on resume; two runs of one command may differ in precision where the two are close)
    precision: Literal["auto", "fastest", "fp32", "bf16", "fp16"] = "auto"
    threads: int = 0  # torch CPU threads; 0 = torch's default
    reuse_memory: bool = True  # CPU: keep freed memory in the process (aiayn.cpu); faster steps
    linear_kernel: Literal["auto", "onednn", "torch"] = "auto"  # float32 CPU products: auto = oneDNN if available
    # which implementation of eq. (1) runs; auto = chosen by aiayn.kernels for the device and workload
    attention_impl: Literal["auto", "explicit", "sdpa"] = "auto"
    compile: bool = False  # torch.compile the model for training
    # the final linear and the loss: chunked (a chunk of rows at a time, no [N, V] logits), logits, or auto
    # (chunked in float32 without FSDP or compile)
    loss_kernel: Literal["auto", "chunked", "logits"] = "auto"
    fsdp: bool = False  # shard parameters, gradients and Adam state over ranks (FSDP2) instead of DDP; world_size > 1
    progress: bool = True  # tqdm progress bar on stderr (rank 0 only)
    tensorboard: bool = True  # also write TensorBoard events when tensorboard is installed
    # divergence guard: an update whose loss or gradient is not finite is skipped and logged; this many in a
    # row stop the run (the last good checkpoint stays the newest)
    max_bad_updates: int = 5
    allow_data_change: bool = False  # resume even if the data or tokenizer differ from the checkpoint's

    def __post_init__(self) -> None:
        check_finite(self, "train")
        positive = ("warmup", "update_freq", "log_every", "bleu_max_sentences", "keep_last", "max_bad_updates")
        for name in positive:
            if int(getattr(self, name)) <= 0:
                raise ConfigError(f"train.{name} must be positive, got {getattr(self, name)}")
        for name in ("max_updates", "max_epochs", "max_minutes", "valid_every", "bleu_every", "save_every"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train.{name} must be >= 0 (0 = off), got {getattr(self, name)}")
        if not 0 < self.lr_scale <= 1e3 or self.clip_norm < 0 or self.weight_decay < 0:
            raise ConfigError("train.lr_scale must be in (0, 1000], train.clip_norm and train.weight_decay >= 0")
        if not 0 <= self.muon_momentum < 1:
            raise ConfigError(f"train.muon_momentum must be in [0, 1), got {self.muon_momentum}")
        if self.optimizer == "muon" and self.fsdp:
            raise ConfigError("train.optimizer: muon runs on whole matrices; it does not combine with train.fsdp")
        if not (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1 and self.adam_eps > 0):
            raise ConfigError("train.adam_beta1/adam_beta2 must be in [0, 1) and train.adam_eps > 0")
        check_choices(self, "train")
        if self.decay_updates == "auto":
            if self.lr_decay != "linear" or not self.max_minutes:
                raise ConfigError("train.decay_updates: auto fits a linear decay to the time budget; it needs"
                                  f" train.lr_decay: linear and train.max_minutes > 0, got lr_decay {self.lr_decay},"
                                  f" max_minutes {self.max_minutes}")  # fmt: skip
        elif self.decay_updates < 0:
            raise ConfigError(f"train.decay_updates must be >= 0 (0 = train.max_updates), got {self.decay_updates}")
        elif self.lr_decay == "linear" and (self.decay_updates or self.max_updates) <= self.warmup:
            raise ConfigError(
                "train.lr_decay: linear needs train.decay_updates (or train.max_updates) above train.warmup"
                f" ({self.warmup}), got {self.decay_updates or self.max_updates}"
            )


# --- run configuration: one YAML file, one section per dataclass --------------------------------------------

SECTIONS = {"model": ModelConfig, "data": DataConfig, "train": TrainConfig, "decode": DecodeConfig}


@dataclass(frozen=True)
class RunConfig:
    """Everything a training run needs; `to_dict()` is the YAML layout (and what the run directory keeps).

    The model's vocabulary sizes are not part of it: the trainer takes them from the data directory.
    """

    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out = {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}
        out["data"]["test_prefixes"] = list(self.data.test_prefixes)
        for key in ("src_vocab_size", "tgt_vocab_size"):
            del out["model"][key]
        return out


def build_run_config(document: Any, sets: list[str] = (), source: str = "config") -> RunConfig:
    """Build a RunConfig from a parsed YAML mapping and `--set section.field=value` strings."""
    raw = split_sections(document, SECTIONS, source)
    overrides = parse_sets(list(sets), SECTIONS)
    built: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        values, texts = raw[name], overrides.get(name, {})
        known = [f.name for f in fields(cls)] + (["preset"] if name == "model" else [])
        try:
            check_known([*values, *texts], known, name)
            if name == "model":
                built[name] = _model_section(values, texts)
            else:
                built[name] = with_overrides(from_dict(cls, values, name), texts, name)
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None
    return RunConfig(**built)


def _model_section(section: dict[str, Any], sets: dict[str, str]) -> ModelConfig:
    """`preset:` (default: base) plus field overrides; vocabulary sizes come from the data, never from here."""
    for key in ("src_vocab_size", "tgt_vocab_size"):
        if key in section or key in sets:
            raise ConfigError(f"model.{key} is set from the data directory's vocabulary (data.vocab_size)")
    name = str(sets.pop("preset", section.pop("preset", "base")))
    if name not in PRESETS:
        raise ConfigError(f"unknown model.preset {name!r}; choose one of {', '.join(PRESETS)}")
    config = with_overrides(PRESETS[name], section, "model", text=False)  # YAML values are typed already
    return with_overrides(config, sets, "model")


def load_run_config(path: str | Path, sets: list[str] = ()) -> RunConfig:
    """Read a YAML run config and apply `--set section.field=value` overrides; errors name the file and field."""
    return build_run_config(read_yaml(path), sets, source=str(path))


def dump_run_config(config: RunConfig) -> str:
    """The YAML text of a RunConfig (what `load_run_config` reads back to an equal config)."""
    return dump_yaml(config.to_dict())


__all__ = [
    "ConfigError",
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "PRESETS",
    "RunConfig",
    "SECTIONS",
    "TrainConfig",
    "build_run_config",
    "dump_run_config",
    "from_dict",
    "load_run_config",
    "preset",
    "with_overrides",
]
