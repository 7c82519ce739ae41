"""The architecture diagram is drawn from the configuration, not a fixed picture."""

from __future__ import annotations

from pathlib import Path

from aiayn.cli import main
from aiayn.config import preset
from aiayn.visualization.architecture import plot_architecture


def texts(config) -> str:
    fig = plot_architecture(config)
    return "\n".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_numbers_come_from_the_config() -> None:
    base = texts(preset("base"))
    for expected in (
        "Encoder\n6×",
        "Decoder\n6×",
        "d_ff = 2048",
        "h = 8, d_k = 64, d_v = 64",
        "37,000 × 512",
        "Linear  512 → 37,000",
        "Add & Norm",
        "one shared\nembedding matrix",
        "post-norm (3.1)",
        "sinusoidal (3.5)",
        "63,082,496",
    ):
        assert expected in base, expected
    assert "LayerNorm" not in base.replace("Add & Norm", "")
    other = texts(
        preset(
            "tiny",
            N_dec=2,
            norm_first=True,
            share_embeddings=False,
            src_vocab_size=900,
            tgt_vocab_size=1100,
            positional="learned",
        )
    )
    for expected in (
        "Encoder\n4×",
        "Decoder\n2×",
        "d_ff = 512",
        "h = 4, d_k = 32, d_v = 32",
        "900 × 128",
        "1,100 × 128",
        "final LayerNorm (pre-norm)",
        "Add (residual)",
        "learned (Table 3 E)",
    ):
        assert expected in other, expected
    assert "one shared\nembedding matrix" not in other
    assert "tied: pre-softmax" in other
    assert "tied: pre-softmax" not in texts(preset("tiny", tie_output=False))


def test_command_preset_and_model(tmp_path: Path, model_dir: Path) -> None:
    assert main(["visualize", "architecture", "--preset", "big", "--out", str(tmp_path)]) == 0
    assert main(["visualize", "architecture", "--model", str(model_dir), "--out", str(tmp_path)]) == 0
    for name in ("architecture_big.png", "architecture_big.svg", "architecture.png", "architecture.svg"):
        assert (tmp_path / name).stat().st_size > 1000
    svg = (tmp_path / "architecture.svg").read_bytes()
    assert main(["visualize", "architecture", "--model", str(model_dir), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "architecture.svg").read_bytes() == svg
