"""``LocalChatModel``: a GGUF model run on this machine by llama.cpp, nothing leaving it.

It owns a :class:`~tooluse.models._llama_engine.LlamaEngine` (a child process serving the
model on a free loopback port) and talks to it as :class:`~tooluse.models.OpenAIChatModel`
does to any OpenAI-compatible server, with ``text_tool_calls`` on: small models write tool
calls as JSON text where the server's parser missed them.
"""

from __future__ import annotations

import importlib.resources
import os

from tooluse.messages import ChatOptions
from tooluse.models._llama_engine import DEFAULT_SLOTS, LlamaEngine, default_threads
from tooluse.models._openai import OpenAIChatModel
from tooluse.models.weights import LOCAL_MODELS, LocalWeights, WeightsError

__all__ = ["LocalChatModel", "shipped_chat_template"]


def shipped_chat_template(file_name: str) -> str:
    """A chat template shipped in ``tooluse.models.templates``."""
    resource = importlib.resources.files("tooluse.models") / "templates" / file_name
    return resource.read_text("utf-8").rstrip("\n")


class LocalChatModel(OpenAIChatModel):
    """A local model: a name of :data:`~tooluse.models.weights.LOCAL_MODELS`
    (``"qwen2.5-coder-1.5b"``, ``"qwen2.5-coder-0.5b"``, installed by ``make models``) or
    the path of a ``.gguf`` file. The engine starts, and the model is loaded, in the
    constructor (seconds); :meth:`close` / :meth:`aclose` stop it.

    ``threads`` (default :func:`~tooluse.models._llama_engine.default_threads`),
    ``slots`` (requests served side by side, each slot keeping its last prompt cached;
    default ``DEFAULT_SLOTS``, 3), ``context_size`` (tokens per slot; default: the
    model's, else 8192) and ``chat_template`` (Jinja text; default: the one shipped for the
    model, else the GGUF file's own) configure the engine; ``text_tool_calls`` recovers
    calls left in the text (:class:`~tooluse.models.OpenAIChatModel`). ``WeightsError``
    when the weights are not installed, ``EngineError`` when the engine is missing or does
    not start: each names the command that fixes it.

    ``base_url``: the API of an engine already serving this model (another process's,
    e.g. ``tooluse serve --workers N``'s supervisor's): this model talks to it and starts
    none (:attr:`engine` is ``None``); the engine options do not apply.
    """

    def __init__(
        self,
        model: str,
        *,
        threads: int | None = None,
        slots: int = DEFAULT_SLOTS,
        context_size: int | None = None,
        chat_template: str | None = None,
        text_tool_calls: bool = True,
        default_options: ChatOptions | None = None,
        timeout: float | None = None,
        startup_timeout: float = 120.0,
        base_url: str | None = None,
    ) -> None:
        weights = LOCAL_MODELS.get(model)
        name = weights.name if weights is not None else os.path.basename(model)
        self.engine: LlamaEngine | None = None
        if base_url is None:
            path = _weights_path(model, weights)
            if chat_template is None and weights is not None and weights.chat_template:
                chat_template = shipped_chat_template(weights.chat_template)
            if context_size is None:
                context_size = weights.context_size if weights is not None else 8192
            self.engine = LlamaEngine(
                path,
                alias=name,
                threads=threads if threads is not None else default_threads(),
                context_size=context_size,
                slots=slots,
                chat_template=chat_template,
                startup_timeout=startup_timeout,
            )
            base_url = self.engine.base_url
        try:
            super().__init__(
                name,
                base_url=base_url,
                api_key="local",  # the engine checks none; the SDK wants one
                default_options=default_options,
                timeout=timeout,
                max_retries=0,  # a failing local engine fails the same way again
                send_reasoning=False,
                text_tool_calls=text_tool_calls,
            )
        except BaseException:
            self._stop_engine()
            raise

    async def aclose(self) -> None:
        """Close the HTTP connections and stop the engine this model started."""
        await super().aclose()
        self._stop_engine()

    def close(self) -> None:
        """:meth:`aclose` from synchronous code."""
        super().close()
        self._stop_engine()

    def _stop_engine(self) -> None:
        if self.engine is not None:
            self.engine.stop()

    def __repr__(self) -> str:
        return f"LocalChatModel(model={self.model!r}, base_url={self.base_url!r})"


def _weights_path(model: str, weights: LocalWeights | None) -> str:
    if weights is not None:
        path = weights.path()
        if not path.is_file():
            raise WeightsError(
                f"The weights of the local model {weights.name} ({weights.description}, "
                f"{weights.size / 1e9:.1f} GB) are not installed at {path}: run "
                f"{weights.install_command()}"
            )
        return str(path)
    if not model.endswith(".gguf"):
        raise ValueError(
            f"Unknown local model {model!r}: use one of {', '.join(sorted(LOCAL_MODELS))} "
            "or the path of a .gguf file"
        )
    if not os.path.isfile(model):
        raise WeightsError(f"No GGUF file at {model}")
    return os.path.abspath(model)
