"""Models made elsewhere, and ours where theirs run (docs/INTEROP.md).

    import_marian(SRC, OUT)            Hugging Face MarianMTModel (OPUS-MT) -> aiayn model directory
    export_hf(DIR, OUT)                aiayn model directory -> MarianMTModel directory (transformers)
    export_ctranslate2(DIR, OUT, q)    aiayn model directory -> CTranslate2 model directory

Each refuses what it cannot represent faithfully with an `InteropError` that names the setting. The peers
(transformers, ctranslate2) are optional: `pip install 'aiayn[interop]'`; importing a Marian directory needs
neither.
"""

from aiayn.interop.marian import InteropError, export_hf, import_marian

__all__ = ["InteropError", "export_hf", "import_marian"]
