"""``ToolSearchToolCallingAdvisor``: the tool loop, showing the model only ``toolSearchTool``
and the tools its searches found (Spring AI's advisor of the same name, reference 1.9.7)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import itertools
import json
import logging
import operator
from collections.abc import AsyncIterator, Callable, Container, Iterator, Mapping, Sequence
from typing import Any, Final

from tooluse._fork import PerProcess, ProcessLock
from tooluse.advisors import (
    AdvisorChain,
    ChatClientRequest,
    ChatClientResponse,
    HistoryReplayer,
    ToolCallingAdvisor,
    Turn,
    TurnKey,
)
from tooluse.calling import ToolExecutionResult
from tooluse.calling._access import tool_origin
from tooluse.memory import CONVERSATION_ID
from tooluse.messages import (
    DeferredTools,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from tooluse.search._cousage import CoUsageSetting, co_usage_by_caller
from tooluse.search._eviction import EvictionStrategy, LruEvictionStrategy
from tooluse.search._sessions import SessionToolIndex, ToolCatalogue
from tooluse.search._tool import SESSION_ID_CONTEXT_KEY, TOOL_SEARCH_TOOL_NAME, ToolSearchTool
from tooluse.search._types import (
    ReplaceableToolIndex,
    ToolIndex,
    ToolReference,
    ToolSearchRequest,
    check_count,
    check_instance,
)
from tooluse.tools import ToolCallback, ToolContext, ToolDefinition, has_fixed_definition

__all__ = [
    "DEFAULT_SYSTEM_MESSAGE_SUFFIX",
    "ToolSearchToolCallingAdvisor",
    "mcp_server_category",
    "tool_fingerprint",
]

logger = logging.getLogger(__name__)

_DEFINITION: Final = operator.attrgetter("definition")
DEFAULT_SYSTEM_MESSAGE_SUFFIX: Final = (
    "\n\nYou have a tool named `toolSearchTool` that discovers other tools on demand. Whenever "
    "you need an action for which no suitable tool is visible to you, call `toolSearchTool` "
    "with a short description of the capability (keywords such as the service, object and "
    "action). The tools it finds become callable in your next step; searching does not run "
    "them."
)


@dataclasses.dataclass(slots=True)
class _SearchTurn:
    """What the advisor keeps for one request, from hook to hook."""

    session_id: str  # the session whose turn this request is (_end_request ends it)
    callbacks: dict[str, ToolCallback]  # the searchable tools attached, by name
    # Offered without a search: this turn's preselection, and the tools that ran in earlier
    # turns before any search found them (preselected then).
    preselected: list[str] = dataclasses.field(default_factory=list)
    # The names found by each search round: of the earlier turns a memory inside the loop
    # replays to the model, and of the turn so far.
    replayed_rounds: list[list[str]] = dataclasses.field(default_factory=list)
    rounds: list[list[str]] = dataclasses.field(default_factory=list)


_SEARCH_TURN: Final = TurnKey[_SearchTurn]("tool search")
# The session warm_up indexes under: a NUL keeps it apart from every conversation id (the
# memory repositories refuse NUL in ids).
_WARM_UP_SESSION: Final = "\x00tooluse.tool_search.warm_up"


def tool_fingerprint(references: Sequence[ToolReference]) -> str:
    """SHA-256 (hex) over name and description (and category, when it has one) of each
    tool, sorted by name: registration order and schema changes do not change it."""
    digest = hashlib.sha256()
    for reference in sorted(references, key=lambda r: r.tool_name):
        digest.update(reference.tool_name.encode())
        digest.update(b"\x00")
        digest.update(reference.summary.encode())
        if reference.category is not None:
            digest.update(b"\x02" + reference.category.encode())
        digest.update(b"\x01")
    return digest.hexdigest()


def mcp_server_category(callback: ToolCallback) -> str | None:
    """An MCP tool's server name (its toolset); None for other tools. A wrapper that exposes
    the tool it wraps as ``delegate`` (the QA pipeline's recording tools) is looked through."""
    origin = tool_origin(callback)
    return None if origin is None else origin[0]


class ToolSearchToolCallingAdvisor(ToolCallingAdvisor):
    """A ``ToolCallingAdvisor`` for large catalogues: the model sees ``toolSearchTool`` plus the
    tools found by its searches in this conversation, not the whole catalogue.

    Per request: the session id is read from the request context (``session_id_key``,
    default ``chat_memory_conversation_id``; missing is an error); evicted sessions' indexes are
    cleared; the attached tools are re-indexed only when their fingerprint (name and
    description) changed, in one step when the index is a :class:`ReplaceableToolIndex` (the
    built-in ones are: a search of the session meanwhile finds the old tools or the new, never
    none), else by ``clear_index`` and ``index_tools`` as in Spring AI;
    ``system_message_suffix`` is appended to the system message.

    Per model call: the offered tools are ``toolSearchTool`` and the tools named in earlier
    ``toolSearchTool`` results of the conversation, in the order they were first found (stable,
    so provider prompt caches keep hitting), at most ``max_exposed_tools`` of them (the least
    recently found dropped first). ``accumulate=False`` keeps only the last search round's
    tools. Names no longer attached and results that are not a JSON list of names are ignored.

    ``preselect=n`` also searches with the user's message before the first model call and
    offers its top ``n`` tools right away, saving a search round trip when the question names
    its need plainly. A tool that ran in an earlier turn of the conversation before a search
    found it (preselected then) stays offered like the found ones.

    ``defer_loading=True``, with a model that loads deferred tools (``AnthropicChatModel``,
    ``OpenAIResponsesChatModel``): every call offers the whole catalogue, the tools not yet
    found marked deferred (``ChatOptions.deferred_tools``), and a search result loads the tools
    it names (Anthropic: ``defer_loading`` and ``tool_reference`` blocks; OpenAI: a client
    ``tool_search`` whose output carries their definitions). The provider's tool list then
    stays the same as tools are found, so its prompt cache keeps hitting (on Anthropic every
    request carries every definition, kept out of the model's context). Found tools stay
    loaded while their search result is in the conversation: ``max_exposed_tools`` does not
    apply and ``accumulate=False`` cannot be combined with it. With another model the found
    tools are offered as usual (a warning says so once).

    ``max_results`` is the number of search results when the model gives none (then the
    index's default, 10). The index (default :class:`HybridToolIndex`) is shared by all
    sessions and is thread-safe.

    ``tool_category(callback)`` gives each tool the category that ``toolSearchTool``'s
    ``category_filter`` selects (default: an MCP tool's server name, none for other tools).

    ``co_usage``: the tools used together whose companions each search lifts, instead of
    the index's own: a :class:`ToolCoUsage` for every search, or a function of the
    request's caller (:class:`~tooluse.calling.Caller`, read from the tool context, where
    the application's authentication put the user and tenant: never the model) to a
    ``ToolCoUsage`` or ``None`` (the index's own), e.g. a tenant's. Asked for every
    search: keep it cheap (no I/O). Companions are only ever tools of the session, which
    holds the tools the caller may see.
    """

    def __init__(
        self,
        *,
        tool_index: ToolIndex | None = None,
        max_results: int | None = None,
        system_message_suffix: str = DEFAULT_SYSTEM_MESSAGE_SUFFIX,
        session_id_key: str = CONVERSATION_ID,
        eviction_strategy: EvictionStrategy | None = None,
        accumulate: bool = True,
        max_exposed_tools: int | None = 32,
        preselect: int = 0,
        defer_loading: bool = False,
        tool_category: Callable[[ToolCallback], str | None] = mcp_server_category,
        co_usage: CoUsageSetting | None = None,
        name: str = "ToolSearchToolCallingAdvisor",
        **tool_calling_options: Any,
    ) -> None:
        super().__init__(name=name, **tool_calling_options)
        for setting, text in (
            ("system_message_suffix", system_message_suffix),
            ("session_id_key", session_id_key),
        ):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{setting} must be a non-blank string, got {text!r}")
        if not callable(tool_category):
            raise TypeError(
                "tool_category must be a function (ToolCallback) -> str | None, "
                f"got {tool_category!r}"
            )
        if tool_index is not None:
            check_instance("tool_index", tool_index, ToolIndex, "a ToolIndex")
        if eviction_strategy is not None:
            check_instance(
                "eviction_strategy", eviction_strategy, EvictionStrategy, "an EvictionStrategy"
            )
        check_count("max_exposed_tools", max_exposed_tools, optional=True)
        check_count("preselect", preselect, minimum=0)
        if defer_loading and not accumulate:
            raise ValueError(
                "defer_loading=True keeps every found tool loaded while its search result is "
                "in the conversation; it cannot be combined with accumulate=False"
            )
        if tool_index is None:
            from tooluse.search._hybrid import HybridToolIndex

            tool_index = HybridToolIndex()
        # A result never names more tools than are offered (the rest could not be called).
        limit = None if defer_loading else max_exposed_tools
        check_count("max_results", max_results, optional=True)
        if max_results is not None and limit is not None and max_results > limit:
            raise ValueError(
                f"max_results ({max_results}) must not exceed max_exposed_tools ({limit}): "
                "the model could not call the tools beyond it"
            )
        self.tool_index = tool_index
        self.co_usage = co_usage
        self.search_tool = ToolSearchTool(
            tool_index,
            max_results=max_results,
            max_results_limit=limit,
            co_usage=co_usage_by_caller(co_usage, name),
        )
        self.system_message_suffix = system_message_suffix
        self.session_id_key = session_id_key
        self.eviction_strategy = eviction_strategy or LruEvictionStrategy(1000)
        self.accumulate = accumulate
        self.max_exposed_tools = max_exposed_tools
        self.preselect = preselect
        self.defer_loading = defer_loading
        self.tool_category = tool_category
        self._warned_cannot_defer = False
        self._fingerprints: dict[str, str] = {}
        # The catalogues of the tool lists seen lately, by their length and the identity of
        # their first and last callbacks (then checked whole): a new conversation over known
        # tools reads no tool's text.
        self._catalogues: collections.OrderedDict[tuple[int, ...], _KnownCatalogue] = (
            collections.OrderedDict()
        )
        self._session_locks: dict[str, _SessionLock] = {}
        # Sessions with turns under way (how many), and those of them the eviction strategy
        # chose meanwhile: evicted when their last turn ends, not while a search may need them.
        # Per process: a forked child runs none of its parent's turns.
        self._process_turns: PerProcess[_Turns] = PerProcess(_Turns)
        self._lock = ProcessLock()

    # -- sessions --------------------------------------------------------------------------

    def evict_session(self, session_id: str) -> None:
        """Forget a session's index now (after an indexing of it under way)."""
        with self._session_locked(session_id):
            self._forget(session_id)
        self.eviction_strategy.on_removed(session_id)

    def _forget(self, session_id: str) -> None:
        """Clear the session's index; the caller holds the session's lock."""
        with self._lock:
            self._fingerprints.pop(session_id, None)
        self.tool_index.clear_index(session_id)

    @contextlib.contextmanager
    def _session_locked(self, session_id: str) -> Iterator[None]:
        """Hold the session's lock: indexing and evicting a session never interleave (an
        eviction between indexing and recording the fingerprint would leave the fingerprint
        of a cleared index, so the session would never be indexed again). A lock lives while
        a thread holds or waits for it."""
        with self._lock:
            entry = self._session_locks.get(session_id)
            if entry is None:
                entry = self._session_locks[session_id] = _SessionLock()
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._lock:
                entry.users -= 1
                if entry.users == 0:
                    del self._session_locks[session_id]

    def _session_id(self, context: Mapping[str, Any]) -> str:
        value = context.get(self.session_id_key)
        if value is None or not str(value).strip():
            raise ValueError(
                f"{self.name}: the request context must contain a non-blank value for "
                f"{self.session_id_key!r} (the conversation id that names the tool-search "
                "session), e.g. client.prompt().context({...})"
            )
        return str(value)

    def _start_indexed_turn(self, session_id: str, catalogue: _KnownCatalogue) -> bool:
        """Start the session's turn when it is indexed with ``catalogue`` and no thread is
        indexing or evicting it (it holds the session's lock then): a known session with
        nothing changed needs no worker thread. False: nothing was done. An eviction that
        takes the session's lock after this sees the turn running and waits for its end."""
        turns = self._process_turns.get()
        with self._lock:
            if (
                self._fingerprints.get(session_id) != catalogue.fingerprint
                or session_id in self._session_locks
            ):
                return False
            turns.evict_after.discard(session_id)  # the strategy tracks it again
            turns.running[session_id] = turns.running.get(session_id, 0) + 1
        return True

    def _prepare_session(
        self, session_id: str, catalogue: _KnownCatalogue, evicted: Sequence[str]
    ) -> None:
        """Evict the sessions the strategy chose (``evicted``), start the session's turn,
        then (re-)index when the fingerprint changed; runs in a worker thread. A session with
        a turn under way is evicted when its last turn ends: cleared now, its searches would
        find nothing and the model would conclude that no tool exists."""
        turns = self._process_turns.get()
        with self._lock:
            turns.evict_after.discard(session_id)  # the strategy tracks it again
        for other in evicted:
            self._evict_unless_busy(other)
        with self._lock:
            turns.running[session_id] = turns.running.get(session_id, 0) + 1
        try:
            self._index_session(session_id, catalogue)
        except BaseException:
            if self._end_turn(session_id):
                self._evict_unless_busy(session_id)
            raise

    def _index_session(self, session_id: str, known: _KnownCatalogue) -> None:
        fingerprint, references = known.fingerprint, known.references
        with self._session_locked(session_id):
            with self._lock:
                if self._fingerprints.get(session_id) == fingerprint:
                    return
                # Forgotten first: if clearing or indexing fails, the next request indexes.
                self._fingerprints.pop(session_id, None)
            if isinstance(self.tool_index, ReplaceableToolIndex):
                self.tool_index.replace_tools(session_id, references)
            else:
                self.tool_index.clear_index(session_id)
                if references:
                    self.tool_index.index_tools(session_id, references)
            with self._lock:
                self._fingerprints[session_id] = fingerprint

    def _end_turn(self, session_id: str) -> bool:
        """A turn of the session ended; True when it was the last one under way and the
        strategy chose the session meanwhile (the caller evicts it)."""
        turns = self._process_turns.get()
        with self._lock:
            left = turns.running.get(session_id, 0) - 1
            if left > 0:
                turns.running[session_id] = left
                return False
            turns.running.pop(session_id, None)  # absent: the turn began before a fork
            evict = session_id in turns.evict_after
            turns.evict_after.discard(session_id)
        return evict

    def _evict_unless_busy(self, session_id: str) -> None:
        """Evict the session for the strategy: now, or when its last turn under way ends."""
        turns = self._process_turns.get()
        with self._session_locked(session_id):
            with self._lock:
                if session_id in turns.running:
                    turns.evict_after.add(session_id)
                    return
            self._forget(session_id)
        self.eviction_strategy.on_removed(session_id)

    async def advise_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientResponse:
        try:
            return await super().advise_call(request, chain)
        finally:
            await self._end_request(request.turn)

    def advise_stream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        return self._turn_stream(super().advise_stream(request, chain), request.turn)

    async def _turn_stream(
        self, stream: AsyncIterator[ChatClientResponse], turn: Turn
    ) -> AsyncIterator[ChatClientResponse]:
        try:
            async for item in stream:
                yield item
        finally:
            await self._end_request(turn)

    async def _end_request(self, turn: Turn) -> None:
        state = turn.pop(_SEARCH_TURN)
        # None: the turn never started (no session id, ...). Counting is a dict update under
        # a lock held for as long; only clearing an index goes to a worker thread.
        if state is not None and self._end_turn(state.session_id):
            await asyncio.to_thread(self._evict_unless_busy, state.session_id)

    # -- hooks -----------------------------------------------------------------------------

    def warm_up(self, tools: Sequence[ToolCallback]) -> None:
        """Index ``tools`` and build their index now (embedding included, which takes minutes
        for a new catalogue of thousands with the bundled model), e.g. in a thread at
        start-up: the built-in indexes share one built index among the sessions of one
        catalogue, so conversations over these tools start with it. Blocks until built."""
        references = self._catalogue(tools).references
        if isinstance(self.tool_index, ReplaceableToolIndex):  # the conversations' catalogue
            self.tool_index.replace_tools(_WARM_UP_SESSION, references)
        else:
            self.tool_index.index_tools(_WARM_UP_SESSION, references)
        if isinstance(self.tool_index, SessionToolIndex):
            self.tool_index.build(_WARM_UP_SESSION)

    def _searchable(self, tools: Sequence[ToolCallback]) -> dict[str, ToolCallback]:
        callbacks: dict[str, ToolCallback] = {}
        for callback in tools:
            callbacks.setdefault(callback.definition.name, callback)  # first of a name wins
        own = callbacks.pop(TOOL_SEARCH_TOOL_NAME, None)
        if own is not None and own is not self.search_tool.callback:
            raise ValueError(
                f"A tool named {TOOL_SEARCH_TOOL_NAME!r} is attached, but "
                f"{type(self).__name__} offers its own search tool under that name: rename "
                "the tool"
            )
        return callbacks

    def _catalogue(self, tools: Sequence[ToolCallback]) -> _KnownCatalogue:
        """The searchable callbacks, references and fingerprint of ``tools``, made once per
        list of callbacks, of their definitions (a definition replaced, e.g. a tool updated
        in place, makes a new catalogue) and of their categories: the same tools in every
        conversation cost a look-up, not a pass over their texts.

        Per request with nothing changed: the list is found by a short key (its length and
        the identity of its first and last callback), then compared whole by identity, which
        is O(1) for the same tuple (a client's static tools are one tuple for every request)
        and a pass in C otherwise; the definitions are read again only of the callbacks that
        do not declare them fixed (:func:`~tooluse.tools.has_fixed_definition`: the built-in
        ones do). The default ``tool_category`` (an MCP tool's server, fixed for a callback)
        is read when the list is first seen; one of the caller's is asked on every request,
        and a changed answer makes a new catalogue."""
        listed = tools if isinstance(tools, tuple) else tuple(tools)
        key = (len(listed), *map(id, listed[:1] + listed[-1:]))
        callbacks = categories = None
        if self.tool_category is not mcp_server_category:
            callbacks = self._searchable(listed)
            categories = tuple(self.tool_category(callback) for callback in callbacks.values())
        with self._lock:
            known = self._catalogues.get(key)
        if known is not None and known.made_from(listed, categories):
            if known.tools is not listed:  # an equal list: held, the next is found by identity
                known = dataclasses.replace(known, tools=listed)
            with self._lock:
                self._catalogues[key] = known
                self._catalogues.move_to_end(key)
            return known
        if callbacks is None:
            callbacks = self._searchable(listed)
        if categories is None:
            categories = tuple(self.tool_category(callback) for callback in callbacks.values())
        references = ToolCatalogue(
            ToolReference.from_callback(callback, category)
            for callback, category in zip(callbacks.values(), categories, strict=True)
        )
        variable = tuple(callback for callback in listed if not has_fixed_definition(callback))
        known = _KnownCatalogue(
            callbacks,
            references,
            tool_fingerprint(references),
            listed,
            variable,
            tuple(map(_DEFINITION, variable)),
            None if self.tool_category is mcp_server_category else categories,
        )
        with self._lock:
            self._catalogues[key] = known
            while len(self._catalogues) > _KNOWN_CATALOGUES:
                self._catalogues.popitem(last=False)
        return known

    async def do_initialize_loop(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        session_id = self._session_id(request.context)
        catalogue = self._catalogue(request.prompt.options.tool_callbacks)
        evicted = self.eviction_strategy.on_access(session_id)
        if evicted or not self._start_indexed_turn(session_id, catalogue):
            await asyncio.to_thread(self._prepare_session, session_id, catalogue, evicted)
        state = _SearchTurn(session_id, catalogue.callbacks)
        request.turn[_SEARCH_TURN] = state  # the session's turn started: _end_request ends it
        preselected: list[str] = []
        question = _last_user_text(request.prompt.messages)
        if self.preselect and question:
            co_usage = self.search_tool.co_usage_for(request.prompt.options.tool_context)
            search = ToolSearchRequest(session_id, question, self.preselect, None, co_usage)
            response = await asyncio.to_thread(self.tool_index.search, search)
            preselected = response.tool_names
        # Earlier turns that a memory advisor inside the loop adds to each model call, after
        # this hook chose the tools: the model sees those searches too.
        replayed = await _replayed_by_inner_memory(self, request, chain)
        # The search rounds so far: those in the prompt (earlier turns a memory advisor
        # replayed), then, after each executed round, those in the loop's whole history
        # (do_get_next_instructions). Not re-read from each call's messages: they hold only
        # the last round's results when the loop sends no full history
        # (conversation_history=False).
        state.rounds = self._found_rounds(request.prompt.messages)
        state.replayed_rounds = self._found_rounds(replayed)
        # The tools that ran in earlier turns before any search found them: the model sees
        # it used them and may use them again ("and in Rome?").
        state.preselected = list(
            dict.fromkeys([*preselected, *_ran_unsearched([*replayed, *request.prompt.messages])])
        )
        messages = _with_suffix(request.prompt.messages, self.system_message_suffix)
        return request.replace(prompt=request.prompt.replace(messages=messages))

    async def do_before_call(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> ChatClientRequest:
        state = request.turn[_SEARCH_TURN]
        callbacks, preselected = state.callbacks, state.preselected
        rounds = [*state.replayed_rounds, *state.rounds]
        options = request.prompt.options
        context = ToolContext(options.tool_context).merged(
            {SESSION_ID_CONTEXT_KEY: state.session_id}
        )
        options = options.replace(tool_context=context)
        if self._defers_with(chain):
            # Loaded: the search tool and the tools offered without a search; the rest wait
            # for a search result to name them. One tool list for every call of the turn.
            loaded = [name for name in preselected if name in callbacks]
            deferred = [name for name in callbacks if name not in loaded]  # loaded: a few
            exposed = [self.search_tool.callback, *(callbacks[n] for n in (*loaded, *deferred))]
            options = options.replace(
                tool_callbacks=exposed,
                deferred_tools=DeferredTools(deferred, {TOOL_SEARCH_TOOL_NAME}),
            )
        else:
            exposed = [self.search_tool.callback]
            exposed += [
                callbacks[name] for name in self.offered_tool_names(rounds, callbacks, preselected)
            ]
            options = options.replace(tool_callbacks=exposed)
        return request.replace(prompt=request.prompt.replace(options=options))

    def _defers_with(self, chain: AdvisorChain) -> bool:
        if not self.defer_loading:
            return False
        if getattr(chain.model, "loads_deferred_tools", False):
            return True
        if not self._warned_cannot_defer:
            self._warned_cannot_defer = True
            logger.warning(
                "%s: defer_loading=True, but %s cannot defer tools; the tools searches find "
                "are offered instead",
                self.name,
                type(chain.model).__name__,
            )
        return False

    async def do_get_next_instructions(
        self,
        request: ChatClientRequest,
        response: ChatClientResponse | None,
        result: ToolExecutionResult,
    ) -> Sequence[Message]:
        # The turn so far (also after a resumed round), whatever the model is sent next.
        request.turn[_SEARCH_TURN].rounds = self._found_rounds(result.conversation_history)
        return await super().do_get_next_instructions(request, response, result)

    # -- which tools are exposed ------------------------------------------------------------

    def offered_tool_names(
        self,
        rounds: Sequence[Sequence[str]],
        attached: Container[str],
        preselected: Sequence[str] = (),
    ) -> list[str]:
        """The tools a model call offers besides ``toolSearchTool`` (without deferred
        loading), given the names found by each ``toolSearchTool`` round the conversation
        holds (``rounds``: of earlier turns replayed, then of this turn; oldest first, each
        best first), the ``attached`` tool names and the tools offered without a search
        (``preselected``): in first-discovery order, the ``max_exposed_tools`` most recently
        found kept, only the last round counted with ``accumulate=False``. Benchmarks call it
        to count what a conversation's turns could call."""
        counted = rounds if self.accumulate else rounds[-1:]
        return self._kept([preselected, *counted], attached)

    @staticmethod
    def _found_rounds(messages: Sequence[Message]) -> list[list[str]]:
        """The names of each message's ``toolSearchTool`` results, oldest first."""
        rounds: list[list[str]] = []
        for message in messages:
            if not isinstance(message, ToolResponseMessage):
                continue
            results = [response for response in message.responses if _is_search(response.name)]
            if results:
                # Parallel searches of one round, best first together: A1, B1, A2, B2, ...
                found = itertools.zip_longest(*(_names(r.data, r.is_error) for r in results))
                rounds.append([name for names in found for name in names if name is not None])
        return rounds

    def _kept(self, rounds: Sequence[Sequence[str]], attached: Container[str]) -> list[str]:
        """The attached names found in ``rounds`` (oldest first, each best first), in
        first-discovery order, keeping the ``max_exposed_tools`` most recently found: those of
        later rounds first (a tool found again counts as recent), then, inside a round, the
        better ranked. Names not attached take no place."""
        first_order: dict[str, None] = {}
        recency: dict[str, tuple[int, int]] = {}
        for round_number, names in enumerate(rounds):
            for rank, name in enumerate(names):
                if name not in attached:
                    continue
                first_order.setdefault(name)
                recency[name] = max(recency.get(name, (round_number, -rank)), (round_number, -rank))
        if self.max_exposed_tools is None or len(first_order) <= self.max_exposed_tools:
            return list(first_order)
        recent = set(sorted(recency, key=recency.__getitem__)[-self.max_exposed_tools :])
        return [name for name in first_order if name in recent]


# Tool lists remembered (a service gives most conversations the same one, a few per user).
_KNOWN_CATALOGUES = 16


@dataclasses.dataclass(frozen=True, slots=True)
class _KnownCatalogue:
    callbacks: dict[str, ToolCallback]  # the searchable ones by name (read-only)
    references: ToolCatalogue
    fingerprint: str
    # What it was made from, held (so the ids of the first and last callback in its key are
    # not reused meanwhile): the tool list; its callbacks that may replace their definition,
    # with the definitions they had; the caller's categories (None: the default's).
    tools: tuple[ToolCallback, ...]
    variable: tuple[ToolCallback, ...]
    definitions: tuple[ToolDefinition, ...]
    categories: tuple[str | None, ...] | None

    def made_from(
        self, tools: tuple[ToolCallback, ...], categories: tuple[str | None, ...] | None
    ) -> bool:
        """Whether ``tools`` (with ``categories``) is the list this catalogue was made from,
        with the same definitions: compared by identity (tuple equality, in C), definitions
        read only of the callbacks that may replace theirs."""
        return (
            (self.tools is tools or self.tools == tools)
            and categories == self.categories
            and (not self.variable or tuple(map(_DEFINITION, self.variable)) == self.definitions)
        )


class _Turns:
    __slots__ = ("evict_after", "running")

    def __init__(self) -> None:
        self.running: dict[str, int] = {}  # session -> its turns under way
        self.evict_after: set[str] = set()  # evicted by the strategy during a turn


class _SessionLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = ProcessLock()
        self.users = 0  # threads holding or waiting for the lock


def _names(data: str, is_error: bool) -> list[str]:
    """The tool names of one search result; anything but a JSON list of strings gives none."""
    if is_error:
        return []
    try:
        parsed = json.loads(data)
    except (json.JSONDecodeError, TypeError):
        logger.debug("Ignoring a %s result that is not JSON: %.200s", TOOL_SEARCH_TOOL_NAME, data)
        return []
    if not isinstance(parsed, list) or not all(isinstance(name, str) for name in parsed):
        logger.debug("Ignoring a %s result that is not a list of names", TOOL_SEARCH_TOOL_NAME)
        return []
    return parsed


async def _replayed_by_inner_memory(
    advisor: ToolSearchToolCallingAdvisor, request: ChatClientRequest, chain: AdvisorChain
) -> list[Message]:
    """What the advisors after ``advisor`` in the chain (inside the tool loop) put before the
    prompt's messages: a memory's earlier turns (:class:`HistoryReplayer`)."""
    advisors = chain.advisors
    position = next((i for i, a in enumerate(advisors) if a is advisor), None)
    if position is None:
        return []
    replayed: list[Message] = []
    for inner in advisors[position + 1 :]:
        if isinstance(inner, HistoryReplayer):
            replayed += await inner.replayed_history(request)
    return replayed


def _ran_unsearched(messages: Sequence[Message]) -> list[str]:
    """The tools that gave a result (not an error) in ``messages`` before any
    ``toolSearchTool`` result named them, in the order they first ran. A search that names
    one later does not make it deferred: its earlier call would then name a tool that only a
    later result loads (OpenAI refuses such a call), and the tool list would change."""
    ran: dict[str, None] = {}
    named: set[str] = set()
    for message in messages:
        if not isinstance(message, ToolResponseMessage):
            continue
        searches = [r for r in message.responses if _is_search(r.name)]
        for response in message.responses:
            if (
                not _is_search(response.name)
                and not response.is_error
                and response.name not in named
            ):
                ran.setdefault(response.name)
        # After the round's other calls: those ran before the model saw these results.
        named.update(name for r in searches for name in _names(r.data, r.is_error))
    return list(ran)


def _is_search(tool_name: str) -> bool:
    return tool_name.lower() == TOOL_SEARCH_TOOL_NAME.lower()


def _last_user_text(messages: Sequence[Message]) -> str:
    return next((m.text for m in reversed(messages) if isinstance(m, UserMessage)), "")


def _with_suffix(messages: Sequence[Message], suffix: str) -> list[Message]:
    """The first system message gets the suffix; without one, a system message with the
    suffix alone comes first."""
    result = list(messages)
    for position, message in enumerate(result):
        if isinstance(message, SystemMessage):
            result[position] = message.model_copy(update={"text": message.text + suffix})
            return result
    return [SystemMessage(text=suffix.strip()), *result]
