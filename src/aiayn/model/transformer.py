"""The Transformer (section 3, Figure 1): embeddings + positional encodings, encoder and decoder stacks, and the
final linear + softmax, whose weight matrix is shared with the embeddings when the vocabulary is (3.4).

Protocol used by training, searches and visualization:
    memory = model.encode(src)                      -> EncoderOutput
    out = model.decode(tgt_in, memory)              -> DecoderOutput (logits for every position)
    cache = model.init_cache(memory, group=k)       -> KVCache (k rows, e.g. beams, per sentence)
    out = model.step(tokens, cache)                 -> StepOutput: out.logits [B,t,V], out.cache advanced
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model.attention import ATTENTION, MultiHeadAttention
from aiayn.model.cache import KVCache
from aiayn.model.decoder import Decoder, Memory
from aiayn.model.embedding import TokenEmbedding
from aiayn.model.encoder import Encoder
from aiayn.model.masks import key_padding_mask, padding_mask
from aiayn.model.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


@dataclass
class EncoderOutput:
    hidden: Tensor  # [B,S,d_model]
    mask: Tensor  # [B,S] bool, True at real source tokens
    attentions: list[Tensor]  # per layer [B,h,S,S] when asked for, else empty


@dataclass
class DecoderOutput:
    logits: Tensor | None  # [B,T,V]; None when `decode(..., project=False)`
    hidden: Tensor  # [B,T,d_model], the decoder stack's output before the final linear
    self_attentions: list[Tensor]  # per layer [B,h,T,T] when asked for
    cross_attentions: list[Tensor]  # per layer [B,h,T,S] when asked for


@dataclass
class StepOutput:
    logits: Tensor  # [B,t,V] for the t new positions (t = 1 when decoding one token per row)
    cache: KVCache  # the cache passed in, advanced by t positions
    self_attentions: list[Tensor]  # per layer [B,h,t,T] when asked for, else empty
    cross_attentions: list[Tensor]  # per layer [B,h,t,S] when asked for, else empty


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = self.config = config
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id, c.scale_embeddings)
        if c.share_embeddings:
            self.tgt_embed = self.src_embed  # one matrix for both embeddings (3.4)
        else:
            self.tgt_embed = TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id, c.scale_embeddings)
        if c.positional == "sinusoidal":
            self.positions: nn.Module = SinusoidalPositionalEncoding(
                c.d_model, c.max_positions, c.positional_layout, c.positional_frequencies, c.positional_offset
            )
        else:
            self.positions = LearnedPositionalEmbedding(c.max_positions, c.d_model)
        self.embed_dropout = nn.Dropout(c.P_drop)  # on the sums of embeddings and positions (5.4)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        # The pre-softmax linear (3.4): when tied, its weight is the target embedding matrix itself.
        self.output_proj = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False, device="meta" if c.tie_output else None)
        if c.tie_output:
            self.output_proj.weight = self.tgt_embed.weight
        else:
            nn.init.normal_(self.output_proj.weight, std=c.d_model**-0.5)
        # Not in the paper: a [V] vector added to the logits (Marian's final_logits_bias); a buffer, not trained.
        self.final_logits_bias: Tensor | None
        self.register_buffer("final_logits_bias", torch.zeros(c.tgt_vocab_size) if c.final_logits_bias else None)

    # --- embeddings ----------------------------------------------------------------------------------------

    def _embed(self, embedding: TokenEmbedding, tokens: Tensor, start: int = 0) -> Tensor:
        """Dropout(Embedding(tokens) * sqrt(d_model) + PE(positions)) for positions start.. (3.4, 3.5, 5.4)."""
        x = embedding(tokens) + self.positions(tokens.size(1), start).to(embedding.weight.dtype)
        return self.embed_dropout(x)

    def output_weight(self) -> Tensor:
        """The pre-softmax linear transformation: the target embedding matrix when tied (3.4)."""
        return self.output_proj.weight

    def project(self, hidden: Tensor) -> Tensor:
        """Final linear (3.4): [.., d_model] -> [.., V] logits (+ final_logits_bias); softmax left to the caller."""
        logits = self.output_proj(hidden)
        return logits if self.final_logits_bias is None else logits + self.final_logits_bias.to(logits.dtype)

    def set_attention(self, impl: str, stack: str | None = None) -> None:
        """Which implementation of eq. (1) the attention modules use: "explicit" (the formula) or "sdpa" (the
        fused kernel), in both stacks or only `stack` ("encoder" | "decoder")."""
        if impl not in ATTENTION:
            raise ValueError(f"attention implementation must be one of {sorted(ATTENTION)}, got {impl!r}")
        for module in (self if stack is None else getattr(self, stack)).modules():
            if isinstance(module, MultiHeadAttention):
                module.impl = impl

    # --- the protocol --------------------------------------------------------------------------------------

    def encode(self, src: Tensor, need_weights: bool = False) -> EncoderOutput:
        """src [B,S] token ids (padded with pad_id) -> encoder output."""
        real = padding_mask(src, self.config.pad_id)
        hidden, attentions = self.encoder(self._embed(self.src_embed, src), key_padding_mask(real), need_weights)
        return EncoderOutput(hidden, real, attentions)

    def decode(
        self, tgt_in: Tensor, memory: EncoderOutput, need_weights: bool = False, project: bool = True
    ) -> DecoderOutput:
        """Teacher-forced decoder pass: tgt_in [B,T] (starting with bos, right-padded) -> logits [B,T,V].

        Right padding needs no mask of its own: the causal mask already hides later (padding) positions from
        every real position. `project=False` skips the final linear (a trainer can then project only the
        non-padding positions with `project`).
        """
        x = self._embed(self.tgt_embed, tgt_in)
        hidden, self_att, cross_att = self.decoder(x, Memory(memory.hidden, memory.mask), None, need_weights)
        return DecoderOutput(self.project(hidden) if project else None, hidden, self_att, cross_att)

    def forward(self, src: Tensor, tgt_in: Tensor, select: Tensor | None = None, project: bool = True) -> Tensor:
        """Logits [B,T,V] for every target position given source and shifted-right target (3.1).

        With `select` (bool [B,T], e.g. the non-padding targets) only the selected positions go through the
        final linear: logits [M,V] in row-major order of `select`, M = select.sum(). Padding then costs nothing
        in the vocabulary projection, the largest matrix of a small model. `project=False` (with `select`)
        returns the selected decoder states [M, d_model] instead, for a loss that applies the final linear
        itself (`output_weight`, `final_logits_bias`).
        """
        out = self.decode(tgt_in, self.encode(src), project=select is None)
        if select is None:
            return out.logits
        return self.project(out.hidden[select]) if project else out.hidden[select]

    def log_probs(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        return F.log_softmax(self.forward(src, tgt_in).float(), dim=-1)

    def init_cache(self, memory: EncoderOutput, capacity: int = 64, group: int = 1) -> KVCache:
        """A cache for incremental decoding of `memory`'s sentences with `group` rows (beams) per sentence,
        sentence-major; buffers grow past `capacity` positions as needed."""
        return self.decoder.init_cache(memory.hidden, memory.mask, capacity, group)

    def step(self, tokens: Tensor, cache: KVCache, need_weights: bool = False) -> StepOutput:
        """Decode the next position(s) incrementally: tokens [B] (one per row) or [B,t]; positions continue
        from `cache.length`. The same function as `decode` over the whole prefix, for the new positions."""
        if tokens.dim() == 1:
            tokens = tokens[:, None]  # [B] -> [B,1]
        x = self._embed(self.tgt_embed, tokens, start=cache.length)
        hidden, self_att, cross_att = self.decoder(x, Memory(None, cache.memory_mask), cache, need_weights)
        return StepOutput(self.project(hidden), cache, self_att, cross_att)

    # --- bookkeeping ---------------------------------------------------------------------------------------

    def num_parameters(self, embeddings: bool = True) -> int:
        """Distinct parameters (tied matrices counted once); optionally without embeddings and positions."""
        seen: set[int] = set()
        total = 0
        skip = set()
        if not embeddings:
            skip = {id(self.src_embed.weight), id(self.tgt_embed.weight), id(self.output_weight())}
            skip |= {id(p) for p in self.positions.parameters()}
        for p in self.parameters():
            if id(p) not in seen and id(p) not in skip:
                seen.add(id(p))
                total += p.numel()
        return total

    @staticmethod
    def count_parameters(config: ModelConfig) -> int:
        """`num_parameters()` of a model of this configuration, built on the meta device (no memory, no time):
        also the count of a model whose layers a fast path replaced (int8 packs its weights out of parameters)."""
        with torch.device("meta"):
            return Transformer(config).num_parameters()

    def flops_per_token(self, src_len: int = 32, tgt_len: int = 32) -> dict[str, float]:
        """Forward FLOPs (2 per multiply-add) per source and per target token at the given lengths."""
        c = self.config
        hk, hv = c.h * c.d_k, c.h * c.d_v
        attn_proj = 2 * c.d_model * (2 * hk + hv) + 2 * hv * c.d_model
        ffn = 2 * 2 * c.d_model * c.d_ff
        encoder = c.N * (attn_proj + 2 * src_len * (hk + hv) + ffn)  # QK^T and (weights)V over S keys
        self_attn = attn_proj + 2 * ((tgt_len + 1) / 2) * (hk + hv)  # causal: on average (T+1)/2 keys
        cross_attn = attn_proj + 2 * src_len * (hk + hv)
        decoder = c.decoder_layers * (self_attn + cross_attn + ffn) + 2 * c.d_model * c.tgt_vocab_size
        return {"encoder_per_source_token": float(encoder), "decoder_per_target_token": float(decoder)}

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, map_location: str | torch.device = "cpu") -> Transformer:
        from aiayn.model.pretrained import load_model

        return load_model(cls, model_dir, map_location)

    def save_pretrained(self, model_dir: str | Path) -> Path:
        from aiayn.model.pretrained import save_model

        return save_model(self, model_dir)
