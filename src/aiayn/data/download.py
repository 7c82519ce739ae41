"""Where corpora live, and fetching Multi30k (Elliott et al., 2016) when it is not there yet.

The data directory is, in order: an explicit argument (a command-line flag), the environment variable
`AIAYN_DATA_DIR`, `../shared/data` relative to the working directory if it exists, else
`~/.cache/aiayn/data`. Multi30k lives in `<data dir>/multi30k/{train,val,test2016}.{en,de,fr,cs}`.

Files come from the public repository multi30k/dataset at a pinned commit (`data/task1/raw/*.gz`,
decompressed byte for byte) and are checked against SHA-256 sums of the decompressed text, so a
changed upstream file or a corrupted download is an error, never silently different data.
Multi30k is for non-commercial research and educational use (see the dataset's README).
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from aiayn.data.corpus import CorpusError
from aiayn.io import fsync_dir, readable, sha256_file

DATA_DIR_ENV = "AIAYN_DATA_DIR"
MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
MULTI30K_URL = f"https://raw.githubusercontent.com/multi30k/dataset/{MULTI30K_COMMIT}/data/task1/raw/{{name}}.gz"
MULTI30K_SPLITS = {
    "train": "train",
    "val": "val",
    "test2016": "test_2016_flickr",
}  # local name: upstream name
MULTI30K_LANGS = ("en", "de", "fr", "cs")

# SHA-256 of the decompressed files, e.g. multi30k/train.en.
MULTI30K_SHA256 = {
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "train.fr": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
    "train.cs": "2be68b38c8d586ff4f54eb13cc6e1baaaa053695b3f070d3038303a47f2268da",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "val.fr": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
    "val.cs": "d53827e469b0a1ca8d57e9e26b2b64c4bc4b33f5479c7b03ae87ae5c882c3e33",
    "test2016.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "test2016.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test2016.fr": "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6",
    "test2016.cs": "45adb85f688de8407fddcbe1b36dca15d12aab868149b337e2576f2d6d2ff8d8",
}


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """The data directory: the argument, else $AIAYN_DATA_DIR, else ../shared/data, else the cache."""
    if data_dir:
        return Path(data_dir).expanduser()
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV]).expanduser()
    shared = Path.cwd().parent / "shared" / "data"
    if shared.is_dir():
        return shared
    return Path.home() / ".cache" / "aiayn" / "data"


def verify_sha256(path: str | Path, expected: str) -> None:
    """Raise `CorpusError` naming the file if its SHA-256 is not `expected`."""
    actual = sha256_file(path)
    if actual != expected:
        raise CorpusError(
            f"{path}: SHA-256 {actual} does not match the expected {expected}; the file is corrupt or a "
            "different version (delete it to download it again)"
        )


def ensure_multi30k(
    data_dir: str | Path | None = None,
    langs: Sequence[str] = ("en", "de"),
    download: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Return `<data dir>/multi30k`, downloading any missing train/val/test2016 file of `langs`.

    Present files are checked against the recorded SHA-256 sums (a mismatch is a `CorpusError`; the file is
    left alone). With `download=False` a missing file is an error instead.
    """
    folder = resolve_data_dir(data_dir) / "multi30k"
    unknown = sorted(set(langs) - set(MULTI30K_LANGS))
    if unknown:
        raise ValueError(f"Multi30k has no language(s) {unknown}; choose from {', '.join(MULTI30K_LANGS)}")
    for split, upstream in MULTI30K_SPLITS.items():
        for lang in langs:
            name = f"{split}.{lang}"
            path = folder / name
            if not path.exists():
                if not download:
                    raise CorpusError(f"{path}: missing (Multi30k not downloaded; allow download to fetch it)")
                _download_gz(MULTI30K_URL.format(name=f"{upstream}.{lang}"), path, MULTI30K_SHA256[name], timeout)
            verify_sha256(path, MULTI30K_SHA256[name])
    return folder


def _download_gz(url: str, path: Path, sha256: str, timeout: float) -> None:
    """Fetch a .gz file, decompress it, check it, and move it into place (nothing is left on failure)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(handle, "wb") as sink:
            try:
                with (
                    urllib.request.urlopen(url, timeout=timeout) as response,
                    gzip.GzipFile(fileobj=response) as gz,
                ):
                    shutil.copyfileobj(gz, sink)
            except OSError as error:  # URLError, timeouts and bad gzip data are all OSErrors
                raise OSError(f"downloading {url} failed: {error}") from None
            sink.flush()
            os.fsync(sink.fileno())
        readable(tmp)
        actual = sha256_file(tmp)
        if actual != sha256:
            raise CorpusError(f"{url}: downloaded text has SHA-256 {actual}, expected {sha256}; not saved")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


__all__ = [
    "DATA_DIR_ENV",
    "MULTI30K_SHA256",
    "ensure_multi30k",
    "resolve_data_dir",
    "verify_sha256",
]
