"""Write the Traditional Chinese dev sets of ``benchmarks/data/tool-search/crosslingual/``: the
Chinese questions of ``acebench/zh``, ``crosslingual/zh-acebench-en`` and
``crosslingual/zh-bfcl-v4`` converted with OpenCC's ``s2twp`` (Taiwan characters, phrases and
vocabulary: 软件 -> 軟體, 设置 -> 設定, 文件 -> 檔案), over the same catalogues (simplified Chinese
tools for the first, English for the others); and ``acebench/zh``'s catalogue converted the same
way (every text but the tools' and parameters' names), under its questions in Traditional
(``zh-tw-tools-hant``) and as written in Simplified (``zh-tw-tools-hans``).

    .venv/bin/pip install 'opencc>=1.4.2'   # the bench extra
    .venv/bin/python benchmarks/traditional_convert.py [--data benchmarks/data/tool-search]

OpenCC makes the data only: the library never uses it (a converter that both made a test set
and folded its questions back at search time would be measured against itself).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import opencc

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "s2twp"
# (written set, source set, catalogue the written set links to: relative to the source set)
SETS = (
    ("crosslingual/zh-tw-acebench-zh", "acebench/zh", "tools.jsonl"),
    (
        "crosslingual/zh-tw-acebench-en",
        "crosslingual/zh-acebench-en",
        "../../acebench/en/tools.jsonl",
    ),
    ("crosslingual/zh-tw-bfcl-v4", "crosslingual/zh-bfcl-v4", "../../bfcl-v4/tools.jsonl"),
)


def convert(data: Path) -> None:
    converter = opencc.OpenCC(CONFIG)
    for written, source, tools in SETS:
        source_dir, out = data / source, data / written
        catalogue = (source_dir / tools).resolve()
        if not catalogue.is_file():
            raise FileNotFoundError(f"{source}: no catalogue at {catalogue}")
        out.mkdir(parents=True, exist_ok=True)
        lines = []
        for raw in (source_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            if not raw.strip():
                continue
            row = json.loads(raw)
            # The simplified question stays beside its conversion, and a translated set's
            # English original (source_id, source_query) as it was.
            converted = {
                "id": f"tw-{row['id']}",
                "query": converter.convert(row["query"]),
                "gold": row["gold"],
                "lang": "zh",
                "script": "Hant",
                "source_set": source,
                "simplified_id": row["id"],
                "simplified_query": row["query"],
            }
            converted.update(
                (key, value) for key, value in row.items() if key not in converted and key != "id"
            )
            lines.append(json.dumps(converted, ensure_ascii=False))
        (out / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        _link(out / "tools.jsonl", catalogue)
        print(f"{written}: {len(lines)} questions over {os.path.relpath(catalogue, data)}")


# (written set with the converted catalogue, the question set it links to), and a second set
# over that catalogue with the other questions.
CATALOGUE = ("crosslingual/zh-tw-tools-hant", "crosslingual/zh-tw-acebench-zh", "acebench/zh")
SIMPLIFIED_QUESTIONS = ("crosslingual/zh-tw-tools-hans", "acebench/zh")
# What a tool's JSON holds that is no text to convert: identifiers and JSON Schema keywords.
_NOT_TEXT = {"name", "original_name", "type", "required", "format", "pattern"}


def _converted(value: Any, converter: opencc.OpenCC, key: str | None = None) -> Any:
    """A tool's JSON with its texts converted; keys (parameter names) and identifiers kept."""
    if isinstance(value, dict):
        return {k: _converted(v, converter, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_converted(v, converter, key) for v in value]
    if isinstance(value, str) and key not in _NOT_TEXT:
        return converter.convert(value)
    return value


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


def convert_catalogue(data: Path) -> None:
    converter = opencc.OpenCC(CONFIG)
    written, questions, source = CATALOGUE
    out = data / written
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(_converted(json.loads(raw), converter), ensure_ascii=False)
        for raw in (data / source / "tools.jsonl").read_text(encoding="utf-8").splitlines()
        if raw.strip()
    ]
    (out / "tools.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _link(out / "queries.jsonl", data / questions / "queries.jsonl")
    other, other_questions = SIMPLIFIED_QUESTIONS
    (data / other).mkdir(parents=True, exist_ok=True)
    _link(data / other / "tools.jsonl", out / "tools.jsonl")
    _link(data / other / "queries.jsonl", data / other_questions / "queries.jsonl")
    print(f"{written}: {len(lines)} tools of {source}, the questions of {questions}")
    print(f"{other}: the same tools, the questions of {other_questions}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT / "benchmarks/data/tool-search")
    data = parser.parse_args().data
    convert(data)
    convert_catalogue(data)


if __name__ == "__main__":
    main()
