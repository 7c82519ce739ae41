"""Several models decoded as one (an ensemble; not in the paper, whose Table 2 compares against ensembles).

At every step each member reads the same source and prefix with its own encoder output and KV cache, and the
ensemble's next-token distribution is the mean of the members' probabilities (`DecodeConfig.ensemble_mean`
"arithmetic", the default),

    log P(y | prefix, x) = log( (1/M) * sum_m P_m(y | prefix, x) )        (logsumexp over m, minus log M)

as fairseq's `EnsembleModel` combines them, or their renormalised geometric mean ("geometric"), a product of
experts as Marian and OpenNMT-py combine members (the mean of the log-probabilities), here normalised again,

    log P(y | prefix, x) = log_softmax_y( (1/M) * sum_m log P_m(y | prefix, x) ).

Every search of `aiayn.decoding` takes an `Ensemble` where it takes a
`Transformer`: it sees one model whose step returns these log-probabilities (already normalised, so the search's
own log-softmax leaves them as they are), and the cross-attention weights averaged over the members.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model import EncoderOutput, Transformer

# What the members must agree on: they read and write the same ids.
SHARED_FIELDS = ("src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id", "unk_id", "decoder_start")


class Ensemble(nn.Module):
    """`members` decoded together; `config` is the first member's (the shared ids and vocabularies), with
    learned positions limited to the shortest member table when any member has one."""

    def __init__(self, members: Sequence[Transformer]) -> None:
        super().__init__()
        if len(members) == 0:
            raise ValueError("an ensemble needs at least one model")
        first = members[0].config
        for i, member in enumerate(members[1:], start=2):
            for name in SHARED_FIELDS:
                mine, theirs = getattr(member.config, name), getattr(first, name)
                if mine != theirs:
                    raise ValueError(
                        f"model {i} of the ensemble has {name}={mine!r} but model 1 has {theirs!r}; the models of "
                        "an ensemble must share their vocabularies and special tokens"
                    )
        self.members = nn.ModuleList(members)
        self.training = any(m.training for m in members)  # in eval mode when every member is (`.eval()` sets all)
        learned = [m.config.max_positions for m in members if m.config.positional == "learned"]
        self.config: ModelConfig = first
        if learned:
            self.config = replace(first, positional="learned", max_positions=min(learned))


@dataclass
class EnsembleMemory:
    """Each member's encoder output for the same sources; `mask` [B,S] (True at real tokens) is shared."""

    outputs: list[EncoderOutput]

    @property
    def mask(self) -> Tensor:
        return self.outputs[0].mask

    @property
    def hidden(self) -> Tensor:  # the first member's: searches read only its dtype and device
        return self.outputs[0].hidden


class EnsembleDecoderState:
    """The decoder-state protocol of `aiayn.decoding.state` over one state per member."""

    def __init__(self, states: Sequence, mean: str = "arithmetic") -> None:
        if mean not in ("arithmetic", "geometric"):
            raise ValueError(f"an ensemble's mean is 'arithmetic' or 'geometric', not {mean!r}")
        self.states = list(states)
        self.mean = mean
        self.log_m = math.log(len(self.states))

    def step(self, tokens: Tensor) -> tuple[Tensor, Tensor | None]:
        """-> (the ensemble's next-token log-probabilities [R,V], the members' mean cross-attention [R,S] or None)."""
        outputs = [state.step(tokens) for state in self.states]
        if len(outputs) == 1:  # one member: its own logits, so the search is the model's own to the bit
            return outputs[0]
        lprobs = torch.stack([torch.log_softmax(logits.float(), dim=-1) for logits, _ in outputs])  # [M,R,V]
        weights = [w for _, w in outputs if w is not None]
        mean_weights = torch.stack([w.float() for w in weights]).mean(dim=0) if weights else None
        if self.mean == "geometric":
            return torch.log_softmax(lprobs.mean(dim=0), dim=-1), mean_weights
        return torch.logsumexp(lprobs, dim=0) - self.log_m, mean_weights

    def reorder(self, rows: Tensor, source_changed: bool) -> None:
        for state in self.states:
            state.reorder(rows, source_changed)

    def expand(self, copies: int) -> None:
        for state in self.states:
            state.expand(copies)


__all__ = ["SHARED_FIELDS", "Ensemble", "EnsembleDecoderState", "EnsembleMemory"]
