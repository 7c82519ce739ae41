"""Which language pair a model directory translates, and the names LibreTranslate's `/languages` shows.

A model directory's config.json may say its pair (`"languages": {"source": "en", "target": "de"}`, or
`"src_lang"`/`"tgt_lang"` at the top, under `"data"` or under `"checkpoint"`); otherwise the pair is given on the
command line as `--model en-de=DIR`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
    "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French", "hi": "Hindi", "hu": "Hungarian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "nl": "Dutch",
    "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "tr": "Turkish",
    "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip
CODE = re.compile(r"^[a-z]{2,3}([_-][A-Za-z0-9]{2,8})?$")


def language_name(code: str) -> str:
    return NAMES.get(code.split("-")[0].split("_")[0], code)


def parse_model_spec(spec: str) -> tuple[str | None, Path]:
    """`DIR` or `SRC-TGT=DIR` -> (pair or None, directory)."""
    if "=" in spec:
        pair, _, path = spec.partition("=")
        source, sep, target = pair.partition("-")
        if not sep or not CODE.match(source) or not CODE.match(target):
            raise ValueError(f"--model {spec}: expected DIR or SRC-TGT=DIR, e.g. en-de=runs/demo/checkpoint-best")
        return f"{source}-{target}", Path(path)
    return None, Path(spec)


def pair_from_metadata(model_dir: Path) -> str | None:
    """`SRC-TGT` from config.json's metadata, or None when it does not say."""
    try:
        document = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    places = [document, document.get("data"), document.get("checkpoint")]
    languages = document.get("languages")
    if isinstance(languages, dict):
        places.insert(0, {"src_lang": languages.get("source"), "tgt_lang": languages.get("target")})
    for place in places:
        if isinstance(place, dict):
            source, target = place.get("src_lang"), place.get("tgt_lang")
            if isinstance(source, str) and isinstance(target, str) and CODE.match(source) and CODE.match(target):
                return f"{source}-{target}"
    return None


__all__ = ["NAMES", "language_name", "pair_from_metadata", "parse_model_spec"]
