"""What the documentation names exists: the options of the ``tooluse`` commands it shows, the
``tooluse.…`` attributes it refers to, and the classes and constants it mentions."""

from __future__ import annotations

import builtins
import functools
import importlib
import re
from pathlib import Path

import pytest

from _doc_examples import DOCS, ROOT, command_options
from tooluse.calling._audit import TENANT_ATTRIBUTE
from tooluse.calling._manager import TOOL_APPROVAL, TOOL_APPROVED_BY, TOOL_REPEAT

PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
# benchmarks.md names other frameworks' classes and ONNX Runtime's operators at every turn.
NAMING_PAGES = [page for page in PAGES if page.name != "benchmarks.md"]

# Names the pages mention that are not tooluse's: Python's, pydantic's, the MCP and OpenAI
# SDKs', Spring AI's, and a user's class in an example.
FOREIGN_NAMES = {
    "AliasChoices", "AliasPath", "Annotated", "Field", "TypedDict",  # typing, pydantic
    "ValidationError",
    "Client", "ClientSession", "MCPServer", "Server", "Tool",  # the MCP SDK
    "APIError", "BadRequestError", "InternalServerError",  # the OpenAI SDK
    "DefaultMcpToolNamePrefixGenerator", "MultiQueryExpander",  # Spring AI
    "TranslationQueryTransformer",
    "MyTools",  # an example
}  # fmt: skip


def _prose(page: Path) -> str:
    """The page without its fenced blocks (their backticks would pair with the prose's)."""
    return re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)


def _code_spans(page: Path) -> list[str]:
    return re.findall(r"`([^`]+)`", _prose(page))


def _command_lines(page: Path) -> list[tuple[str, str]]:
    """(command, the rest) of each ``tooluse COMMAND ...`` the page shows, in code spans and
    in the lines of its fenced blocks; ``command`` is ``"mcp serve"`` for a nested one."""
    text = page.read_text(encoding="utf-8")
    shown = _code_spans(page) + [
        line for block in re.findall(r"```.*?```", text, re.S) for line in block.splitlines()
    ]
    found = []
    for line in shown:
        for match in re.finditer(r"\btooluse ([a-z]+)(?: ([a-z]+))?([^#]*)", line):
            command, sub, rest = match.groups()
            if f"{command} {sub}" in NESTED:
                found.append((f"{command} {sub}", rest))
            elif command in TOP_LEVEL:
                found.append((command, f"{sub or ''}{rest}"))
    return found


SPAN_ATTRIBUTES = {TENANT_ATTRIBUTE, TOOL_APPROVAL, TOOL_APPROVED_BY, TOOL_REPEAT}
TOP_LEVEL = {"serve", "chat", "eval", "tools", "search", "demo", "ingest", "bench", "mcp", "audit"}
NESTED = {"bench search", "mcp serve", "mcp tools"}


def test_the_command_list_is_the_cli_s() -> None:
    from tooluse.cli import COMMANDS

    assert {command.name for command in COMMANDS} == TOP_LEVEL


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_options_shown_for_a_command_are_its_options(page: Path) -> None:
    unknown = [
        (command, option)
        for command, rest in _command_lines(page)
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest)
        if option not in command_options(command) | {"--help"}
    ]
    assert unknown == []


def test_the_command_lines_are_found() -> None:
    # The check above passes for a page where no command is found: make sure it reads them.
    commands = {command for page in PAGES for command, _ in _command_lines(page)}
    assert {"serve", "search", "ingest", "mcp serve", "mcp tools", "bench search"} <= commands


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_tooluse_attributes_named_exist(page: Path) -> None:
    missing = []
    for dotted in re.findall(r"\btooluse(?:\.[A-Za-z_]\w*)+", " ".join(_code_spans(page))):
        if dotted == "tooluse.db" or dotted in SPAN_ATTRIBUTES:  # a file's name, span attributes
            continue
        parts = dotted.split(".")
        modules = (i for i in range(len(parts), 0, -1) if _importable(".".join(parts[:i])))
        found: object = importlib.import_module(".".join(parts[: (at := next(modules))]))
        for attribute in parts[at:]:
            found = getattr(found, attribute, None)
        if found is None:
            missing.append(dotted)
    assert missing == []


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@functools.cache
def _tooluse_names() -> frozenset[str]:
    """The names tooluse's modules define (read from the source: importing every module costs
    seconds)."""
    definition = re.compile(r"^\s*(?:async def|def|class)\s+(\w+)|^(\w+)\s*(?::[^=\n]*)?=", re.M)
    return frozenset(
        name
        for source in (ROOT / "src" / "tooluse").rglob("*.py")
        for match in definition.finditer(source.read_text(encoding="utf-8"))
        for name in match.groups()
        if name
    )


@pytest.mark.parametrize("page", NAMING_PAGES, ids=lambda page: page.name)
def test_the_classes_and_constants_named_exist(page: Path) -> None:
    defined = _tooluse_names() | FOREIGN_NAMES
    mentioned = {
        match.group(1)
        for span in _code_spans(page)
        if (match := re.fullmatch(r"(?:@|await )?([A-Z]\w*)(?:\(.*\)|\.[\w.]+)?", span, re.S))
    }
    # Environment variables, SQL, HTTP methods and the like are capitals alone (constants have
    # an underscore, which only the variables share: those are left out by their prefix).
    ours = {
        name
        for name in mentioned
        if re.search(r"[a-z]", name)
        or (
            "_" in name
            and not re.match(r"(TOOLUSE|OPENAI|ANTHROPIC|DEEPSEEK|DASHSCOPE|OMP|CT2)_", name)
        )
    }
    assert sorted(ours - defined - set(dir(builtins))) == []


def _prose_lines(page: Path) -> list[str]:
    """The page's lines outside its fenced blocks (a fence line holds no other backtick:
    ```` ```json ```` in a sentence is a code span, not a fence)."""
    lines, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if re.match(r" {0,3}`{3,}[^`]*$", line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces
    as hyphens, a repeated one numbered."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose_lines(page):
        if heading := re.match(r"#{1,6} (.+)$", line):
            anchor = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
            seen[anchor] = seen.get(anchor, 0) + 1
    return found


def test_the_links_to_a_section_reach_a_heading() -> None:
    anchors = {page.resolve(): _anchors(page) for page in PAGES}
    broken = [
        (page.name, link.group(0))
        for page in PAGES
        for line in _prose_lines(page)
        for link in re.finditer(r"\]\(([^)\s#]*)#([^)\s]+)\)", line)
        if link.group(2)
        not in anchors.get(((page.parent / link.group(1)) if link.group(1) else page).resolve(), ())
    ]
    assert broken == []
    assert sum(len(found) for found in anchors.values()) > 100  # the headings are read
