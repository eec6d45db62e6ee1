"""The documented deployment (deploy/ and docs/scale-out.md) holds together: docker cannot run
here, so its files are checked against each other and against the CLI. The compose file's
services are the ones the page describes; its ``tooluse serve`` command and every ``tooluse``
command the page shows parse with the CLI's own parser; the workers' settings reach the
variables the CLI reads; the proxy sends to the port the workers listen on, unbuffered."""

from __future__ import annotations

import argparse
import re
import shlex
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from _doc_examples import DOCS, ROOT

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
PAGE = DOCS / "scale-out.md"


def interpolated(value: str, variables: dict[str, str]) -> str:
    """``value`` with compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}``
    replaced as ``docker compose`` does, from ``variables``; an unset required one fails."""

    def one(match: re.Match[str]) -> str:
        name, kind, word = match.group(1), match.group(2), match.group(3)
        if variables.get(name):
            return variables[name]
        assert kind != ":?", f"{name} is required ({word}) and env.example leaves it unset"
        return word if kind == ":-" else ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value)


def env_example() -> dict[str, str]:
    lines = (DEPLOY / "env.example").read_text(encoding="utf-8").splitlines()
    pairs = (line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return {name: value for name, value in pairs}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The compose file as ``docker compose config`` would see it with env.example's values."""
    variables = env_example()

    def resolve(node: Any) -> Any:
        if isinstance(node, str):
            return interpolated(node, variables)
        if isinstance(node, list):
            return [resolve(item) for item in node]
        if isinstance(node, dict):
            return {key: resolve(value) for key, value in node.items()}
        return node

    loaded: dict[str, Any] = resolve(yaml.safe_load(COMPOSE.read_text(encoding="utf-8")))
    return loaded


def parsed(argv: list[str]) -> argparse.Namespace:
    """``tooluse ARGV`` parsed by the CLI's parser (an unknown option or a bad value fails)."""
    from tooluse.cli import build_parser

    assert argv[0] == "tooluse", argv
    try:
        return build_parser(argv[1:]).parse_args(argv[1:])
    except SystemExit as exit_:
        raise AssertionError(f"tooluse refuses {shlex.join(argv)}") from exit_


def test_the_compose_file_runs_postgres_redis_workers_and_a_proxy(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "tooluse", "proxy"}
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")  # pgvector inside
    assert services["redis"]["image"].startswith("redis:")
    assert services["proxy"]["image"].startswith("nginx:")
    workers = services["tooluse"]
    assert workers["deploy"]["replicas"] >= 2
    for engine in ("postgres", "redis"):
        assert workers["depends_on"][engine] == {"condition": "service_healthy"}
        assert services[engine]["healthcheck"]["test"]
    assert services["proxy"]["depends_on"]["tooluse"] == {"condition": "service_healthy"}
    build = workers["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == (
        DEPLOY / "Dockerfile"
    )
    for volume in services["proxy"]["volumes"]:
        assert (DEPLOY / volume.split(":")[0]).is_file(), volume


def test_the_workers_share_the_database_and_redis_of_the_compose_file(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    workers = services["tooluse"]
    environment = workers["environment"]
    database = urllib.parse.urlsplit(environment["TOOLUSE_DATABASE_URL"])
    postgres = services["postgres"]["environment"]
    assert database.scheme == "postgresql" and database.hostname == "postgres"
    assert (database.username, database.password) == (
        postgres["POSTGRES_USER"],
        postgres["POSTGRES_PASSWORD"],
    )
    assert database.path == "/" + postgres["POSTGRES_DB"]
    redis = urllib.parse.urlsplit(environment["TOOLUSE_REDIS_URL"])
    assert (redis.scheme, redis.hostname) == ("redis", "redis")
    serve = parsed(workers["command"])
    assert (serve.command, serve.host, serve.workers) == ("serve", "0.0.0.0", 2)
    # the proxy sends to the port the workers listen on, and streams their events through
    nginx = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    assert re.search(rf"server tooluse:{serve.port}\b", nginx)
    assert "proxy_pass http://tooluse;" in nginx and "proxy_buffering off;" in nginx
    assert f"127.0.0.1:{serve.port}/healthz" in " ".join(workers["healthcheck"]["test"])


def test_the_variables_the_deployment_sets_are_the_cli_s() -> None:
    """Every ``TOOLUSE_*`` variable the compose file and the page set is one tooluse reads."""
    source = " ".join(path.read_text(encoding="utf-8") for path in (ROOT / "src").rglob("*.py"))
    read = set(re.findall(r"\"(TOOLUSE_[A-Z_]+)\"", source))
    compose_text = COMPOSE.read_text(encoding="utf-8")
    set_by_compose = set(re.findall(r"^\s+(TOOLUSE_[A-Z_]+):", compose_text, re.M))
    exported = set(re.findall(r"export (TOOLUSE_[A-Z_]+)=", PAGE.read_text(encoding="utf-8")))
    assert set_by_compose <= read and exported <= read
    assert set_by_compose == exported  # the plain commands configure what compose does


def shell_commands(page: Path) -> list[list[str]]:
    """The ``tooluse ...`` commands of the page's ```sh blocks, as words (comments cut,
    continued lines joined)."""
    blocks = re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["tooluse"]:
                commands.append(words)
    return commands


def test_every_command_the_page_shows_parses() -> None:
    commands = shell_commands(PAGE)
    assert {words[1] for words in commands} >= {"serve", "ingest", "audit"}
    for words in commands:
        parsed(words)
    serve = [parsed(words) for words in commands if words[1] == "serve"]
    assert any(args.workers > 1 and args.host == "0.0.0.0" for args in serve)


def test_the_page_points_at_the_deployment_files() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name in ("deploy/compose.yaml", "deploy/nginx.conf", "deploy/env.example"):
        assert name in text and (ROOT / name).is_file()
