"""Chat memory repositories: the shared contract, and SQLite's persistence and concurrency."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from _forking import in_child
from _memory_helpers import (
    answer,
    assert_no_message_lost,
    calls,
    results,
    system,
    user,
    write_messages,
)
from _servers import run_sql
from tooluse.memory import (
    ChatMemoryRepository,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
    PostgresChatMemoryRepository,
    PostgresDatabase,
    SqliteChatMemoryRepository,
)
from tooluse.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ProviderContent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    message_from_json,
)


@pytest.fixture(params=["in-memory", "sqlite", "postgres"])
def repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ChatMemoryRepository]:
    if request.param == "in-memory":
        yield InMemoryChatMemoryRepository()
    elif request.param == "sqlite":
        with SqliteChatMemoryRepository(tmp_path / "memory.db") as sqlite_repository:
            yield sqlite_repository
    else:
        conninfo = request.getfixturevalue("postgres_url")
        with PostgresChatMemoryRepository(conninfo) as postgres_repository:
            yield postgres_repository


def test_a_forked_child_reads_and_writes_the_parents_repository(
    repository: ChatMemoryRepository,
) -> None:
    # The child gets its own connection (SQLite, PostgreSQL) or its own copy (in memory).
    repository.save_all("parent", [UserMessage(text="from the parent")])
    connection = getattr(repository, "_connection", None)

    def child() -> list[Any]:
        repository.save_all("child", [UserMessage(text="from the child")])
        texts = [message.text for message in repository.find_by_conversation_id("parent")]
        own = connection is None or getattr(repository, "_connection", None) is not connection
        return [*texts, own]

    assert in_child(child) == ["from the parent", True]
    child_rows = repository.find_by_conversation_id("child")
    if isinstance(repository, InMemoryChatMemoryRepository):
        assert child_rows == []  # the child wrote to its own copy
    else:
        assert [message.text for message in child_rows] == ["from the child"]
    assert [m.text for m in repository.find_by_conversation_id("parent")] == ["from the parent"]


RICH_CONVERSATION: list[Message] = [
    system("你是助手"),
    UserMessage(text="北京天气？", metadata={"lang": "zh", "n": 1}),
    AssistantMessage(
        text="let me check",
        tool_calls=(
            ToolCall(id="c1", name="weather", arguments='{"city": "北京"}'),
            ToolCall(id="c2", name="time", arguments=""),
        ),
    ),
    ToolResponseMessage(
        responses=(
            ToolResponse(id="c1", name="weather", data='{"sky": "晴"}'),
            ToolResponse(id="c2", name="time", data="boom", is_error=True),
        )
    ),
    answer("晴天"),
]


def test_save_all_replaces_and_find_returns_a_copy(repository: ChatMemoryRepository) -> None:
    assert repository.find_by_conversation_id("c") == []
    repository.save_all("c", RICH_CONVERSATION)
    repository.save_all("c", RICH_CONVERSATION[:2])
    found = repository.find_by_conversation_id("c")
    assert found == RICH_CONVERSATION[:2]
    found.append(user("not stored"))
    assert repository.find_by_conversation_id("c") == RICH_CONVERSATION[:2]


def test_a_conversation_of_more_rows_than_one_statement_takes_round_trips(
    repository: ChatMemoryRepository,
) -> None:
    # PostgreSQL inserts at most 1,000 rows per statement.
    messages = [UserMessage(text=f"q{n}") for n in range(2500)]
    repository.save_all("c1", messages)
    assert repository.find_by_conversation_id("c1") == messages


def test_tool_calls_and_results_round_trip_intact(repository: ChatMemoryRepository) -> None:
    repository.save_all("c", RICH_CONVERSATION)
    assert repository.find_by_conversation_id("c") == RICH_CONVERSATION


def test_tool_result_images_round_trip(repository: ChatMemoryRepository) -> None:
    screenshot = ToolResponse(
        "c1", "lookup", '{"page": "home"}', images=[ImagePart("image/png", "iVBORw0KGgo=")]
    )
    conversation = [user("What is on screen?"), calls("c1"), ToolResponseMessage([screenshot])]
    repository.save_all("c", conversation)
    assert repository.find_by_conversation_id("c") == conversation


def test_provider_content_round_trips_block_for_block(repository: ChatMemoryRepository) -> None:
    blocks = [
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "北京"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "s1",
            "content": [{"type": "web_search_result", "url": "u", "page_age": None}],
        },
        {"type": "text", "text": "晴", "citations": [{"encrypted_index": "i", "n": 1.5}]},
        {"type": "tool_use", "id": "c1", "name": "weather", "input": {}},
    ]
    turn = AssistantMessage(
        text="晴",
        tool_calls=(ToolCall(id="c1", name="weather"),),
        provider_content=ProviderContent(provider="anthropic", blocks=blocks),
    )
    repository.save_all("c", [user("北京天气？"), turn])
    found = repository.find_by_conversation_id("c")[1]
    assert found == turn
    assert isinstance(found, AssistantMessage) and found.provider_content is not None
    assert list(found.provider_content.blocks) == blocks


def test_ids_listing_and_delete(repository: ChatMemoryRepository) -> None:
    repository.save_all("b", [user("x")])
    repository.save_all("a", [user("y")])
    assert sorted(repository.find_conversation_ids()) == ["a", "b"]
    repository.delete_by_conversation_id("a")
    repository.delete_by_conversation_id("never-existed")
    assert repository.find_conversation_ids() == ["b"]


def test_update_is_applied_to_the_stored_messages(repository: ChatMemoryRepository) -> None:
    repository.save_all("c", [user("one")])
    updated = repository.update("c", lambda stored: [*stored, answer("two")])
    assert updated == [user("one"), answer("two")]
    assert repository.find_by_conversation_id("c") == updated


def test_a_failing_update_leaves_the_conversation_unchanged(
    repository: ChatMemoryRepository,
) -> None:
    repository.save_all("c", [user("one")])

    def fail(stored: list[Message]) -> list[Message]:
        raise RuntimeError("change failed")

    with pytest.raises(RuntimeError, match="change failed"):
        repository.update("c", fail)
    assert repository.find_by_conversation_id("c") == [user("one")]
    repository.save_all("c", [user("still writable")])


def test_every_kind_of_update_leaves_what_it_returned(repository: ChatMemoryRepository) -> None:
    """The SQL repositories write an update that drops the first messages and appends as
    that (the dropped rows deleted, the new ones added), any other as the whole list again:
    the conversation is what the update returned."""
    repository.save_all("c", [user("one"), answer("two"), user("three")])
    changes = [
        lambda stored: [*stored, answer("four")],  # appended
        lambda stored: [*stored[2:], user("five"), answer("six")],  # the oldest two dropped
        lambda stored: list(stored),  # nothing changed
        lambda stored: [*stored[1:]],  # the oldest dropped, nothing new
        lambda stored: [stored[0], user("replaced"), *stored[2:]],  # one in the middle
        lambda stored: [user("first"), *stored],  # one put before
        lambda stored: [m.model_copy() for m in stored] + [answer("copies")],  # equal, not same
        lambda stored: [*stored, *stored],  # the same objects twice
        lambda stored: stored[len(stored) // 2 :],  # half dropped: one object stays twice
        lambda stored: [],  # all dropped
        lambda stored: [*stored, user("again")],
    ]
    for change in changes:
        expected = change(repository.find_by_conversation_id("c"))
        assert repository.update("c", change) == expected
        assert repository.find_by_conversation_id("c") == expected
    assert repository.find_by_conversation_id("c") == [user("again")]


def test_a_window_memory_over_sqlite_keeps_the_same_turns_as_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with SqliteChatMemoryRepository(path) as repository:
        on_file = MessageWindowChatMemory(max_messages=7, repository=repository)
        in_memory = MessageWindowChatMemory(max_messages=7)
        added = 0
        for turn in range(30):
            batch = [user(f"Q{turn}"), calls(f"s{turn}"), results(f"s{turn}"), answer(f"A{turn}")]
            batch = batch if turn % 3 else [batch[0], batch[3]]
            on_file.add("c", batch)
            in_memory.add("c", batch)
            added += len(batch)
            assert on_file.get("c") == in_memory.get("c")
            # Each turn was written as itself after the rows kept (evicting deleted rows):
            # the last row's position counts every message added.
            assert _positions(path)[-1][0] == added - 1


def _positions(location: str | Path) -> list[tuple[int, Any]]:
    """The rows of a SQLite file or a PostgreSQL database: position, message."""
    statement = "SELECT position, message FROM chat_memory_message ORDER BY position"
    return [(position, message) for position, message in run_sql(str(location), statement)]


def _opened(location: str) -> SqliteChatMemoryRepository | PostgresChatMemoryRepository:
    if location.startswith("postgresql://"):
        return PostgresChatMemoryRepository(location)
    return SqliteChatMemoryRepository(location)


def test_an_appending_update_writes_the_new_rows_only(store_location: str) -> None:
    path = store_location
    with _opened(store_location) as repository:
        repository.save_all("c", [user("one"), answer("two"), user("three")])
        before = _positions(path)
        repository.update("c", lambda stored: [*stored[1:], answer("four")])
        after = _positions(path)
        # The kept rows are where they were; the new one comes after the last.
        assert after[:2] == before[1:]
        assert [position for position, _ in after] == [1, 2, 3]
        repository.update("c", lambda stored: [user("zero"), *stored])  # not an append
        assert [position for position, _ in _positions(path)] == [4, 5, 6, 7]  # all again
        assert repository.find_by_conversation_id("c") == [
            user("zero"),
            answer("two"),
            user("three"),
            answer("four"),
        ]


def test_the_rows_are_numbered_again_before_the_largest_position(store_location: str) -> None:
    path = store_location
    with _opened(store_location) as repository:
        repository.save_all("c", [user("one")])
        # as if 2**31 - 1 messages came before
        run_sql(path, "UPDATE chat_memory_message SET position = ?", (2**31 - 1,))
        repository.update("c", lambda stored: [*stored, answer("two")])
        assert [position for position, _ in _positions(path)] == [0, 1]
        assert repository.find_by_conversation_id("c") == [user("one"), answer("two")]


def test_blank_ids_are_rejected(repository: ChatMemoryRepository) -> None:
    with pytest.raises(ValueError, match="conversation id must not be blank"):
        repository.save_all(" ", [user("x")])


ODD_IDS = ["x" * 10_000, "用户-42 😀", "'; DROP TABLE chat_memory_message; --", "%", "_", "a\\b"]


def test_odd_conversation_ids_are_kept_apart(repository: ChatMemoryRepository) -> None:
    for number, conversation_id in enumerate(ODD_IDS):
        repository.save_all(conversation_id, [user(f"message {number}")])
    for number, conversation_id in enumerate(ODD_IDS):
        assert repository.find_by_conversation_id(conversation_id) == [user(f"message {number}")]
    assert sorted(repository.find_conversation_ids()) == sorted(ODD_IDS)


@pytest.mark.parametrize(
    ("bad_id", "problem"),
    [("a\x00b", "NUL character at position 1"), ("user-\ud800", "lone surrogate at position 5")],
)
def test_ids_no_repository_can_store_are_refused_by_all_with_a_clear_error(
    repository: ChatMemoryRepository, bad_id: str, problem: str
) -> None:
    # SQLite raised a UnicodeEncodeError for a lone surrogate and PostgreSQL a DataError for a
    # NUL, while the in-memory repository took both: an id must work in every repository.
    for operation in (
        lambda: repository.save_all(bad_id, [user("x")]),
        lambda: repository.find_by_conversation_id(bad_id),
        lambda: repository.update(bad_id, lambda stored: stored),
        lambda: repository.delete_by_conversation_id(bad_id),
    ):
        with pytest.raises(ValueError, match=f"conversation id .* {problem}"):
            operation()


def test_message_text_with_nul_and_lone_surrogates_round_trips(
    repository: ChatMemoryRepository,
) -> None:
    # PostgreSQL's jsonb refuses \u0000 and unpaired surrogate escapes: a tool result holding
    # a NUL, or a model's "\ud800", made every later write of the conversation fail.
    conversation: list[Message] = [
        UserMessage(text="q\x00 \ud800 😀", metadata={"k\x00": "v\udfff"}),
        AssistantMessage(
            text="a\x00",
            tool_calls=(ToolCall(id="1\x00", name="t", arguments='{"a": "\\u0000 \udfff"}'),),
        ),
        ToolResponseMessage(responses=(ToolResponse(id="1\x00", name="t", data="bin\x00\x01"),)),
        answer("fine \\u0000 literal"),
    ]
    repository.save_all("c", conversation)
    assert repository.find_by_conversation_id("c") == conversation
    repository.update("c", lambda stored: [*stored, user("next\x00")])
    assert repository.find_by_conversation_id("c") == [*conversation, user("next\x00")]


def test_sqlite_file_is_in_wal_mode_with_a_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    SqliteChatMemoryRepository(path).close()
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute(
            "SELECT version FROM tooluse_schema_version WHERE component = 'chat_memory'"
        ).fetchone() == (1,)


def test_sqlite_refuses_a_file_of_another_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    SqliteChatMemoryRepository(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE tooluse_schema_version SET version = 99")
    with pytest.raises(RuntimeError, match=r"chat_memory schema version 99.*reads version 1"):
        SqliteChatMemoryRepository(path)


def test_sqlite_rows_of_an_older_release_keep_their_marks(tmp_path: Path) -> None:
    """Rows written before the typed message fields hold a paused turn's marks in
    ``metadata``: the resumed turn still replaces the turn's record."""
    path = tmp_path / "memory.db"
    SqliteChatMemoryRepository(path).close()
    record = [
        ("c", 0, "user", '{"role":"user","text":"Q","metadata":{"paused_turn":"t1"}}'),
        (
            "c",
            1,
            "assistant",
            '{"role":"assistant","text":"waits",'
            '"metadata":{"paused_turn":"t1","held_for_approval":["c1"]}}',
        ),
    ]
    with sqlite3.connect(path) as connection:
        connection.executemany("INSERT INTO chat_memory_message VALUES (?, ?, ?, ?)", record)
    repository = SqliteChatMemoryRepository(path)
    try:
        memory = MessageWindowChatMemory(repository=repository)
        resumed = [UserMessage(text="Q", paused_turn="t1"), AssistantMessage(text="A")]
        memory.add("c", resumed)
        assert memory.get("c") == resumed
    finally:
        repository.close()


def test_sqlite_persists_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with SqliteChatMemoryRepository(path) as repository:
        repository.save_all("c", RICH_CONVERSATION)
    script = (
        "import sys\n"
        "from tooluse.memory import MessageWindowChatMemory, SqliteChatMemoryRepository\n"
        "from tooluse.messages import UserMessage, messages_to_json\n"
        "repository = SqliteChatMemoryRepository(sys.argv[1])\n"
        "print(messages_to_json(repository.find_by_conversation_id('c')))\n"
        "MessageWindowChatMemory(repository=repository).add('c', UserMessage(text='from child'))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    from tooluse.messages import messages_from_json

    assert messages_from_json(child.stdout) == RICH_CONVERSATION
    with SqliteChatMemoryRepository(path) as reopened:
        assert reopened.find_by_conversation_id("c") == [*RICH_CONVERSATION, user("from child")]


def test_twenty_writer_threads_lose_no_message(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")
    shared = SqliteChatMemoryRepository(path)
    shared_memory = MessageWindowChatMemory(max_messages=10_000, repository=shared)
    per_writer = 10

    def writer(number: int) -> None:
        if number % 2:  # half share one connection, half open their own
            for n in range(per_writer):
                shared_memory.add("shared", user(f"writer {number} message {n}"))
        else:
            write_messages(path, "shared", number, per_writer)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = shared.find_by_conversation_id("shared")
    shared.close()
    assert_no_message_lost(stored, 20, per_writer)
    for w in range(20):  # each writer's messages stay in its order
        own = [m.text for m in stored if isinstance(m, UserMessage) and f"writer {w} " in m.text]
        assert own == [f"writer {w} message {n}" for n in range(per_writer)]


def test_twenty_writers_in_four_processes_lose_no_message(tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")  # a fresh file: the processes also race to create it
    go_file = tmp_path / "go"
    per_writer = 5
    helper = Path(__file__).with_name("_memory_helpers.py")
    arguments = [str(per_writer), str(go_file)]
    children = [
        subprocess.Popen(
            [sys.executable, str(helper), path, "shared", str(first), str(first + 5), *arguments],
            stdout=subprocess.PIPE,
            text=True,
        )
        for first in range(0, 20, 5)
    ]
    for child in children:  # every process is up before any writes
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
    go_file.touch()
    assert [child.wait(timeout=120) for child in children] == [0, 0, 0, 0]
    with SqliteChatMemoryRepository(path) as repository:
        stored = repository.find_by_conversation_id("shared")
    assert_no_message_lost(stored, 20, per_writer)


def test_window_memory_over_sqlite_keeps_tool_pairs(tmp_path: Path) -> None:
    with SqliteChatMemoryRepository(tmp_path / "memory.db") as repository:
        memory = MessageWindowChatMemory(max_messages=4, repository=repository)
        memory.add("c", [user("Q1"), calls("s1"), results("s1"), answer("Final")])
        memory.add("c", [user("Q2"), answer("A2")])
        assert memory.get("c") == [user("Q2"), answer("A2")]


@pytest.mark.parametrize("reads_first", [False, True], ids=["writes", "reads-then-writes"])
def test_postgres_twenty_writers_with_their_own_connections_lose_no_message(
    postgres_url: str, reads_first: bool
) -> None:
    PostgresChatMemoryRepository(postgres_url).close()  # create the schema once
    per_writer = 5

    def writer(number: int) -> None:
        with PostgresChatMemoryRepository(postgres_url) as own:
            memory = MessageWindowChatMemory(max_messages=10_000, repository=own)
            for n in range(per_writer):
                if reads_first:  # as a turn's start: its update is made from the read,
                    memory.get("shared")  # checked against the rows the others wrote since
                memory.add("shared", user(f"writer {number} message {n}"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with PostgresChatMemoryRepository(postgres_url) as repository:
        stored = repository.find_by_conversation_id("shared")
    assert_no_message_lost(stored, 20, per_writer)


def test_postgres_refuses_another_schema_version(postgres_url: str) -> None:
    PostgresChatMemoryRepository(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute("UPDATE tooluse_schema_version SET version = 99")
    with pytest.raises(RuntimeError, match=r"chat_memory schema version 99.*reads version 3"):
        PostgresChatMemoryRepository(postgres_url)


def test_sqlite_stores_a_conversation_holding_lone_surrogates(tmp_path: Path) -> None:
    repository = SqliteChatMemoryRepository(tmp_path / "memory.db")
    conversation = [
        UserMessage(text="q\ud800"),
        AssistantMessage(tool_calls=(ToolCall(id="1", name="t", arguments='{"a": "\udfff"}'),)),
    ]
    repository.save_all("c", conversation)
    assert repository.find_by_conversation_id("c") == conversation
    repository.close()


def test_postgres_a_database_of_the_first_schema_is_migrated_and_keeps_its_rows(
    postgres_url: str,
) -> None:
    # Version 1 is the table alone; version 2 adds the function a checked update calls, and
    # version 3 the one that gives back the digest of the rows it left.
    from tooluse.memory import _postgres
    from tooluse.messages import message_to_json

    with PostgresDatabase(postgres_url) as database:
        database.migrate("chat_memory", _postgres._MIGRATIONS[:1])
    for position, message in enumerate([user("Q1"), answer("A1")]):
        run_sql(
            postgres_url,
            "INSERT INTO chat_memory_message VALUES ('c', %s, %s, %s::jsonb)",
            (position, message.role, message_to_json(message)),
        )
    with PostgresChatMemoryRepository(postgres_url) as repository:
        memory = MessageWindowChatMemory(4, repository)
        assert memory.get("c") == [user("Q1"), answer("A1")]
        memory.add("c", [user("Q2"), answer("A2")])  # from the read: the function's write
    with PostgresChatMemoryRepository(postgres_url) as fresh:
        assert fresh.find_by_conversation_id("c") == [
            user("Q1"),
            answer("A1"),
            user("Q2"),
            answer("A2"),
        ]
    assert run_sql(
        postgres_url, "SELECT version FROM tooluse_schema_version WHERE component = 'chat_memory'"
    ) == [(3,)]


def test_postgres_keeps_ordinary_messages_as_json_objects(postgres_url: str) -> None:
    with PostgresChatMemoryRepository(postgres_url) as repository:
        repository.save_all("c", [user("plain 😀"), user("with \x00")])
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        kinds = connection.execute(
            "SELECT jsonb_typeof(message) FROM chat_memory_message ORDER BY position"
        ).fetchall()
    assert kinds == [("object",), ("string",)]  # only the one jsonb cannot hold is wrapped


def test_sqlite_parses_and_serialises_a_remembered_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each request reads a conversation's window and writes it back whole: the messages
    # of the window must not be parsed and serialised again every time.
    from tooluse.memory import _rows

    counts = {"parsed": 0, "serialised": 0}

    def counted(name: str, function: Any) -> Any:
        def wrapper(value: Any) -> Any:
            counts[name] += 1
            return function(value)

        return wrapper

    monkeypatch.setattr(_rows, "message_from_json", counted("parsed", _rows.message_from_json))
    monkeypatch.setattr(_rows, "message_to_json", counted("serialised", _rows.message_to_json))
    with SqliteChatMemoryRepository(tmp_path / "memory.db") as repository:
        memory = MessageWindowChatMemory(10, repository)
        first = [UserMessage(text="Weather in Paris?"), AssistantMessage(text="Sunny.")]
        memory.add("c1", first)
        for turn in range(3):
            assert memory.get("c1")[:2] == first
            memory.add("c1", [UserMessage(text=f"And {turn}?"), AssistantMessage(text="Same.")])
    assert counts == {"parsed": 0, "serialised": 8}  # each message once, when first stored
    with SqliteChatMemoryRepository(tmp_path / "memory.db") as repository:
        assert len(repository.find_by_conversation_id("c1")) == 8


def test_postgres_parses_a_remembered_message_once_and_reads_a_changed_row_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service turn reads the window twice (its start, its write): each message's row was
    # parsed on every read. jsonb gives back its own text, not the one written: a message
    # is parsed once, when first read.
    from tooluse.memory import _rows

    parsed: list[str] = []

    def counted(text: str) -> Message:
        parsed.append(text)
        return message_from_json(text)

    monkeypatch.setattr(_rows, "message_from_json", counted)
    with PostgresChatMemoryRepository(postgres_url) as repository:
        memory = MessageWindowChatMemory(10, repository)
        first = [UserMessage(text="Weather in Paris?"), AssistantMessage(text="Sunny.")]
        memory.add("c1", first)
        for turn in range(3):
            assert memory.get("c1")[:2] == first
            memory.add("c1", [UserMessage(text=f"And {turn}?"), AssistantMessage(text=f"{turn}.")])
        assert len(parsed) == 6  # all but the last turn's two, never read
        again = repository.find_by_conversation_id("c1")
        assert len(parsed) == 8
        read_again = repository.find_by_conversation_id("c1")
        assert len(parsed) == 8
        assert all(a is b for a, b in zip(again, read_again, strict=True))
        run_sql(  # another writer changes a row: read as it is now, not as remembered
            postgres_url,
            "UPDATE chat_memory_message SET message = jsonb_set(message, '{text}', "
            "'\"Rainy.\"') WHERE position = 1",
        )
        changed = repository.find_by_conversation_id("c1")
    assert changed[1] == AssistantMessage(text="Rainy.")
    assert changed[0] is again[0] and changed[2:] == again[2:]


def test_the_remembered_message_texts_are_bounded() -> None:
    from tooluse.memory._rows import _MessageTexts

    texts = _MessageTexts(2)
    messages = [UserMessage(text=str(n)) for n in range(3)]
    first = texts.texts(messages)
    assert texts.messages(first[1:]) == messages[1:]  # the newest two are held
    assert len(texts._messages) == len(texts._texts) == 2
    reparsed = texts.messages(first[:1])[0]
    assert reparsed == messages[0] and reparsed is not messages[0]  # the oldest went


@pytest.fixture
def postgres_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The conversations the PostgreSQL repositories read (a read of their rows: before
    returning them, or under the lock of an update), in order."""
    from tooluse.memory import _postgres

    reads: list[str] = []
    load = _postgres._load

    def counted(connection: Any, conversation_id: str, *also: Any) -> Any:
        reads.append(conversation_id)
        return load(connection, conversation_id, *also)

    monkeypatch.setattr(_postgres, "_load", counted)
    return reads


def test_postgres_updates_a_window_it_read_without_reading_it_again(
    postgres_url: str, postgres_reads: list[str]
) -> None:
    # A service turn reads its window when it starts and writes it when it ends: the write
    # checks the rows are as read in the statement that writes them, instead of reading
    # them again under the lock.
    reference = MessageWindowChatMemory(4, InMemoryChatMemoryRepository())
    with PostgresChatMemoryRepository(postgres_url) as repository:
        memory = MessageWindowChatMemory(4, repository)
        turns = [
            [user("Q1"), answer("A1")],
            [user("Q2"), answer("A2")],
            [user("Q3"), calls("s1"), results("s1"), answer("A3")],
            [user("Q4")],
        ]
        for turn in turns:
            reference.add("c", turn)
        memory.add("c", turns[0])  # nothing read before: read under the lock
        assert postgres_reads == ["c"]
        assert memory.get("c") == turns[0]
        memory.add("c", turns[1])
        assert memory.get("c") == turns[0] + turns[1]
        memory.add("c", turns[2])  # the window moves on
        assert postgres_reads == ["c", "c", "c"]  # the gets' reads only
        memory.add("c", turns[3])  # from the rows the update before left, as it knows them
        assert postgres_reads == ["c", "c", "c"]
        assert repository.remembered("c") == reference.get("c")
        memory.get("e")  # a conversation without rows yet
        memory.add("e", [user("first")])
        assert postgres_reads[3:] == ["e"]
    with PostgresChatMemoryRepository(postgres_url) as fresh:
        assert fresh.find_by_conversation_id("c") == reference.get("c")
        assert fresh.find_by_conversation_id("e") == [user("first")]


@pytest.mark.parametrize(
    "meanwhile",
    [
        pytest.param(lambda other: other.save_all("c", [user("X1"), answer("Y1")]), id="same-rows"),
        pytest.param(lambda other: other.delete_by_conversation_id("c"), id="cleared"),
        pytest.param(
            lambda other: MessageWindowChatMemory(4, other).add("c", user("other's")),
            id="added",
        ),
        pytest.param(  # the same texts at other positions (the window moved on)
            lambda other: MessageWindowChatMemory(2, other).add("c", [user("Q1"), answer("A1")]),
            id="same-texts-moved",
        ),
    ],
)
@pytest.mark.parametrize("known_by", ["read", "written"])
def test_postgres_updates_a_window_changed_since_it_was_read_as_it_is_now(
    postgres_url: str,
    postgres_reads: list[str],
    meanwhile: Callable[[Any], None],
    known_by: str,
) -> None:
    # Another writer (a worker, `tooluse chat`) between a read, or the repository's own
    # write, and the update: the rows are not those known, even at the same positions
    # (same-rows), so nothing is written from them; they are read again under the lock and
    # the update made on them.
    with (
        PostgresChatMemoryRepository(postgres_url) as repository,
        PostgresChatMemoryRepository(postgres_url) as other,
    ):
        repository.save_all("c", [user("Q1"), answer("A1")])
        memory = MessageWindowChatMemory(4, repository)
        memory.get("c")
        if known_by == "written":
            memory.add("c", answer("A1, again"))
            assert repository.remembered("c") == other.find_by_conversation_id("c")
        meanwhile(other)
        reference = MessageWindowChatMemory(4, InMemoryChatMemoryRepository())
        reference.repository.save_all("c", other.find_by_conversation_id("c"))
        reference.add("c", [user("Q2"), answer("A2")])
        reads = len(postgres_reads)
        memory.add("c", [user("Q2"), answer("A2")])
        assert len(postgres_reads) == reads + 1  # read again under the lock
        assert other.find_by_conversation_id("c") == reference.get("c")


def test_postgres_remembers_the_reads_of_a_bounded_number_of_conversations(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, postgres_reads: list[str]
) -> None:
    from tooluse.memory import _postgres

    monkeypatch.setattr(_postgres, "_SEEN_CONVERSATIONS", 2)
    with PostgresChatMemoryRepository(postgres_url) as repository:
        memory = MessageWindowChatMemory(4, repository)
        for conversation in ("a", "b", "c"):
            memory.get(conversation)
        assert len(repository._seen) == 2
        memory.add("a", user("x"))  # its read was forgotten: read under the lock
        memory.add("c", user("y"))
    assert postgres_reads == ["a", "b", "c", "a"]


def test_postgres_reads_a_window_and_whether_another_query_finds_a_row_in_one_statement(
    postgres_url: str, postgres_reads: list[str]
) -> None:
    with PostgresChatMemoryRepository(postgres_url) as repository:
        repository.save_all("c", [user("Q1"), answer("A1")])
        assert repository.find_by_conversation_id_with_exists(
            "c", "SELECT FROM chat_memory_message WHERE role = %s", ("assistant",)
        ) == ([user("Q1"), answer("A1")], True)
        assert repository.find_by_conversation_id_with_exists("c", "SELECT WHERE false") == (
            [user("Q1"), answer("A1")],
            False,
        )
        for found in ("true", "false"):  # a conversation without rows
            assert repository.find_by_conversation_id_with_exists(
                "none", f"SELECT WHERE {found}"
            ) == ([], found == "true")
        MessageWindowChatMemory(4, repository).add("c", user("Q2"))  # from the read above
        assert postgres_reads == []  # none read again under the lock
        assert repository.find_by_conversation_id("c") == [user("Q1"), answer("A1"), user("Q2")]


def test_postgres_a_checked_write_that_fails_writes_nothing_and_holds_no_lock(
    postgres_url: str,
) -> None:
    # The lock and the write after a read go in one pipeline, one implicit transaction: a
    # write PostgreSQL refuses rolls the lock back with it, and the connection (the pool's
    # only one) goes on.
    with (
        PostgresDatabase(postgres_url, max_size=1) as database,
        PostgresChatMemoryRepository(database) as repository,
    ):
        repository.save_all("c", [user("Q1"), answer("A1")])
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.message->>'text' = 'refused' THEN RAISE EXCEPTION 'refused row'; "
                "END IF; RETURN NEW; END $$"
            )
            connection.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON chat_memory_message "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
            memory = MessageWindowChatMemory(4, repository)
            memory.get("c")
            with pytest.raises(psycopg.errors.RaiseException, match="refused row"):
                memory.add("c", [user("Q2"), answer("refused")])
            assert repository.find_by_conversation_id("c") == [user("Q1"), answer("A1")]
            locked = connection.execute(
                "SELECT pg_try_advisory_lock(hashtextextended('c', 0))"
            ).fetchone()
            assert locked == (True,)  # another host's writer would take it
            connection.execute("SELECT pg_advisory_unlock(hashtextextended('c', 0))")
            memory.get("c")
            memory.add("c", [user("Q2"), answer("A2")])
        assert repository.find_by_conversation_id("c") == [
            user("Q1"), answer("A1"), user("Q2"), answer("A2")
        ]  # fmt: skip


def test_postgres_a_read_whose_other_query_fails_raises_it_and_the_connection_goes_on(
    postgres_url: str,
) -> None:
    with (
        PostgresDatabase(postgres_url, max_size=1) as database,  # the failed read's connection
        PostgresChatMemoryRepository(database) as repository,
    ):
        repository.save_all("c", [user("Q1")])
        with pytest.raises(psycopg.errors.UndefinedTable, match="nowhere"):
            repository.find_by_conversation_id_with_exists("c", "SELECT 1 FROM nowhere")
        assert repository.find_by_conversation_id_with_exists("c", "SELECT %s", ("x",)) == (
            [user("Q1")],
            True,
        )


def test_postgres_a_checked_write_holds_the_conversations_lock_while_it_writes(
    postgres_url: str,
) -> None:
    # The lock and the write go in one transaction (one Sync for both): were the lock its
    # own transaction, it would be released before the write ran.
    with PostgresChatMemoryRepository(postgres_url) as repository:
        repository.save_all("c", [user("Q1"), answer("A1")])
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute("CREATE TABLE lock_seen (held BOOLEAN)")
            connection.execute(
                "CREATE FUNCTION record_lock() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "INSERT INTO lock_seen SELECT EXISTS (SELECT FROM pg_locks WHERE "
                "locktype = 'advisory' AND pid = pg_backend_pid() AND granted); "
                "RETURN NEW; END $$"
            )
            connection.execute(
                "CREATE TRIGGER record_lock BEFORE INSERT ON chat_memory_message "
                "FOR EACH ROW EXECUTE FUNCTION record_lock()"
            )
            memory = MessageWindowChatMemory(4, repository)
            memory.get("c")
            memory.add("c", [user("Q2"), answer("A2")])
            seen = connection.execute("SELECT held FROM lock_seen").fetchall()
        assert seen == [(True,), (True,)]  # a row each
        assert repository.find_by_conversation_id("c")[2:] == [user("Q2"), answer("A2")]


async def test_postgres_reads_and_updates_a_window_on_the_event_loop(
    postgres_url: str, postgres_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service's turns: aget and aadd run on the loop's own connections, no thread; an
    # update of rows another writer changed since they were read is made as they are now
    # (read again under the lock, in a thread).
    from tooluse.memory import _postgres

    threads: list[int] = []
    load = _postgres._load

    def in_thread(connection: Any, conversation_id: str, *also: Any) -> Any:
        threads.append(threading.get_ident())
        return load(connection, conversation_id, *also)

    monkeypatch.setattr(_postgres, "_load", in_thread)
    reference = MessageWindowChatMemory(4, InMemoryChatMemoryRepository())
    with (
        PostgresChatMemoryRepository(postgres_url) as repository,
        PostgresChatMemoryRepository(postgres_url) as other,
    ):
        memory = MessageWindowChatMemory(4, repository)
        turns = [
            [user("Q1"), answer("A1")],
            [user("Q2"), answer("A2")],
            [user("Q3"), calls("s1"), results("s1"), answer("A3")],
        ]
        await memory.aadd("c", turns[0])  # nothing read before: read under the lock
        reference.add("c", turns[0])
        assert postgres_reads == ["c"] and threading.get_ident() not in threads
        for turn in turns[1:]:  # each from the read before it, on the loop
            assert await memory.aget("c") == reference.get("c")
            await memory.aadd("c", turn)
            reference.add("c", turn)
        assert postgres_reads == ["c"]
        assert other.find_by_conversation_id("c") == reference.get("c")  # the window moved
        await memory.aget("c")
        other.save_all("c", [user("X1"), answer("Y1")])  # another writer meanwhile
        reads = len(postgres_reads)
        await memory.aadd("c", [user("Q4")])
        assert len(postgres_reads) == reads + 1  # read again under the lock
        assert other.find_by_conversation_id("c") == [user("X1"), answer("Y1"), user("Q4")]
        assert await repository.afind_by_conversation_id_with_exists(
            "c", "SELECT WHERE %s = 'it''s'", ("it's",)
        ) == ([user("X1"), answer("Y1"), user("Q4")], True)
        assert await repository.afind_by_conversation_id("none") == []


async def test_postgres_an_update_and_a_write_given_with_it_are_made_both_or_neither(
    postgres_url: str,
) -> None:
    # The service's display record of a turn goes in its memory write's transaction: from
    # the rows read, under the lock when another writer changed them, and not at all when
    # either fails.
    run_sql(postgres_url, "CREATE TABLE shown (note TEXT NOT NULL)")
    with (
        PostgresChatMemoryRepository(postgres_url) as repository,
        PostgresChatMemoryRepository(postgres_url) as other,
    ):
        memory = MessageWindowChatMemory(4, repository)
        insert = "INSERT INTO shown VALUES (%s)"
        await memory.aadd("c", [user("Q1"), answer("A1")])
        await memory.aget("c")
        await memory.aadd_with("c", [user("Q2"), answer("A2")], (insert, ("read",)))
        await memory.aget("c")
        other.save_all("c", [user("X1")])  # another writer: the update made under the lock
        await memory.aadd_with("c", [user("Q3")], (insert, ("changed",)))
        assert run_sql(postgres_url, "SELECT note FROM shown ORDER BY note") == [
            ("changed",),
            ("read",),
        ]
        assert other.find_by_conversation_id("c") == [user("X1"), user("Q3")]
        for changed in (False, True):
            await memory.aget("c")
            if changed:
                other.save_all("c", [user("X2")])
            before = other.find_by_conversation_id("c")
            with pytest.raises(psycopg.errors.NotNullViolation):
                await memory.aadd_with("c", [user("lost")], (insert, (None,)))
            assert other.find_by_conversation_id("c") == before  # nothing of either
        assert len(run_sql(postgres_url, "SELECT note FROM shown")) == 2
        with pytest.raises(ValueError, match="writes messages"):
            await memory.aadd_with("c", [], (insert, ("none",)))
