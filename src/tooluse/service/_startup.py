"""``tooluse serve``'s start-up: what it prints once it listens (the model and where it runs,
the URLs, the tools, the knowledge base and the files it writes, absolute paths), and the
garbage collector set for serving."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import Final

from tooluse._tables import location_label
from tooluse.embedding._cache import default_cache_path
from tooluse.models import ChatModel
from tooluse.models._llama_engine import LlamaEngine
from tooluse.service._openai_api import OPENAI_MODEL_ID
from tooluse.service._service import QaService
from tooluse.tools import tool_callbacks

__all__ = ["SERVING_GC_THRESHOLDS", "model_location", "startup_lines", "tune_garbage_collector"]


def model_location(model: ChatModel | None) -> str:
    """Where the model runs, in words: the offline TestModel, a local engine (its process,
    threads, context and weights), or the API it is reached at."""
    if model is None:
        return "the offline TestModel (--model test): made-up tool arguments, echoed prompts"
    engine = getattr(model, "engine", None)  # a LocalChatModel's
    if isinstance(engine, LlamaEngine):
        return (
            f"on this machine: llama.cpp (pid {engine.pid}) at {engine.base_url}, "
            f"{engine.threads} thread(s), {engine.context_size}-token context, weights "
            f"{engine.model_path}"
        )
    base_url = getattr(model, "base_url", None)
    return f"at {base_url}" if isinstance(base_url, str) else type(model).__name__


def startup_lines(service: QaService, url: str) -> list[str]:
    """The lines for a service listening at ``url`` (``http://HOST:PORT``)."""
    config = service.config
    names = [callback.definition.name for callback in tool_callbacks(*service.tools)]
    if config.tools is None and not config.mcp_servers:
        origin = "the sample tools (made-up data); --tools and --mcp give yours"
    else:
        origin = "from --tools / --mcp"
    database = os.path.abspath(config.db)
    cache = f"{default_cache_path().resolve()}"
    if config.database_url is not None:
        database = location_label(config.database_url)
        if config.embedding_model is None:  # the bundled model's, shared by the workers
            cache = "in the database"
    knowledge = f'collection "default" in {database}'
    if config.sample_knowledge:
        knowledge += " (the sample documents while it holds none of its own; tooluse ingest adds)"
    search = ", found through tool search" if service.tool_search is not None else ""
    return [
        "tooluse serve is ready",
        f"  model       {service.model_label}, {model_location(config.model)}",
        f"  chat page   {url}/",
        f"  OpenAI API  {url}/v1 (model {OPENAI_MODEL_ID!r}; POST /v1/chat/completions)",
        f"  SSE API     {url}/api/chat",
        f"  tools       {len(names)}{search}: {', '.join(names)}: {origin}",
        f"  knowledge   {knowledge}",
        f"  data        {database} (memory, knowledge base, approvals, audit log); "
        f"embedding cache {cache}",
    ]


SERVING_GC_THRESHOLDS: Final = (20_000, 20, 20)
"""The collector's thresholds while serving (Python's: 700, 10, 10): a request's objects
live as long as its model calls, so at 700 allocations the youngest generation is mostly
requests in flight, walked and promoted over and over (docs/benchmarks.md, #26)."""


def tune_garbage_collector() -> Callable[[], None]:
    """Set the collector for serving, once the app is built: every object alive now (the
    app, its service, the tools, the modules) moves to the permanent generation, after the
    garbage is collected so that none is kept (``gc.freeze``), and the thresholds become
    :data:`SERVING_GC_THRESHOLDS`. Returns what sets both back (a server that stops
    in a process that goes on). For a server process, not a library caller, whose objects
    and collector are its own."""
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(*SERVING_GC_THRESHOLDS)

    def restore() -> None:
        gc.set_threshold(*thresholds)
        gc.unfreeze()

    return restore
