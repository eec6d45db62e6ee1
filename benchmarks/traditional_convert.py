"""Write the Traditional Chinese dev sets of ``benchmarks/data/tool-search/crosslingual/``: the
Chinese questions of ``acebench/zh``, ``crosslingual/zh-acebench-en`` and
``crosslingual/zh-bfcl-v4`` converted with OpenCC's ``s2twp`` (Taiwan characters, phrases and
vocabulary: 软件 -> 軟體, 设置 -> 設定, 文件 -> 檔案), over the same catalogues (simplified Chinese
tools for the first, English for the others).

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
        link = out / "tools.jsonl"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(catalogue, out))
        print(f"{written}: {len(lines)} questions over {os.path.relpath(catalogue, data)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT / "benchmarks/data/tool-search")
    convert(parser.parse_args().data)


if __name__ == "__main__":
    main()
