"""Chat models: the protocol, and providers over the official SDKs."""

from tooluse.models._base import ChatModel

__all__ = ["ChatModel"]
