"""``tooluse serve``: the QA service over HTTP (chat page, SSE API, OpenAI-compatible API)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import ipaddress
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tooluse.cli._option_types import port_number, positive_count, positive_seconds
from tooluse.cli._options import (
    LOCAL_ENGINE_URL,
    OptionError,
    add_service_arguments,
    close_model,
    configure_logging,
    open_service,
    start_service,
)
from tooluse.service._approvals import DEFAULT_APPROVAL_EXPIRY
from tooluse.service._service import DEFAULT_MAX_REQUEST_BYTES
from tooluse.service._startup import startup_lines, tune_garbage_collector

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from tooluse.service import Authenticator
    from tooluse.service._service import QaService

__all__ = [
    "SPREADS_CONNECTIONS",
    "add_arguments",
    "bind_port",
    "run",
    "worker_app",
    "worker_options",
]

logger = logging.getLogger("tooluse.service")

_STARTUP_FAILURE = 3  # uvicorn.run's exit status for an app that did not start


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run the question-answering service: a chat page at /, Server-Sent Events at "
        "POST /api/chat, approvals at POST /api/approvals/{id}, and an OpenAI-compatible "
        "POST /v1/chat/completions. Works with no configuration: a SQLite file, the bundled "
        "embedding model, sample documents and tools, and a local model (Qwen2.5-Coder-1.5B "
        "on llama.cpp, installed by `make serve`) until another is set."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8000, help="port (default: 8000)")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("TOOLUSE_API_KEY"),
        help="require Authorization: Bearer <key> on /api and /v1 (default: $TOOLUSE_API_KEY; "
        "none: open, which is fine on 127.0.0.1, and warned about on other addresses)",
    )
    parser.add_argument(
        "--approval-expiry",
        type=positive_seconds,
        default=DEFAULT_APPROVAL_EXPIRY,
        metavar="SECONDS",
        help="how long a run paused for approval waits for a decision "
        f"(default: {DEFAULT_APPROVAL_EXPIRY:g})",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the service answers for (the Host header), besides its IP addresses "
        "and localhost: the name clients reach it by; '*': any (a proxy in front checks "
        "them); repeatable",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=positive_count,
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="BYTES",
        help="the largest request body taken, on every route (413 beyond; "
        f"default: {DEFAULT_MAX_REQUEST_BYTES})",
    )
    parser.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        help="worker processes serving the port (default: 1); with more than one, put the "
        "state in shared engines: --database-url and --redis-url",
    )
    parser.add_argument(
        "--worker-sockets",
        choices=["own", "shared"],
        default=None,
        help="with --workers: 'own', each worker listens on a socket of its own (SO_REUSEPORT) "
        "and the kernel spreads the connections among them (the default on Linux; Linux only); "
        "'shared', they accept on one socket, where one worker can take most of a burst of "
        "connections (the default elsewhere)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("TOOLUSE_REDIS_URL") or None,
        metavar="URL",
        help="a Redis server through which several workers of the service run each "
        "conversation's turns one at a time, and which holds the rate-limit buckets: "
        "redis://HOST:PORT/DB "
        "(default: $TOOLUSE_REDIS_URL; none: one at a time per worker)",
    )
    users = parser.add_argument_group(
        "users and tenants",
        "who a request comes from, beyond the one --api-key (tried after it, in this order); "
        "a user's conversations and approvals are theirs (404 to anyone else), and the user, "
        "tenant and roles go into the tool context and the audit log",
    )
    users.add_argument(
        "--keys",
        metavar="FILE",
        help='per-user API keys, a JSON file: {"keys": [{"key": "...", "user": "ann", '
        '"tenant": "acme", "roles": ["support"]}, ...]} ("sha256" instead of "key" keeps the '
        "key out of the file)",
    )
    users.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a reverse proxy (address or network) whose --user-header, --tenant-header and "
        "--roles-header name the user; headers from other addresses are ignored; repeatable. "
        "Turns uvicorn's proxy headers off, so the proxy's address is the one checked",
    )
    for option, default, what in (
        ("--user-header", "X-Forwarded-User", "the user"),
        ("--tenant-header", "X-Forwarded-Tenant", "the tenant"),
        ("--roles-header", "X-Forwarded-Roles", "the roles, comma-separated"),
    ):
        users.add_argument(
            option,
            default=default,
            metavar="NAME",
            help=f"the header of a --trusted-proxy naming {what} (default: {default})",
        )
    users.add_argument(
        "--jwt-secret",
        default=os.environ.get("TOOLUSE_JWT_SECRET") or None,
        metavar="SECRET",
        help="accept bearer JWTs signed with this HS256 secret (default: $TOOLUSE_JWT_SECRET; "
        "needs pip install 'tooluse[jwt]')",
    )
    users.add_argument(
        "--jwt-public-key",
        metavar="FILE",
        help="accept bearer JWTs signed RS256 by the private key of this PEM public key",
    )
    users.add_argument("--jwt-audience", metavar="AUD", help="the tokens' required aud claim")
    users.add_argument("--jwt-issuer", metavar="ISS", help="the tokens' required iss claim")
    users.add_argument(
        "--jwt-tenant-claim", default="tenant", metavar="CLAIM", help="(default: tenant)"
    )
    users.add_argument(
        "--jwt-roles-claim", default="roles", metavar="CLAIM", help="(default: roles)"
    )
    users.add_argument(
        "--tool-access",
        metavar="FILE",
        help='which tenants and roles may see and use which tools, a JSON file: {"default": '
        '{...}, "tools": {"cancel_order": {"allowRoles": ["support"]}}} (allowTenants, '
        'denyTenants, allowRoles, denyRoles); mcp.json\'s "tooluse" section adds rules '
        "per server and tool",
    )
    parser.add_argument(
        "--durable-runs",
        action="store_true",
        help="run each turn as a durable workflow in --database-url's PostgreSQL (DBOS, "
        "pip install 'tooluse[durable]'): a run whose worker dies is finished by another "
        "worker from its last completed step, no completed tool call run again",
    )
    add_service_arguments(parser)


def _authenticators(args: argparse.Namespace) -> tuple[Authenticator, ...]:
    """The authenticators the options ask for, in the order they are tried."""
    from tooluse.service import ApiKeys, JwtBearer, TrustedProxyHeaders

    found: list[Authenticator] = []
    if args.keys:
        found.append(ApiKeys.from_file(args.keys))
    if args.trusted_proxy:
        found.append(
            TrustedProxyHeaders(
                args.trusted_proxy,
                user_header=args.user_header,
                tenant_header=args.tenant_header or None,
                roles_header=args.roles_header or None,
            )
        )
    jwt_keys = []
    if args.jwt_secret:
        jwt_keys.append((args.jwt_secret, "HS256"))
    if args.jwt_public_key:
        try:
            jwt_keys.append((Path(args.jwt_public_key).read_text(encoding="utf-8"), "RS256"))
        except OSError as exc:
            raise OptionError(f"--jwt-public-key {args.jwt_public_key}: {exc}") from exc
    for key, algorithm in jwt_keys:
        try:
            bearer = JwtBearer(
                key,
                algorithms=[algorithm],
                audience=args.jwt_audience,
                issuer=args.jwt_issuer,
                tenant_claim=args.jwt_tenant_claim,
                roles_claim=args.jwt_roles_claim,
            )
        except ImportError as exc:
            raise OptionError(
                f"checking JWTs needs PyJWT: pip install 'tooluse[jwt]' ({exc})"
            ) from exc
        found.append(bearer)
    return tuple(found)


def _allowed_hosts(args: argparse.Namespace) -> tuple[str, ...]:
    """``--allowed-host`` names, and ``--host`` when it is a name (not an address)."""
    names = list(args.allowed_host)
    try:
        ipaddress.ip_address(args.host.strip("[]"))
    except ValueError:
        names.append(args.host)
    return tuple(names)


def _worker_count(text: str) -> int:
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"at least 1 worker, got {count}")
    return count


# The options of `tooluse serve --workers N`, for its worker processes (uvicorn starts them
# afresh: they build their app from these).
_WORKER_OPTIONS = "TOOLUSE_SERVE_OPTIONS"


def _service_app(args: argparse.Namespace) -> FastAPI:
    from tooluse.service import load_tool_access
    from tooluse.service._app import create_app

    try:  # the files' messages name them
        authenticators = _authenticators(args)
        visibility = None if args.tool_access is None else load_tool_access(args.tool_access)
    except OptionError:
        raise
    except (ValueError, TypeError) as exc:
        raise OptionError(str(exc)) from exc
    return open_service(
        args,
        lambda config: create_app(
            dataclasses.replace(
                config,
                api_key=args.api_key or None,
                approval_expiry_seconds=args.approval_expiry,
                allowed_hosts=_allowed_hosts(args),
                max_request_bytes=args.max_request_bytes,
                redis_url=args.redis_url,
                authenticators=authenticators,
                tool_visibility=visibility,
                durable_runs=args.durable_runs,
            )
        ),
    )


def worker_app() -> FastAPI:
    """The app of one worker process of ``tooluse serve --workers N`` (uvicorn's factory)."""
    options = json.loads(os.environ[_WORKER_OPTIONS])
    args = argparse.Namespace(**options)
    configure_logging(args.log_level)
    app = _service_app(args)
    tune_garbage_collector()  # for the process's life
    return app


def worker_options(args: argparse.Namespace, model: object) -> dict[str, object]:
    """What each worker of ``--workers N`` builds its app from: the options, and, when
    ``model`` (the supervisor's) is a local model running its engine, that engine's URL, so
    that the workers share the supervisor's engine instead of each starting one (a model's
    memory and the CPU, N times)."""
    from tooluse.models import LocalChatModel

    options: dict[str, object] = {
        key: value
        for key, value in vars(args).items()
        if isinstance(value, str | int | float | bool | list | type(None))
    }
    if isinstance(model, LocalChatModel) and model.engine is not None:
        options[LOCAL_ENGINE_URL] = model.engine.base_url
    return options


def _run_workers(
    args: argparse.Namespace, options: dict[str, object], listener: socket.socket
) -> int:
    """``--workers N``: uvicorn's supervisor starts N processes on ``listener``
    (:func:`bind_port`), restarts one that dies and stops them all on SIGINT or SIGTERM;
    each builds its app from ``options`` (:func:`worker_options`) and starts its service in
    its app's lifespan."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    if args.database_url is None or args.redis_url is None:
        logger.warning(
            "%d workers without --database-url and --redis-url: they share the SQLite file, "
            "but each runs its conversations' turns one at a time only among its own",
            args.workers,
        )
    os.environ[_WORKER_OPTIONS] = json.dumps(options)
    config = uvicorn.Config(
        "tooluse.cli.serve:worker_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        proxy_headers=not args.trusted_proxy,
    )
    host, port = listener.getsockname()[:2]
    logger.info(
        "%d workers on %s port %d, %s",
        args.workers,
        host,
        port,
        "each listening on a socket of its own"
        if isinstance(listener, _PortOfTheWorkers)
        else "sharing one listening socket",
    )
    Multiprocess(config, sockets=[listener]).run()
    return 0


def _warn_if_short_of_connections(database_url: str, workers: int) -> None:
    """A warning when the PostgreSQL server takes fewer connections than the workers may
    open: under load the turns beyond them would fail, one by one, with its "too many
    clients"."""
    from tooluse._postgres import DEFAULT_POOL_SIZE, connections_available
    from tooluse._tables import location_label

    needed = workers * 2 * DEFAULT_POOL_SIZE
    try:
        available = connections_available(database_url)
    except Exception as exc:  # the service reached it a moment ago: say so, and go on
        logger.warning("could not ask PostgreSQL how many connections it takes: %s", exc)
        return
    if available < needed:
        logger.warning(
            "PostgreSQL at %s takes %d more connections, and %d worker(s) may open %d (%d "
            "for each one's threads, %d for its event loop): under load the requests beyond "
            "it fail with 'too many clients'. Raise its max_connections or run fewer workers",
            location_label(database_url),
            available,
            workers,
            needed,
            DEFAULT_POOL_SIZE,
            DEFAULT_POOL_SIZE,
        )


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False


# Whether SO_REUSEPORT spreads a port's new connections among its listening sockets: on
# Linux (on macOS and the BSDs, plain SO_REUSEPORT does not balance).
SPREADS_CONNECTIONS = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


def _socket_per_worker(args: argparse.Namespace) -> bool:
    """Whether each worker of ``--workers N`` listens on a socket of its own."""
    if args.workers == 1 or args.worker_sockets == "shared":
        return False
    if not SPREADS_CONNECTIONS and args.worker_sockets == "own":
        raise OptionError(
            f"--worker-sockets own needs Linux (SO_REUSEPORT spreading the connections among "
            f"the workers' sockets), not {sys.platform}: leave it out to share one socket"
        )
    return SPREADS_CONNECTIONS


class _PortOfTheWorkers(socket.socket):
    """The supervisor's hold on ``host:port`` when each worker listens on a socket of its
    own: bound and never listening (the kernel hands connections only to listening
    sockets), so the port stays this service's and ``--port 0``'s choice is the workers'.
    uvicorn's supervisor hands every worker it starts or restarts its sockets by pickling
    them: this one is unpickled as the worker's own socket on the same address, with
    SO_REUSEPORT, on which the worker listens. The kernel then spreads new connections
    among the workers' sockets; on one shared socket the worker that wakes first accepts
    every connection pending (uvloop accepts until none is left), up to 185 of a burst of
    200 on two (docs/benchmarks.md)."""

    # Two supervisors could both bind the port (SO_REUSEADDR, neither listening) in the
    # seconds before their workers listen, and then share it: a claim only one process can
    # hold, an abstract Unix socket named after the address (gone when the process is).
    _claim: socket.socket | None = None

    def claim(self) -> None:
        """Hold the claim on this socket's address; ``EADDRINUSE``: another holds it."""
        claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        host, port = self.getsockname()[:2]
        try:
            claim.bind(f"\0tooluse serve {host} {port}")
        except OSError:
            claim.close()
            raise
        self._claim = claim

    def close(self) -> None:
        if self._claim is not None:
            self._claim.close()
        super().close()

    def __reduce__(self) -> tuple[object, tuple[int, tuple[object, ...]]]:
        return _worker_socket, (self.family, self.getsockname())


def _worker_socket(family: int, address: tuple[object, ...]) -> socket.socket:
    """A worker's own socket on ``address`` (run in the worker, as it unpickles
    :class:`_PortOfTheWorkers`)."""
    own = socket.socket(family, socket.SOCK_STREAM)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        own.bind(address)
    except OSError as exc:
        own.close()
        print(f"tooluse serve: a worker cannot bind {address}: {exc}", file=sys.stderr)
        # uvicorn's supervisor stops on this status, where it would restart a worker that
        # failed otherwise, again and again
        sys.exit(_STARTUP_FAILURE)
    return own


def bind_port(host: str, port: int, *, socket_per_worker: bool = False) -> socket.socket:
    """``host:port`` bound before anything else starts: a port in use is one line and
    status 2 at once, not an error after "Application startup complete" (uvicorn binds only
    once the service has started) or after a local model has loaded. With
    ``socket_per_worker`` (:data:`SPREADS_CONNECTIONS`), a socket that uvicorn's supervisor
    hands each worker as a socket of its own (:class:`_PortOfTheWorkers`)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Not SO_REUSEPORT itself: another service's supervisor binding the port while the
    # workers listen is refused, as is anything else not setting it.
    listener = (_PortOfTheWorkers if socket_per_worker else socket.socket)(
        family, socket.SOCK_STREAM
    )
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        listener.bind((host.strip("[]"), port))
        if isinstance(listener, _PortOfTheWorkers):
            listener.claim()
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise OptionError(
                f"port {port} on {host} is already in use (another tooluse serve?): stop what "
                f'listens there, or choose another port with --port (make serve ARGS="--port '
                f'9000")'
            ) from None
        raise OptionError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    listener.set_inheritable(True)
    return listener


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        listener = bind_port(args.host, args.port, socket_per_worker=_socket_per_worker(args))
    except OptionError as exc:
        print(f"tooluse serve: {exc}", file=sys.stderr)
        return 2
    try:
        return _run_on(listener, args)
    finally:
        listener.close()


def _run_on(listener: socket.socket, args: argparse.Namespace) -> int:
    try:
        app = _service_app(args)
    except OptionError as exc:
        print(f"tooluse serve: {exc}", file=sys.stderr)
        return 2
    if not (args.api_key or app.state.service.names_users) and not _is_loopback(args.host):
        # A warning, not an error: a reverse proxy in front may authenticate.
        logger.warning(
            "serving on %s without an API key: /api/* and /v1/* answer anyone who can reach "
            "this address (chat, tool calls, approvals). Set --api-key or $TOOLUSE_API_KEY, "
            "unless a proxy in front authenticates the requests",
            args.host,
        )
    if args.database_url is not None:
        _warn_if_short_of_connections(args.database_url, args.workers)
    if args.workers > 1:
        app.state.service.close()  # the options are good; each worker opens its own
        config = app.state.service.config
        try:  # a local model's engine serves every worker from here
            return _run_workers(args, worker_options(args, config.model), listener)
        finally:
            close_model(config)
    import uvicorn

    # Behind a trusted proxy the peer address must stay the proxy's (uvicorn's proxy headers
    # would replace it with the forwarded client's).
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        proxy_headers=not args.trusted_proxy,
    )
    try:
        # The event loop uvicorn.run would serve on: uvloop when it is installed, else
        # asyncio's (asyncio.run would always take asyncio's).
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            return runner.run(_serve(app, uvicorn.Server(config), listener, args))
    except KeyboardInterrupt:  # uvicorn raises the Ctrl+C again once it has shut down
        return 0
    finally:
        close_model(app.state.service.config)


async def _serve(
    app: FastAPI, server: uvicorn.Server, listener: socket.socket, args: argparse.Namespace
) -> int:
    """Start the service (its MCP servers connect), then serve it on this event loop, where
    the MCP sessions live. Started here rather than by uvicorn's lifespan so that a server
    that cannot start is a message and status 2, before the port listens."""
    service = app.state.service
    try:
        await start_service(service, args)
    except OptionError as exc:
        print(f"tooluse serve: {exc}", file=sys.stderr)
        return 2
    restore_collector = tune_garbage_collector()
    announce = asyncio.ensure_future(_announce(server, service, args.host))
    try:
        await server.serve(sockets=[listener])
    finally:
        restore_collector()  # whoever called run() in this process goes on
        announce.cancel()
        if not server.started:  # else its lifespan closed the service
            await service.aclose()
    return 0 if server.started else _STARTUP_FAILURE


async def _announce(server: uvicorn.Server, service: QaService, host: str) -> None:
    """Print :func:`startup_lines` once the server listens (on the port it got, which
    ``--port 0`` leaves to the system)."""
    while not server.started:
        await asyncio.sleep(0.05)
    sockets = [socket for listener in server.servers for socket in listener.sockets]
    port = sockets[0].getsockname()[1] if sockets else server.config.port
    shown = f"[{host}]" if ":" in host else host
    print("\n".join(startup_lines(service, f"http://{shown}:{port}")), flush=True)
