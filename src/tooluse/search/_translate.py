"""A search query translated into the catalogue's language by a chat model, for
:class:`~tooluse.search.HybridToolIndex` to search a question in another language with.

A Chinese question over tools described in English shares no words with them: BM25 matches
nothing, and the embeddings and the dictionary glosses carry the ranking alone. A translation
gives BM25 words to match (after Spring AI's ``TranslationQueryTransformer``).
"""

from __future__ import annotations

import functools
import logging

from tooluse._sync import run_sync
from tooluse.calling._usage import report_usage
from tooluse.messages import ChatOptions, Prompt, SystemMessage, UserMessage
from tooluse.models._base import ChatModel
from tooluse.search._types import check_count, check_instance

__all__ = ["QueryTranslator"]

logger = logging.getLogger(__name__)

# Spring AI's prompt as one user message made the 0.5B model repeat its instructions (14 of 18
# questions); as the system text with the question alone as the user's message, it translates.
DEFAULT_INSTRUCTION = (
    "Translate the user's message into {language}. Keep names, IDs, numbers, file names and "
    "quoted values as they are. Reply with the translation only, no explanations."
)


class QueryTranslator:
    """Translates a search query into ``language`` (the tools' language) with ``model``.

    ``instruction`` is the system text (``{language}`` filled in, as :attr:`instruction`
    keeps it); the query is the user's message, answered at temperature 0 in at most
    ``max_tokens`` tokens. The last
    ``cache_size`` queries' translations are kept (a conversation searches its question
    again, and a model's answer costs seconds). :meth:`translate` gives ``None`` when there is
    no translation to search with: the model failed (logged, and asked again next time), or
    answered nothing or the query unchanged (logged, and kept).
    """

    def __init__(
        self,
        model: ChatModel,
        language: str = "English",
        *,
        instruction: str = DEFAULT_INSTRUCTION,
        max_tokens: int = 384,
        cache_size: int = 1024,
    ) -> None:
        check_instance("model", model, ChatModel, "a ChatModel")
        if not language.strip():
            raise ValueError("language must not be blank")
        if "{language}" not in instruction and language not in instruction:
            raise ValueError(
                "instruction must name the target language (a '{language}' placeholder or "
                f"{language!r} itself)"
            )
        check_count("max_tokens", max_tokens)
        check_count("cache_size", cache_size)
        self.model = model
        self.language = language
        self.instruction = instruction.replace("{language}", language)
        self._options = ChatOptions(temperature=0.0, max_tokens=max_tokens)
        # Failures raise through the cache, so they are not kept.
        self._cached = functools.lru_cache(maxsize=cache_size)(self._ask)

    def translate(self, query: str) -> str | None:
        """The query in the target language; ``None``: search with the query as asked. Blocks
        (the model's answer); the indexes search in a worker thread."""
        if not query.strip():
            return None
        try:
            return self._cached(query)
        except Exception:
            logger.warning(
                "Translating a search query into %s failed; searching with the query as asked",
                self.language,
                exc_info=True,
            )
            return None

    def _ask(self, query: str) -> str | None:
        prompt = Prompt(
            [SystemMessage(text=self.instruction), UserMessage(text=query)], self._options
        )
        response = run_sync(
            self.model.acall(prompt),
            sync_name="QueryTranslator.translate()",
            async_name="model.acall(prompt)",
        )
        report_usage(response.usage)  # the run whose search asked for it pays for it
        translation = response.text.strip()
        if not translation or translation == query.strip():
            logger.warning(
                "The model gave %s for a search query's translation into %s; searching with "
                "the query as asked",
                "the query unchanged" if translation else "no text",
                self.language,
            )
            return None
        return translation
