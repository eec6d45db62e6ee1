"""One big question must not hold up everyone else's: the knowledge base embeds a bounded
part of a question, so a question sent while a megabyte-long one is answered waits about as
long as it would alone. With the bundled embedding model, as the service runs by default."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from _service_helpers import running
from tooluse.embedding import default_embedding_model
from tooluse.service import ServiceConfig, create_app

# A delay of the small question past this means it waited for the big one's embedding (the
# whole megabyte took 30 s and more on two cores; one window takes 0.2 s).
SMALL_QUESTION_BOUND = 10.0


async def test_a_big_question_does_not_hold_up_a_small_one(tmp_path: Path) -> None:
    app = create_app(ServiceConfig(db=tmp_path / "s.db", embedding_model=default_embedding_model()))
    big = "Please read all of this. " * 40_000 + "What is the return policy?"  # 1 MB
    assert len(big.encode()) < app.state.service.config.max_request_bytes
    async with running(app) as http:
        await asyncio.to_thread(app.state.service.knowledge.wait, 300)  # the model loaded

        async def ask(question: str) -> float:
            started = time.monotonic()
            body = {"model": "m", "messages": [{"role": "user", "content": question}]}
            response = await http.post("/v1/chat/completions", json=body, timeout=300)
            assert response.status_code == 200, response.text[:300]
            return time.monotonic() - started

        alone = await ask("What is the return policy?")
        big_one = asyncio.ensure_future(ask(big))
        await asyncio.sleep(0.2)  # the big one is being answered
        beside_the_big_one = await ask("How long does shipping take?")
        await big_one
    assert beside_the_big_one < alone + SMALL_QUESTION_BOUND
