"""The one place where fast paths are chosen. Each is the same function as the model as built, tested equal:

- attention: which implementation of eq. (1) each stack uses (`Transformer.set_attention`): "explicit" (the
  formula) or "sdpa" (PyTorch's fused kernel);
- linear: which kernel float32 `nn.Linear` layers use on CPU: "torch" (`F.linear`) or "onednn"
  (`aiayn.kernels.onednn.OneDnnLinear`: modules swapped, parameters shared; weights packed for inference,
  where products of few rows or small weights still run on `F.linear`: `onednn.packed_min_rows`);
- dropout: on CPU in training, masks drawn from 16 random bits per element instead of `bernoulli_`
  (`aiayn.kernels.dropout.RandMaskDropout`: the same distribution with p rounded to 2^-16, another random stream);
- loss (training): the final linear and the label-smoothed loss from the decoder's states in chunks of rows,
  without the [N, V] logits ("chunked", `aiayn.training.loss.projected_label_smoothed_loss`), or logits first
  and the loss from them ("logits");
- precision: the training autocast dtype (`resolve_precision`; `precision_candidates` where "fastest" leaves
  float32 and bf16 open and the trainer times both); for decoding float32, bf16 products in both
  stacks with float32 activations, logits and scores (`aiayn.kernels.bf16.Bf16Linear`), or int8 linear
  layers with per-row weight and input scales (`aiayn.kernels.int8.Int8Linear`); `choose_decode_precision`.

"auto" picks by device, dtype and workload; the rules and the measurements behind them are in
docs/ARCHITECTURE.md and docs/benchmarks/. `Runtime` records what was chosen; benchmarks and logs print it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from aiayn.kernels.bf16 import swap_bf16_linears
from aiayn.kernels.cpu_features import CpuFeatures, cpu_features
from aiayn.kernels.dropout import swap_dropout
from aiayn.kernels.int8 import int8_available, quantize_int8
from aiayn.kernels.modules import replace_modules
from aiayn.kernels.onednn import describe_min_rows, onednn_available, swap_linears
from aiayn.model import Transformer

CHOICES = {
    "attention": ("auto", "explicit", "sdpa"),
    "linear": ("auto", "onednn", "torch"),
    "precision": ("auto", "float32", "bf16", "int8"),
    "loss": ("auto", "chunked", "logits"),
}
INT8_MIN_D_MODEL = 256  # auto decodes in int8 from this width (CPUs without native bf16)
BF16_TRAIN_MIN_D_MODEL = 256  # auto trains in bf16 on CPUs with native bf16 from this width
_EXPLICIT_MAX_KEYS = 256  # bf16 CPU training: up to this many keys the explicit formula's backward is faster


@dataclass(frozen=True)
class Runtime:
    """What a prepared model runs: attention per stack, linear kernel, precision."""

    encoder_attention: str
    decoder_attention: str
    linear: str
    precision: str
    linear_shapes: str = ""  # decoding with linear=onednn: the rows from which each weight shape runs on oneDNN
    dropout: str = ""  # training: "rand-mask" (aiayn.kernels.dropout) or "torch"
    loss: str = ""  # training: "chunked" (projection and loss a chunk of rows at a time) or "logits"

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in asdict(self).items() if v != "")


def _check(kind: str, value: str) -> None:
    if value not in CHOICES[kind]:
        raise ValueError(f"{kind} implementation must be one of {', '.join(CHOICES[kind])}; got {value!r}")


def choose_attention(
    setting: str, device: torch.device, dtype: torch.dtype, training: bool, max_keys: int = 1024
) -> tuple[str, str]:
    """(encoder, decoder) implementation of eq. (1). auto, on CPU: the explicit formula in the decoder (decoding
    steps have a few queries per row, where the fused kernel's per-call work dominates; in float32 training the
    two cost the same) and in bf16 training with sentence-length keys (the fused backward is slow there);
    everywhere else the fused kernel."""
    _check("attention", setting)
    if setting != "auto":
        return setting, setting
    if device.type != "cpu":
        return "sdpa", "sdpa"
    bf16_training = training and dtype == torch.bfloat16 and max_keys <= _EXPLICIT_MAX_KEYS
    return ("explicit" if bf16_training else "sdpa"), "explicit"


def choose_linear(
    setting: str, device: torch.device, dtype: torch.dtype, sharded: bool = False, compiled: bool = False
) -> str:
    """auto: oneDNN for float32 on CPU (not under FSDP, not under torch.compile, whose inductor cannot lower the
    oneDNN op) when this torch build has it; else torch's F.linear. "onednn" where it cannot apply is an error."""
    _check("linear", setting)
    if compiled and setting == "onednn":
        raise ValueError("train.linear_kernel=onednn cannot be compiled (train.compile: true); use auto or torch")
    applicable = device.type == "cpu" and dtype == torch.float32 and not sharded and not compiled and onednn_available()
    if setting == "onednn" and not applicable:
        raise ValueError("linear kernel onednn needs float32 on CPU without FSDP, and a torch build with oneDNN")
    return "onednn" if setting != "torch" and applicable else "torch"


def choose_loss(setting: str, dtype: torch.dtype, sharded: bool = False, compiled: bool = False) -> str:
    """auto: "chunked" in float32 training (not under FSDP, whose sharded weight the chunks cannot read, nor
    under torch.compile, which fuses the logits path itself); "logits" elsewhere (autocast: the products' dtype
    is autocast's to choose). "chunked" where it cannot apply is an error."""
    _check("loss", setting)
    applicable = dtype == torch.float32 and not sharded and not compiled
    if setting == "chunked" and not applicable:
        raise ValueError("train.loss_kernel=chunked needs float32 training without FSDP or torch.compile")
    return "chunked" if setting != "logits" and applicable else "logits"


def resolve_precision(
    name: str, device: torch.device, features: CpuFeatures | None = None, d_model: int | None = None
) -> torch.dtype:
    """Training autocast dtype. auto (and fastest where nothing is left to time): bf16 on a GPU that supports it;
    on a CPU with native bf16 matrix units (AMX, AVX-512 BF16) bf16 for models of d_model >= BF16_TRAIN_MIN_D_MODEL
    (narrower ones train faster in float32 on real, variably shaped batches on the guests measured;
    docs/benchmarks/training.md), else fp32; fp16 needs CUDA."""
    if name in ("auto", "fastest"):
        if device.type == "cuda":
            name = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        else:
            wide = d_model is None or d_model >= BF16_TRAIN_MIN_D_MODEL
            native = device.type == "cpu" and (features or cpu_features()).native_bf16
            name = "bf16" if native and wide else "fp32"
    if name == "fp16" and device.type != "cuda":
        raise ValueError("train.precision=fp16 needs a CUDA device; use bf16 or fp32")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def precision_candidates(
    name: str, device: torch.device, features: CpuFeatures | None = None, d_model: int | None = None
) -> tuple[torch.dtype, ...]:
    """The training autocast dtypes `name` leaves open: one where it is settled (`resolve_precision`); fastest on
    a CPU with native bf16 matrix units gives (float32, bf16), which the trainer decides between by timing a
    few steps of each (`aiayn.training.precision_probe`): at d_model 128 which is faster differs from one guest
    to the next (docs/benchmarks/training.md)."""
    if name == "fastest" and device.type == "cpu" and (features or cpu_features()).native_bf16:
        return torch.float32, torch.bfloat16
    return (resolve_precision(name, device, features, d_model),)


def choose_orthogonalization_dtype(device: torch.device, features: CpuFeatures | None = None) -> torch.dtype:
    """The dtype of Muon's Newton-Schulz products (`train.optimizer: muon`): bf16, as `torch.optim.Muon` computes
    them, on a GPU or a CPU with native bf16 matrix units; float32 elsewhere, where bf16 products are emulated
    (about 20x slower than float32 on an AVX2 Zen 3: 3.2 against 0.16 ms for a 128x256 Gram matrix and its square,
    docs/benchmarks/training.md)."""
    if device.type == "cuda" or (device.type == "cpu" and (features or cpu_features()).native_bf16):
        return torch.bfloat16
    return torch.float32


def choose_decode_precision(
    setting: str, device: torch.device, features: CpuFeatures | None = None, d_model: int | None = None
) -> str:
    """float32 | bf16 | int8 for decoding. auto: bf16 on a GPU, or on a CPU with native bf16 matrix units (AMX,
    AVX-512 BF16), where bf16 products run several times faster; int8 on other x86 CPUs with AVX2 for models of
    d_model >= INT8_MIN_D_MODEL (smaller products gain less than the per-row input scaling costs;
    docs/benchmarks/precision.md); float32 elsewhere."""
    _check("precision", setting)
    if setting != "auto":
        return setting
    if device.type == "cuda":
        return "bf16"
    if device.type != "cpu":
        return "float32"
    features = features or cpu_features()
    if features.native_bf16:
        return "bf16"
    wide = d_model is None or d_model >= INT8_MIN_D_MODEL
    return "int8" if wide and "avx2" in features.flags and int8_available() else "float32"


def _device_dtype(model: Transformer) -> tuple[torch.device, torch.dtype]:
    weight = model.output_weight()
    return weight.device, weight.dtype


def prepare_for_training(
    model: Transformer,
    attention: str = "auto",
    linear: str = "auto",
    precision: torch.dtype = torch.float32,
    max_keys: int = 1024,
    sharded: bool = False,
    compiled: bool = False,
    loss: str = "auto",
) -> Runtime:
    """Choose and apply the fast paths for training `model` (in place) with autocast `precision`. `compiled`
    (train.compile): the model goes to torch.compile, whose own fused kernels replace the hand-written ones, so
    products stay F.linear (inductor cannot lower the oneDNN op) and dropout stays torch's."""
    device, _ = _device_dtype(model)
    encoder, decoder = choose_attention(attention, device, precision, training=True, max_keys=max_keys)
    kernel = choose_linear(linear, device, precision, sharded, compiled)
    model.set_attention(encoder, "encoder")
    model.set_attention(decoder, "decoder")
    if kernel == "onednn":
        swap_linears(model)
    dropout = "rand-mask" if device.type == "cpu" and not compiled and swap_dropout(model) else "torch"
    loss_path = choose_loss(loss, precision, sharded, compiled)
    return Runtime(encoder, decoder, kernel, str(precision).removeprefix("torch."), dropout=dropout, loss=loss_path)


def remove_dropout(module: nn.Module) -> int:
    """Replace every `nn.Dropout` inside `module` by `nn.Identity` (in place): in eval mode dropout is the
    identity, but each module still dispatches an op per call (17 of a small model's 256 per decoder step)."""
    return replace_modules(module, lambda m: isinstance(m, nn.Dropout), lambda _: nn.Identity())


def prepare_for_inference(
    model: Transformer, attention: str = "auto", linear: str = "auto", int8: bool = False, precision: str = "float32"
) -> tuple[Transformer, Runtime]:
    """Choose and apply the fast paths for decoding with `model` (eval mode). `precision` bf16 runs the encoder's
    and decoder's products in bf16 with float32 activations (modules swapped in place; the vocabulary
    projection stays float32: bf16 logits, rounded to 2^-8 of their size, flip near-ties); int8 (or
    `int8=True`) quantizes both stacks' linear layers and the vocabulary projection (a copy is returned); the
    remaining float32 linear layers get the chosen kernel."""
    model.eval()
    remove_dropout(model)  # inference only: the prepared model is not for training
    device, dtype = _device_dtype(model)
    d_model = model.config.d_model
    precision = "int8" if int8 else choose_decode_precision(precision, device, d_model=d_model)
    encoder, decoder = choose_attention(attention, device, dtype, training=False)
    kernel = choose_linear(linear, device, dtype)
    if precision == "int8":
        model = quantize_int8(model)  # type: ignore[assignment]
    elif precision == "bf16":
        swap_bf16_linears(model.encoder)
        swap_bf16_linears(model.decoder)
    model.set_attention(encoder, "encoder")
    model.set_attention(decoder, "decoder")
    shapes = ""
    if kernel == "onednn":
        swap_linears(model, packed=True)
        shapes = describe_min_rows(model)
    labels = {
        "int8": "int8 linears (per-row weight and input scales), float32 scores",
        "bf16": "bf16 stacks, float32 logits",
    }
    label = labels.get(precision, "float32")
    return model, Runtime(encoder, decoder, kernel, label, shapes)


__all__ = [
    "CHOICES",
    "INT8_MIN_D_MODEL",
    "Runtime",
    "choose_attention",
    "choose_decode_precision",
    "choose_linear",
    "precision_candidates",
    "prepare_for_inference",
    "prepare_for_training",
    "remove_dropout",
    "resolve_precision",
]
