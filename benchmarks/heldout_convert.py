"""Convert public tool-retrieval data from sources other than the dev sets (BFCL, ACEBench)
into the format of ``benchmarks/data/tool-search`` (``tools.jsonl`` + ``queries.jsonl``), to
check whether the tool-search defaults tuned on the dev sets hold elsewhere
(``docs/benchmarks.md``, "Outside the dev sets").

    python benchmarks/heldout_convert.py metatool   SNAPSHOT OUT_DIR [--every 7]
    python benchmarks/heldout_convert.py seal-tools SNAPSHOT OUT_DIR
    python benchmarks/heldout_convert.py ultratool  SNAPSHOT OUT_DIR --lang zh|en
    python benchmarks/heldout_convert.py restbench  SNAPSHOT OUT_DIR

``SNAPSHOT`` is the source repository: a git directory (a bare clone, or the ``fetch`` tool's
``/work/.mirror/<owner>+<name>/repo``; files are read from ``HEAD``) or a checked-out work tree.

- ``metatool`` (HowieHwong/MetaTool, MIT): ChatGPT plugins. Catalogue: the 199 tools of
  ``dataset/plugin_des.json`` (descriptions only, no parameters). Queries: every ``--every``-th
  single-tool query of ``dataset/data/all_clean_data.csv`` (20,614 rows; a query labelled with
  two different tools is dropped, a repeated one kept once) and all 497 two-tool queries of
  ``dataset/data/multi_tool_query_golden.json``.
- ``seal-tools`` (fairyshine/Seal-Tools, Apache-2.0): self-instructed APIs. Catalogue: the
  4,076 tools of ``Seal-Tools_Dataset/tool.jsonl``, ``category`` = their ``field`` (2,276 fields,
  most of 1-4 tools). Queries: ``test_in_domain.jsonl`` and ``test_out_domain.jsonl`` (1,354;
  gold = every API of ``calling``, deduplicated).
- ``ultratool`` (JoeYing1019/UltraTool): Chinese (``--lang zh``) or English queries, same
  ids in both. Each of the 1,000 questions of ``data/<lang>-dataset/test.json`` lists the tools
  its plan calls; the catalogue is their union (436 tools, every name with one definition);
  gold = the tools the plan calls, in order. Tools have no category.
- ``restbench`` (Yifan-Song793/RestGPT, MIT): real REST APIs. Catalogue: every operation of
  ``specs/tmdb_oas.json`` (54) and ``specs/spotify_oas.json`` (40), named from method and path
  (``GET /movie/{movie_id}/credits`` -> ``tmdb.get_movie_movie_id_credits``, the original in
  ``original_name``), ``category`` = ``tmdb`` or ``spotify``. Queries: ``datasets/tmdb.json``
  and ``datasets/spotify.json`` (157; gold = the solution's endpoints).

Parameters become JSON Schema objects (Python type names mapped: ``str`` -> ``string``, ...);
names outside ``[a-zA-Z0-9_.-]`` are rewritten with the source's name in ``original_name``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

NAME = re.compile(r"[a-zA-Z0-9_.-]+")
TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "array": "array",
    "tuple": "array",
    "dict": "object",
    "object": "object",
    "any": None,
}


class Snapshot:
    """Files of a source repository: a git directory (read at HEAD) or a work tree."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.git = (self.path / "HEAD").is_file() and (self.path / "objects").is_dir()
        if not self.git and not self.path.is_dir():
            raise SystemExit(f"{self.path} is neither a git directory nor a directory")

    def read(self, name: str) -> str:
        if not self.git:
            return (self.path / name).read_text(encoding="utf-8")
        done = subprocess.run(
            ["git", f"--git-dir={self.path}", "show", f"HEAD:{name}"],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{self.path}: cannot read {name}: {done.stderr.decode().strip()}")
        return done.stdout.decode("utf-8")

    def commit(self) -> str:
        if not self.git:
            return "unknown (work tree)"
        done = subprocess.run(
            ["git", f"--git-dir={self.path}", "rev-parse", "HEAD"],
            capture_output=True,
            check=True,
        )
        return done.stdout.decode().strip()


def safe_name(name: str) -> str:
    """``name`` with every run of characters outside ``[a-zA-Z0-9_.-]`` replaced by ``_``."""
    if NAME.fullmatch(name):
        return name
    return re.sub(r"[^a-zA-Z0-9_.-]+", "_", name).strip("_") or "tool"


def json_schema_type(value: Any) -> Any:
    if isinstance(value, str):
        return TYPES.get(value.strip().lower(), "string")
    return value


def property_schema(spec: Any) -> dict[str, Any]:
    if not isinstance(spec, dict):
        return {"description": str(spec)}
    out = dict(spec)
    if "type" in out:
        mapped = json_schema_type(out["type"])
        if mapped is None:
            del out["type"]
        else:
            out["type"] = mapped
    if "examples" in out and not isinstance(out["examples"], list):  # JSON Schema: an array
        out["examples"] = [out["examples"]]
    return out


def tool_row(
    name: str,
    description: str,
    parameters: dict[str, Any] | None,
    category: str | None,
    original: str | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": name,
        "description": " ".join(description.split()),
        "parameters": parameters,
        "category": category,
    }
    if original is not None and original != name:
        row["original_name"] = original
    return row


def write(
    out: Path,
    tools: Sequence[dict[str, Any]],
    queries: Sequence[dict[str, Any]],
    readme: str,
) -> None:
    names = Counter(tool["name"] for tool in tools)
    repeated = [name for name, count in names.items() if count > 1]
    if repeated:
        raise SystemExit(f"tool names used twice: {repeated[:5]}")
    for tool in tools:
        if not NAME.fullmatch(tool["name"]):
            raise SystemExit(f"bad tool name {tool['name']!r}")
    ids = Counter(query["id"] for query in queries)
    if any(count > 1 for count in ids.values()):
        raise SystemExit("query ids used twice")
    for query in queries:
        unknown = [name for name in query["gold"] if name not in names]
        if unknown or not query["gold"]:
            raise SystemExit(f"{query['id']}: gold {query['gold']} not in the catalogue")
    try:  # the format promises valid schemas; jsonschema is optional here
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover
        Draft202012Validator = None
    if Draft202012Validator is not None:
        for tool in tools:
            if tool["parameters"] is not None:
                Draft202012Validator.check_schema(tool["parameters"])
    out.mkdir(parents=True, exist_ok=True)
    for file, rows in (("tools.jsonl", tools), ("queries.jsonl", queries)):
        with (out / file).open("w", encoding="utf-8") as lines:
            for row in rows:
                lines.write(json.dumps(row, ensure_ascii=False) + "\n")
    multi = sum(1 for query in queries if len(query["gold"]) > 1)
    langs = Counter(query.get("lang") for query in queries)
    (out / "README.md").write_text(
        readme.rstrip()
        + f"\n\n{len(tools)} tools, {len(queries)} queries ({multi} with 2+ gold tools), "
        + f"languages {dict(langs)}. Written by benchmarks/heldout_convert.py.\n",
        encoding="utf-8",
    )
    print(f"{out}: {len(tools)} tools, {len(queries)} queries ({multi} multi-tool)")


def provenance(source: Snapshot, repo: str, files: Iterable[str]) -> str:
    return (
        f"Source: https://github.com/{repo} at commit {source.commit()}, files "
        + ", ".join(f"`{name}`" for name in files)
        + "."
    )


def metatool(
    source: Snapshot, every: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    descriptions = json.loads(source.read("dataset/plugin_des.json"))
    renamed = {name: safe_name(name) for name in descriptions}
    tools = [
        tool_row(renamed[name], text, None, None, original=name)
        for name, text in descriptions.items()
    ]
    rows = list(csv.DictReader(io.StringIO(source.read("dataset/data/all_clean_data.csv"))))
    labels: dict[str, set[str]] = {}
    for row in rows:
        labels.setdefault(row["Query"].strip(), set()).add(row["Tool"])
    queries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, row in enumerate(rows):
        text = row["Query"].strip()
        if number % every or len(labels[text]) > 1 or text in seen:
            continue
        seen.add(text)
        queries.append(
            {
                "id": f"single_{number}",
                "query": text,
                "gold": [renamed[row["Tool"]]],
                "lang": "en",
                "category": "single",
            }
        )
    for number, item in enumerate(
        json.loads(source.read("dataset/data/multi_tool_query_golden.json"))
    ):
        queries.append(
            {
                "id": f"multi_{number}",
                "query": item["query"].strip(),
                "gold": list(dict.fromkeys(renamed[name] for name in item["tool"])),
                "lang": "en",
                "category": "multi",
            }
        )
    readme = (
        "# MetaTool (ToolE), converted for tool search\n\n"
        + provenance(
            source,
            "HowieHwong/MetaTool",
            [
                "dataset/plugin_des.json",
                "dataset/data/all_clean_data.csv",
                "dataset/data/multi_tool_query_golden.json",
            ],
        )
        + f"\n\nSingle-tool queries: every {every}th row of the CSV (query labelled with two "
        "tools dropped, repeats kept once); multi-tool: all. `category` = single / multi. "
        "Tools are ChatGPT plugins with one description each and no parameters; `PDF&URLTool` "
        "is `PDF_URLTool`."
    )
    return tools, queries, readme


def seal_parameters(api: dict[str, Any]) -> dict[str, Any]:
    properties = {
        name: property_schema(spec) for name, spec in (api.get("parameters") or {}).items()
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name in api.get("required") or [] if name in properties]
    if required:
        schema["required"] = required
    return schema


def seal_tools(source: Snapshot) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    base = "Seal-Tools_Dataset"
    tools = []
    renamed: dict[str, str] = {}
    for line in source.read(f"{base}/tool.jsonl").splitlines():
        if not line.strip():
            continue
        api = json.loads(line)
        renamed[api["api_name"]] = safe_name(api["api_name"])
        tools.append(
            tool_row(
                renamed[api["api_name"]],
                api.get("api_description") or "",
                seal_parameters(api),
                api.get("field"),
                original=api["api_name"],
            )
        )
    queries = []
    for split in ("test_in_domain", "test_out_domain"):
        for line in source.read(f"{base}/{split}.jsonl").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            gold = list(dict.fromkeys(renamed[call["api"]] for call in item["calling"]))
            queries.append(
                {
                    "id": item["id"],
                    "query": item["query"].strip(),
                    "gold": gold,
                    "lang": "en",
                    "category": item["id"].split("-")[1],  # easy / difficult
                    "split": split,
                }
            )
    readme = (
        "# Seal-Tools, converted for tool search\n\n"
        + provenance(
            source,
            "fairyshine/Seal-Tools",
            [f"{base}/tool.jsonl", f"{base}/test_in_domain.jsonl", f"{base}/test_out_domain.jsonl"],
        )
        + "\n\n`category` of a tool = its `field`; of a query = easy / difficult; `split` = "
        "test_in_domain / test_out_domain. `requestFirst Aid Assistance` is "
        "`requestFirst_Aid_Assistance`."
    )
    return tools, queries, readme


CALL = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")


def ultratool(
    source: Snapshot, lang: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    folder = {"zh": "Chinese-dataset", "en": "English-dataset"}[lang]
    path = f"data/{folder}/test.json"
    tools: dict[str, dict[str, Any]] = {}
    queries = []
    for number, line in enumerate(source.read(path).splitlines()):
        if not line.strip():
            continue
        item = json.loads(line)
        offered: dict[str, str] = {}
        for tool in item["tools"]:
            name = safe_name(tool["name"])
            row = tool_row(
                name,
                tool.get("description") or "",
                tool.get("arguments") if isinstance(tool.get("arguments"), dict) else None,
                None,
                original=tool["name"],
            )
            if name in tools and tools[name] != row:
                raise SystemExit(f"{path}: {name} has two definitions")
            tools[name] = row
            offered[tool["name"]] = name
        called = []
        for step in item["plan"]:
            match = CALL.match(step.get("tool") or "")
            if match and match.group(1) in offered:
                called.append(offered[match.group(1)])
        queries.append(
            {
                "id": f"ultratool_{number}",
                "query": item["question"].strip(),
                "gold": list(dict.fromkeys(called)) or list(offered.values()),
                "lang": lang,
                "category": item.get("domain"),
            }
        )
    readme = (
        f"# UltraTool ({lang}), converted for tool search\n\n"
        + provenance(source, "JoeYing1019/UltraTool", [path])
        + "\n\n`category` of a query = the source's `domain`; tools have none. The same ids "
        "are the same questions in `zh` and `en`."
    )
    return list(tools.values()), queries, readme


METHODS = ("get", "post", "put", "delete", "patch")


def _resolve(spec: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def _plain_schema(spec: dict[str, Any], node: Any, depth: int = 0) -> dict[str, Any]:
    """An OpenAPI parameter schema without ``$ref``s (nested ones dropped past depth 2)."""
    node = _resolve(spec, node)
    if not isinstance(node, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("type", "description", "enum", "default", "format"):
            out[key] = value
        elif key == "items" and depth < 2:
            out[key] = _plain_schema(spec, value, depth + 1)
    return out


TYPOS = {"GET /track/{id}": "GET /tracks/{id}"}  # spotify query 39's solution


def _shape(endpoint: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", endpoint)


def restbench(source: Snapshot) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    tools = []
    names: dict[tuple[str, str], str] = {}  # (api, "GET /path") -> tool name
    for api in ("tmdb", "spotify"):
        spec = json.loads(source.read(f"specs/{api}_oas.json"))
        for path, item in spec["paths"].items():
            shared = item.get("parameters") or []
            for method in METHODS:
                if method not in item:
                    continue
                operation = item[method]
                endpoint = f"{method.upper()} {path}"
                name = f"{api}." + safe_name(
                    method + "_" + re.sub(r"[{}]", "", path).strip("/").replace("/", "_")
                )
                names[(api, endpoint)] = name
                properties: dict[str, Any] = {}
                required = []
                for parameter in shared + (operation.get("parameters") or []):
                    parameter = _resolve(spec, parameter)
                    if parameter.get("in") not in ("path", "query"):
                        continue
                    schema = _plain_schema(spec, parameter.get("schema") or {})
                    if parameter.get("description"):
                        schema["description"] = " ".join(parameter["description"].split())
                    properties[parameter["name"]] = schema
                    if parameter.get("required"):
                        required.append(parameter["name"])
                body = _resolve(spec, operation.get("requestBody") or {})
                content = (body.get("content") or {}).get("application/json") or {}
                for field, schema in (
                    _resolve(spec, content.get("schema") or {}).get("properties") or {}
                ).items():
                    properties.setdefault(field, _plain_schema(spec, schema))
                parameters: dict[str, Any] = {"type": "object", "properties": properties}
                if required:
                    parameters["required"] = list(dict.fromkeys(required))
                summary = " ".join((operation.get("summary") or "").split())
                detail = " ".join((operation.get("description") or "").split())
                text = summary if not detail or detail == summary else f"{summary}. {detail}"
                tools.append(
                    tool_row(name, text.strip(". ") or endpoint, parameters, api, endpoint)
                )
    shapes = {(api, _shape(endpoint)): name for (api, endpoint), name in names.items()}
    queries = []
    for api in ("tmdb", "spotify"):
        for number, item in enumerate(json.loads(source.read(f"datasets/{api}.json"))):
            gold = []
            for endpoint in item["solution"]:
                endpoint = TYPOS.get(" ".join(endpoint.split()), " ".join(endpoint.split()))
                # one TMDB solution says /person/{movie_id}/...: match with placeholders blanked
                solution = names.get((api, endpoint)) or shapes.get((api, _shape(endpoint)))
                if solution is None:
                    raise SystemExit(f"{api} query {number}: unknown endpoint {endpoint!r}")
                gold.append(solution)
            queries.append(
                {
                    "id": f"{api}_{number}",
                    "query": item["query"].strip(),
                    "gold": list(dict.fromkeys(gold)),
                    "lang": "en",
                    "category": api,
                }
            )
    readme = (
        "# RestBench (TMDB + Spotify), converted for tool search\n\n"
        + provenance(
            source,
            "Yifan-Song793/RestGPT",
            [
                "specs/tmdb_oas.json",
                "specs/spotify_oas.json",
                "datasets/tmdb.json",
                "datasets/spotify.json",
            ],
        )
        + "\n\nOne catalogue for both APIs (every operation of both specs); a tool's "
        "`original_name` is its `METHOD /path`, its `category` the API. Parameters: path and "
        "query parameters plus JSON body fields, `$ref`s resolved."
    )
    return tools, queries, readme


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", choices=("metatool", "seal-tools", "ultratool", "restbench"))
    parser.add_argument("snapshot", help="the source repository (git directory or work tree)")
    parser.add_argument("out", help="directory to write tools.jsonl, queries.jsonl, README.md")
    parser.add_argument(
        "--every", type=int, default=7, help="metatool: keep every n-th single-tool query"
    )
    parser.add_argument("--lang", choices=("zh", "en"), default="zh", help="ultratool: language")
    args = parser.parse_args(argv)
    source = Snapshot(args.snapshot)
    if args.source == "metatool":
        converted = metatool(source, args.every)
    elif args.source == "seal-tools":
        converted = seal_tools(source)
    elif args.source == "ultratool":
        converted = ultratool(source, args.lang)
    else:
        converted = restbench(source)
    write(Path(args.out), *converted)


if __name__ == "__main__":
    main()
