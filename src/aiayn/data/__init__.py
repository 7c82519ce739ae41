"""Data pipeline: joint BPE tokenizer, corpus checks, binarized datasets and token-budget batching (5.1).

    aiayn prepare --src-lang en --tgt-lang de --train T --valid V --test X --vocab-size 8000 --out data-bin

writes a binarized directory (`aiayn.data.binarized`); training reads it with `ParallelDataset` and
`TokenBudgetBatches`, and pads batches with `collate`.
"""

from aiayn.data.batching import Batch, TokenBudgetBatches, collate, load_batch, make_source, make_target
from aiayn.data.binarized import FORMAT_NAME, FORMAT_VERSION, ParallelDataset, available_splits, load_meta
from aiayn.data.bpe_dropout import BPEDropout, EpochPairs
from aiayn.data.corpus import CorpusError, check_parallel, check_text_file
from aiayn.data.download import ensure_multi30k, resolve_data_dir
from aiayn.data.prepare import prepare
from aiayn.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, TOKENIZER_FILENAME, UNK_ID, Tokenizer

__all__ = [
    "BOS_ID",
    "BPEDropout",
    "Batch",
    "CorpusError",
    "EOS_ID",
    "EpochPairs",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "PAD_ID",
    "ParallelDataset",
    "TOKENIZER_FILENAME",
    "TokenBudgetBatches",
    "Tokenizer",
    "UNK_ID",
    "available_splits",
    "check_parallel",
    "check_text_file",
    "collate",
    "ensure_multi30k",
    "load_batch",
    "load_meta",
    "make_source",
    "make_target",
    "prepare",
    "resolve_data_dir",
]
