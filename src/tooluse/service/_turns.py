"""``ConversationTurns``: the turns of one conversation run one after another, on one worker
or, with Redis, across all of them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tooluse._redis import async_redis_client

__all__ = ["DEFAULT_TURN_LEASE", "ConversationTurns", "RedisTurnLocks", "TurnLease"]

logger = logging.getLogger("tooluse.service")

DEFAULT_TURN_LEASE = 30.0
"""Seconds a worker's hold on a conversation lasts unless renewed: it renews it while the turn
runs, so a worker that dies holds the conversation this long at most."""


_CONNECTIONS = 64  # to Redis per worker, for its turns' locks
# How long Redis keeps the name of the worker that ended a conversation's last turn answered.
_LAST_HOLDER_MS = 24 * 3600 * 1000


class TurnLease:
    """A running turn's hold on its conversation (:meth:`ConversationTurns.turn`).

    ``continues_here``: the conversation's last turn ran on this worker and ended answered,
    and no other worker has held the conversation since, so its memory is as this worker
    left it and none of its runs waits for approval (a pause ends a turn unanswered). Only
    known with Redis (:class:`RedisTurnLocks`); else ``False``. ``watchers``: how many
    subscribers the conversation's events had as the lock was taken, when the locks were
    told their channel (``None``: not asked). ``answered``: this turn reached ``done`` (the
    turn sets it), which the conversation's next lease tells."""

    __slots__ = ("answered", "continues_here", "watchers")

    def __init__(self, continues_here: bool = False, watchers: int | None = None) -> None:
        self.continues_here = continues_here
        self.watchers = watchers
        self.answered = False


class RedisTurnLocks:
    """One lock per conversation in Redis (a key set with ``NX`` and an expiry, as
    redis-py's ``Lock`` does, released only by its holder), shared by every worker on
    ``url``. A held lock is renewed every third of ``lease`` seconds; when a worker dies, its
    lock expires after ``lease`` seconds and the others go on, unless a worker that knows it
    dead frees its locks first (:meth:`release_held_by`: the value of each lock starts with
    its holder's ``owner``, default a random name). ``sends`` runs a lock's taking and its
    release (Redis commands; their replies as Redis gives them): by default on a connection
    of the locks; the service gives :meth:`ConversationEvents.after_published
    <tooluse.service._conversation_events.ConversationEvents.after_published>`, so that they
    go on the events' held connection, and a turn's last events and its release go to Redis
    in one round trip. With ``channel_of`` (a conversation's events' channel), taking a lock
    also counts that channel's subscribers (:attr:`TurnLease.watchers`), in the same
    round trip. Needs ``pip install 'tooluse[redis]'``."""

    def __init__(
        self,
        url: str,
        *,
        lease: float = DEFAULT_TURN_LEASE,
        prefix: str = "tooluse:turn:",
        owner: str | None = None,
        sends: Callable[..., Awaitable[Any]] | None = None,
        channel_of: Callable[[str], str] | None = None,
    ) -> None:
        if not lease > 0:
            raise ValueError(f"lease must be > 0 seconds, got {lease}")
        owner = uuid.uuid4().hex if owner is None else owner
        if not owner or _OWNER_END in owner:
            raise ValueError(f"owner must be a name without {_OWNER_END!r}, got {owner!r}")
        # A command beyond the pool's connections waits for one (redis-py's default pool
        # raises "Too many connections" past 100: a worker with more turns running at once
        # failed them), for as long as a lease lasts.
        self._client = async_redis_client(
            url, "A service on Redis", max_connections=_CONNECTIONS, timeout=lease
        )
        self._release_of = self._client.register_script(_RELEASE_OF_OWNER)
        self._command: Callable[..., Awaitable[Any]] = self._client.execute_command
        self._sends = self._command if sends is None else sends
        self._lease = lease
        self._lease_ms = max(1, round(lease * 1000))
        self._prefix = prefix
        # Beside the locks, not under their prefix: release_held_by scans the locks.
        self._last_prefix = prefix.rstrip(":") + "-last:"
        self._owner = owner
        self._owner_bytes = owner.encode()
        self._channel_of = channel_of

    @contextlib.asynccontextmanager
    async def hold(self, conversation_id: str) -> AsyncIterator[TurnLease]:
        """Held while this worker runs a turn of ``conversation_id``; waits for another
        worker's turn of it to end. The lease tells whether this worker ended the
        conversation's last turn answered, nobody having held it since: the release of a
        turn whose lease was marked ``answered`` leaves this worker's name beside the lock
        (any other release removes it), and taking the lock reads it, in the same round
        trips."""
        key = self._prefix + conversation_id
        last = self._last_prefix + conversation_id
        # The token (the key's value) names this worker, so that one that knows it dead can
        # free its locks; the random part tells this turn's hold from its others'.
        token = f"{self._owner}{_OWNER_END}{uuid.uuid4().hex}"
        channel = "" if self._channel_of is None else self._channel_of(conversation_id)
        while True:
            taken = await self._sends("EVAL", _TAKE, 2, key, last, token, self._lease_ms, channel)
            if taken[0]:
                break
            await asyncio.sleep(_RETRY_SECONDS)
        watchers = None if taken[2] < 0 else taken[2]
        lease = TurnLease(continues_here=taken[1] == self._owner_bytes, watchers=watchers)
        renewing = asyncio.create_task(self._renew(key, token, conversation_id))
        try:
            yield lease
        finally:
            renewing.cancel()
            holder = self._owner if lease.answered else ""
            try:  # sent before anything here waits: with the events just published (done)
                released = await self._sends(
                    "EVAL", _RELEASE, 2, key, last, token, holder, _LAST_HOLDER_MS
                )
            finally:
                with contextlib.suppress(asyncio.CancelledError):
                    await renewing
            if not released:  # it expired while held (logged by the renewal) and was taken
                logger.warning(
                    "the Redis lock of conversation %r was no longer this worker's at the "
                    "turn's end",
                    conversation_id,
                )

    async def _renew(self, key: str, token: str, conversation_id: str) -> None:
        while True:
            await asyncio.sleep(self._lease / 3)
            if not await self._command("EVAL", _RENEW, 1, key, token, self._lease_ms):
                logger.warning(
                    "the Redis lock of conversation %r expired while its turn ran: another "
                    "worker may run a turn of it at the same time",
                    conversation_id,
                )
                return

    async def release_held_by(self, owner: str) -> list[str]:
        """Free the locks held by the worker named ``owner``, known dead (its turns will not
        end, nor renew their locks): the conversations freed, which the others need not
        wait the lease for. Each lock is compared and deleted in one script, so a lock that
        changed hands meanwhile stays."""
        freed = []
        async for key in self._client.scan_iter(match=self._prefix + "*", count=1000):
            if await self._release_of(keys=[key], args=[owner + _OWNER_END]):
                freed.append(key.decode()[len(self._prefix) :])
        if freed:
            logger.warning(
                "worker %s died holding conversation(s) %s: freed", owner, ", ".join(freed)
            )
        return freed

    async def ping(self) -> None:
        """Raise ``redis.RedisError`` unless the server answers."""
        await self._client.ping()

    async def aclose(self) -> None:
        await self._client.aclose()


# Between a lock's owner and the rest of its token: a character no executor id holds.
_OWNER_END = "/"

# Seconds between two tries to take a lock another turn holds.
_RETRY_SECONDS = 0.05

# Take the lock KEYS[1] for the token ARGV[1] for ARGV[2] ms unless it is held: {1, the
# worker named beside it in KEYS[2] or '', the subscribers of the channel ARGV[3] or -1 for
# none given}, else {0}.
_TAKE = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local watchers = -1
    if ARGV[3] ~= '' then
        watchers = redis.call('pubsub', 'numsub', ARGV[3])[2]
    end
    return {1, redis.call('get', KEYS[2]) or '', watchers}
end
return {0}
"""

# Delete the lock KEYS[1] if it holds the token ARGV[1] (redis-py's Lock's rule) and name
# the worker ARGV[2] beside it in KEYS[2] for ARGV[3] ms ('': nobody): 1, else 0.
_RELEASE = """
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
redis.call('del', KEYS[1])
if ARGV[2] == '' then
    redis.call('del', KEYS[2])
else
    redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return 1
"""

# Give the lock KEYS[1] ARGV[2] ms more if it holds the token ARGV[1]: 1, else 0.
_RENEW = """
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
"""

# Delete the lock KEYS[1] if its token starts with ARGV[1] (its owner and _OWNER_END).
_RELEASE_OF_OWNER = """
local token = redis.call('get', KEYS[1])
if token and string.sub(token, 1, string.len(ARGV[1])) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


class ConversationTurns:
    """One turn at a time per conversation; the turns of other conversations are not held up.

    A turn reads its conversation's memory when it starts and writes it when it ends. A turn
    that started while another turn of the same conversation ran would read the memory as
    it was before that turn: a message sent while an approved call runs would read the
    paused turn's account, that the call did not run. So a turn waits for the conversation's
    running turn (a new question, or a resumed run) to end, in the order they came.

    The locks live in this process, on the event loop that serves the app; a conversation's
    lock is dropped once no turn holds it or waits for it. With ``shared`` (the service's
    workers on one Redis), a turn also holds the conversation's lock there, so the turns of
    a conversation run one at a time whichever workers they come to (in the order they came
    on each worker; across workers, in the order Redis grants the lock).
    """

    __slots__ = ("_locks", "_shared", "_users")

    def __init__(self, shared: RedisTurnLocks | None = None) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: Counter[str] = Counter()  # the turns holding or waiting for each lock
        self._shared = shared

    @contextlib.asynccontextmanager
    async def turn(self, conversation_id: str | None) -> AsyncIterator[TurnLease]:
        """Held while a turn of ``conversation_id`` runs; waits for the one running. A run
        without a conversation (``None``: its history came with it) waits for nothing. The
        lease says whether the turn continues this worker's last one (with Redis)."""
        if conversation_id is None:
            yield TurnLease()
            return
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        self._users[conversation_id] += 1
        try:
            async with lock, self._held_everywhere(conversation_id) as lease:
                yield lease
        finally:
            self._users[conversation_id] -= 1
            if not self._users[conversation_id]:
                del self._users[conversation_id], self._locks[conversation_id]

    def _held_everywhere(
        self, conversation_id: str
    ) -> contextlib.AbstractAsyncContextManager[TurnLease]:
        if self._shared is None:
            return contextlib.nullcontext(TurnLease())
        return self._shared.hold(conversation_id)

    async def check(self) -> None:
        """Make sure Redis answers, if the turns are shared through it."""
        if self._shared is not None:
            await self._shared.ping()

    async def aclose(self) -> None:
        """Close the connections to Redis, if any."""
        if self._shared is not None:
            await self._shared.aclose()

    def __len__(self) -> int:
        """How many conversations have a turn running or waiting."""
        return len(self._locks)
