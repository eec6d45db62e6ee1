"""Ports for servers the tests start on 127.0.0.1."""

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; a server started right away gets it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
