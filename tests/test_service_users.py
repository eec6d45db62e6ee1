"""Users and tenants in ``tooluse serve``: per-user keys, a trusted proxy's headers and JWTs
name the caller; a user's conversations and paused runs are theirs (anyone else gets 404,
as for an id that does not exist); the caller reaches the tools' context and the audit log
from the authentication, never from the model; who may see and use each tool is cut before
the model is offered them."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from _service_helpers import config, fake_llm, names, parse_sse, serve_without_listening
from tooluse.calling import SqliteAuditLog, ToolAccess, ToolAccessPolicy
from tooluse.cli import main
from tooluse.mcp import InProcessServer, ToolSettings, mcp_server, mcp_servers_from_config
from tooluse.service import (
    ApiKeys,
    Authenticator,
    Credentials,
    JwtBearer,
    TrustedProxyHeaders,
    create_app,
    load_tool_access,
)
from tooluse.tools import ToolContext, tool

KEYS = {
    "keys": [
        {"key": "ann-key", "user": "ann", "tenant": "acme", "roles": ["customer"]},
        {"key": "sam-key", "user": "sam", "tenant": "acme", "roles": ["support"]},
        # the key kept out of the file: its SHA-256 only
        {"sha256": hashlib.sha256(b"bob-key").hexdigest(), "user": "bob", "tenant": "globex"},
    ]
}
ANN = {"Authorization": "Bearer ann-key"}
SAM = {"Authorization": "Bearer sam-key"}
BOB = {"Authorization": "Bearer bob-key"}
SHARED = {"Authorization": "Bearer s3cret"}


@contextlib.asynccontextmanager
async def serving(
    db: Path, *, peer: tuple[str, int] = ("127.0.0.1", 50000), **changes: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The app on ``db`` with an in-process client whose requests come from ``peer``."""
    changes.setdefault("model", fake_llm())
    app = create_app(config(db, **changes))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=peer)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


def keys_file(tmp_path: Path) -> ApiKeys:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(KEYS), encoding="utf-8")
    return ApiKeys.from_file(path)


async def chat(
    client: httpx.AsyncClient, headers: dict[str, str], message: str, conversation: str | None
) -> httpx.Response:
    body: dict[str, Any] = {"message": message}
    if conversation is not None:
        body["conversation_id"] = conversation
    return await client.post("/api/chat", json=body, headers=headers)


async def test_a_user_s_conversation_and_approvals_are_404_to_anyone_else(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with serving(db, api_key="s3cret", authenticators=[keys_file(tmp_path)]) as client:
        answered = parse_sse((await chat(client, ANN, "Weather in Paris?", "ann-1")).text)
        assert names(answered)[-1] == "done"
        paused = parse_sse((await chat(client, ANN, "Cancel order A1001", "ann-2")).text)
        assert names(paused)[-1] == "approval_required"
        approval = paused[-1][1]["approval_id"]

        nowhere = await client.get("/api/conversations/nobody-has-this", headers=ANN)
        assert nowhere.status_code == 404
        for other in (BOB, SAM, SHARED):  # another user, of the same tenant too, or the key
            read = await client.get("/api/conversations/ann-1", headers=other)
            assert (read.status_code, read.json()["detail"]) == (
                404,
                nowhere.json()["detail"].replace("nobody-has-this", "ann-1"),
            )
            written = await chat(client, other, "And in Rome?", "ann-1")
            assert written.status_code == 404
            listed = await client.get("/api/approvals?conversation_id=ann-2", headers=other)
            assert listed.json() == []  # as for a conversation that does not exist
            shown = await client.get(f"/api/approvals/{approval}", headers=other)
            unknown = await client.get("/api/approvals/0123", headers=other)
            assert shown.status_code == unknown.status_code == 404
            assert shown.json()["detail"] == unknown.json()["detail"].replace("0123", approval)
            for decision in ({"approve": True}, {"approve": False, "message": "no"}):
                decided = await client.post(
                    f"/api/approvals/{approval}",
                    json={"decisions": {"cancel-1": decision}},
                    headers=other,
                )
                assert decided.status_code == 404
        # Nothing anyone else sent changed the conversation or the run.
        mine = await client.get("/api/conversations/ann-1", headers=ANN)
        assert [m["text"] for m in mine.json()["messages"]] == [
            "Weather in Paris?",
            "From live data.",
        ]
        assert (await client.get(f"/api/approvals/{approval}", headers=ANN)).json()["status"] == (
            "pending"
        )
        resumed = await client.post(
            f"/api/approvals/{approval}",
            json={"decisions": {"cancel-1": {"approve": True}}},
            headers=ANN,
        )
        assert names(parse_sse(resumed.text))[-1] == "done"
        continued = await chat(client, ANN, "And in Rome?", "ann-1")
        assert names(parse_sse(continued.text))[-1] == "done"
        # The shared key works as before, in conversations of its own.
        shared = parse_sse((await chat(client, SHARED, "Weather in Paris?", "team")).text)
        assert names(shared)[-1] == "done"
        assert (await client.get("/api/conversations/team", headers=SHARED)).status_code == 200
        assert (await client.get("/api/conversations/team", headers=ANN)).status_code == 404
        assert (await chat(client, ANN, "Mine now?", "team")).status_code == 404
        wrong = await client.get("/api/tools", headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401
    audit = SqliteAuditLog(db)
    cancelled = [r for r in audit.query(tool="cancel_order") if r.outcome == "ran"]
    assert [(r.user, r.tenant, r.conversation, r.approved_by) for r in cancelled] == [
        ("ann", "acme", "ann-2", "ann")
    ]
    weather = audit.query(tool="get_weather")
    assert [(r.user, r.tenant) for r in weather] == [("ann", "acme"), (None, None)]
    audit.close()


async def test_a_denial_is_recorded_as_its_user_s(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    async with serving(db, authenticators=[keys_file(tmp_path)]) as client:
        paused = parse_sse((await chat(client, SAM, "Cancel order A1001", None)).text)
        opened = paused[-1][1]["conversation_id"]  # made by the service: Sam's from the start
        assert (await client.get(f"/api/conversations/{opened}", headers=BOB)).status_code == 404
        assert (await client.get(f"/api/conversations/{opened}", headers=SAM)).status_code == 200
        denied = await client.post(
            f"/api/approvals/{paused[-1][1]['approval_id']}",
            json={"decisions": {"cancel-1": {"approve": False, "message": "Not today."}}},
            headers=SAM,
        )
        assert names(parse_sse(denied.text))[-1] == "done"
    with SqliteAuditLog(db) as audit:
        held, refused = audit.query(tool="cancel_order")
    assert (held.outcome, held.user) == ("held", "sam")
    assert (refused.approval, refused.approved_by, refused.user) == ("denied", "sam", "sam")


async def test_a_run_paused_through_v1_is_decided_by_its_user_only(tmp_path: Path) -> None:
    async with serving(tmp_path / "s.db", authenticators=[keys_file(tmp_path)]) as client:
        completion = await client.post(
            "/v1/chat/completions",
            json={"model": "tooluse-qa", "messages": [{"role": "user", "content": "Cancel A1001"}]},
            headers=ANN,
        )
        text = completion.json()["choices"][0]["message"]["content"]
        approval = text.split("POST /api/approvals/")[1].split(" ")[0]
        decision = {"decisions": {"cancel-1": {"approve": True}}}
        other = await client.post(f"/api/approvals/{approval}", json=decision, headers=BOB)
        assert other.status_code == 404
        own = await client.post(f"/api/approvals/{approval}", json=decision, headers=ANN)
        assert names(parse_sse(own.text))[-1] == "done"
        assert (await client.get("/v1/models", headers=BOB)).status_code == 200
        refused = await client.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "invalid_api_key")


seen_contexts: list[dict[str, Any]] = []


@tool(read_only=True)
def whoami(user_id: str, context: ToolContext) -> str:
    """Who the service says the caller is (the model's user_id is only an argument)."""
    seen_contexts.append(dict(context))
    return "ok"


def calling_whoami(prompt: Any) -> Any:
    from tooluse.messages import ToolResponseMessage
    from tooluse.testing import tool_call

    if not prompt.options.tool_callbacks:
        return "Answered."
    if isinstance(prompt.messages[-1], ToolResponseMessage):
        return ""
    return tool_call("whoami", {"user_id": "mallory"}, id="w1")


async def test_the_tools_get_the_caller_from_the_authentication(tmp_path: Path) -> None:
    from tooluse.testing import FunctionModel

    seen_contexts.clear()
    async with serving(
        tmp_path / "s.db",
        model=FunctionModel(calling_whoami),
        tools=[whoami],
        authenticators=[keys_file(tmp_path)],
    ) as client:
        await chat(client, SAM, "Who am I?", "c1")
    (context,) = seen_contexts
    assert (context["user_id"], context["tenant_id"], context["roles"]) == (
        "sam",
        "acme",
        ["support"],
    )
    assert context["conversation_id"] == "c1"


def make_token(key: Any, algorithm: str = "HS256", **claims: Any) -> str:
    now = datetime.datetime.now(datetime.UTC)
    payload = {
        "sub": "ann",
        "tenant": "acme",
        "roles": ["support"],
        "exp": now + datetime.timedelta(minutes=5),
    }
    payload.update(claims)
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, key, algorithm=algorithm)


async def test_jwts_name_the_caller_and_bad_ones_are_refused(tmp_path: Path) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    secret = "a-secret-of-at-least-thirty-two-bytes!"
    bearers: list[Authenticator] = [
        JwtBearer(secret, audience="tooluse"),
        JwtBearer(public_pem, algorithms=["RS256"], audience="tooluse"),
    ]
    async with serving(tmp_path / "s.db", api_key="s3cret", authenticators=bearers) as client:

        async def status(token: str) -> tuple[int, str]:
            response = await client.get("/api/tools", headers={"Authorization": f"Bearer {token}"})
            return response.status_code, response.json().get(
                "detail", ""
            ) if response.status_code != 200 else ""

        assert await status(make_token(secret, aud="tooluse")) == (200, "")
        assert await status(make_token(private, "RS256", aud="tooluse")) == (200, "")
        assert await status("s3cret") == (200, "")  # not a JWT: the shared key still works
        past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
        code, detail = await status(make_token(secret, aud="tooluse", exp=past))
        assert code == 401 and "expired" in detail
        code, detail = await status(make_token(secret, aud="someone-else"))
        assert code == 401 and "audience" in detail.lower()
        code, detail = await status(
            make_token("another-secret-of-thirty-two-bytes!", aud="tooluse")
        )
        assert code == 401 and "signature" in detail.lower()
        code, _ = await status(make_token(secret, aud="tooluse", sub=None))
        assert code == 401
        # The token's subject owns the conversation.
        token = {"Authorization": f"Bearer {make_token(secret, aud='tooluse')}"}
        other = {"Authorization": f"Bearer {make_token(secret, aud='tooluse', sub='bob')}"}
        assert names(parse_sse((await chat(client, token, "Weather?", "j1")).text))[-1] == "done"
        assert (await client.get("/api/conversations/j1", headers=other)).status_code == 404
        assert (await client.get("/api/conversations/j1", headers=token)).status_code == 200


async def test_a_proxy_s_headers_are_believed_from_its_address_only(tmp_path: Path) -> None:
    proxy = TrustedProxyHeaders(["10.0.0.0/8"])
    ann = {"X-Forwarded-User": "ann", "X-Forwarded-Tenant": "acme", "X-Forwarded-Roles": "a, b"}
    credentials = Credentials({k.lower(): v for k, v in ann.items()}, "10.1.2.3")
    caller = await proxy.authenticate(credentials)
    assert caller is not None and (caller.user_id, caller.tenant_id) == ("ann", "acme")
    assert caller.roles == {"a", "b"}
    db = tmp_path / "s.db"
    async with serving(db, peer=("10.1.2.3", 40000), authenticators=[proxy]) as via_proxy:
        assert names(parse_sse((await chat(via_proxy, ann, "Weather?", "p1")).text))[-1] == "done"
        bob = {"X-Forwarded-User": "bob"}
        assert (await via_proxy.get("/api/conversations/p1", headers=bob)).status_code == 404
        assert (await via_proxy.get("/api/tools")).status_code == 401  # no header: nobody
    async with serving(db, peer=("192.168.1.9", 40000), authenticators=[proxy]) as direct:
        # Sent straight to the service, the headers prove nothing.
        assert (await direct.get("/api/conversations/p1", headers=ann)).status_code == 401


REFUNDING = ToolAccessPolicy(tools={"cancel_order": ToolAccess(allow_roles=["support"])})


async def test_a_hidden_tool_is_not_listed_offered_or_run(tmp_path: Path) -> None:
    from _service_helpers import respond
    from tooluse.testing import FunctionModel

    prompts: list[Any] = []

    def recording(prompt: Any) -> Any:
        prompts.append(prompt)
        return respond(prompt)  # calls cancel_order when asked to cancel, offered or not

    async with serving(
        tmp_path / "s.db",
        model=FunctionModel(recording),
        authenticators=[keys_file(tmp_path)],
        tool_visibility=REFUNDING,
    ) as client:
        listed = {t["name"] for t in (await client.get("/api/tools", headers=ANN)).json()}
        assert "cancel_order" not in listed and "get_weather" in listed
        assert "cancel_order" in {
            t["name"] for t in (await client.get("/api/tools", headers=SAM)).json()
        }
        events = parse_sse((await chat(client, ANN, "Cancel order A1001", None)).text)
        assert names(events) == ["tool_call", "tool_result", "route", "delta", "done"]
        result = events[1][1]
        assert result["is_error"] and result["result"].startswith("Unknown tool 'cancel_order'")
        router = prompts[0]
        assert "cancel_order" not in {c.definition.name for c in router.options.tool_callbacks}
        held = parse_sse((await chat(client, SAM, "Cancel order A1001", None)).text)
        assert names(held)[-1] == "approval_required"


async def test_mcp_json_access_rules_hide_a_server_s_tools(tmp_path: Path) -> None:
    @tool(read_only=True)
    def look(q: str) -> str:
        return q

    @tool(read_only=True)
    def note(text: str) -> str:
        return text

    server = InProcessServer(
        mcp_server(look, note, name="notes"),
        settings=ToolSettings(access=ToolAccess(deny_tenants=["globex"])),
        tool_settings={"note": ToolSettings(access=ToolAccess(allow_roles=["support"]))},
    )
    async with serving(
        tmp_path / "s.db", mcp_servers=[server], authenticators=[keys_file(tmp_path)]
    ) as client:

        async def listed(headers: dict[str, str]) -> set[str]:
            return {t["name"] for t in (await client.get("/api/tools", headers=headers)).json()}

        assert await listed(SAM) == {"look", "note"}
        assert await listed(ANN) == {"look"}
        assert await listed(BOB) == set()  # the server's rule: not for globex


def test_access_rules_in_mcp_json_and_in_a_file(tmp_path: Path) -> None:
    (git,) = mcp_servers_from_config(
        {
            "mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}},
            "tooluse": {
                "servers": {
                    "git": {
                        "allowTenants": ["acme"],
                        "tools": {"git_commit": {"allowRoles": ["dev"], "approval": "always"}},
                    }
                }
            },
        }
    )
    assert git.settings.access == ToolAccess(allow_tenants=["acme"])
    assert git.settings_for("git_commit") == ToolSettings(
        approval="always", access=ToolAccess(allow_roles=["dev"])
    )
    path = tmp_path / "access.json"
    path.write_text(
        json.dumps({"default": {"denyTenants": ["trial"]}, "tools": {"x": {"allowRoles": ["a"]}}})
    )
    policy = load_tool_access(path)
    assert policy.default == ToolAccess(deny_tenants=["trial"])
    assert policy.tools == {"x": ToolAccess(allow_roles=["a"])}
    path.write_text(json.dumps({"tools": {"x": {"allowRole": ["a"]}}}))
    with pytest.raises(ValueError, match=r'"tools"."x": allowRole: the fields are allowTenants'):
        load_tool_access(path)
    path.write_text(json.dumps({"tools": {"x": {"allowRoles": "a"}}}))
    with pytest.raises(ValueError, match='"allowRoles" must be a list of names'):
        load_tool_access(path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"user": "ann"}, 'needs "key" or "sha256"'),
        ({"key": "k", "sha256": "00", "user": "ann"}, 'needs "key" or "sha256"'),
        ({"key": "k"}, 'needs a "user"'),
        ({"sha256": "abc", "user": "ann"}, '"sha256" must be the 64 hex digits'),
        ({"key": "k", "user": "ann", "role": ["x"]}, "role: the fields are"),
        ({"key": "two words", "user": "ann"}, "without spaces"),
    ],
)
def test_a_bad_keys_file_names_the_entry(tmp_path: Path, entry: Any, message: str) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [entry]}))
    with pytest.raises(ValueError, match=rf"keys\[0\].*{message}"):
        ApiKeys.from_file(path)


def test_serve_takes_the_users_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    access = tmp_path / "access.json"
    access.write_text(json.dumps({"tools": {"cancel_order": {"allowRoles": ["support"]}}}))
    started: list[Any] = []
    serve_without_listening(monkeypatch, started.append)
    base = ["serve", "--model", "test", "--db", str(tmp_path / "s.db"), "--no-sample-knowledge"]
    argv = [*base, "--keys", str(keys), "--tool-access", str(access), "--trusted-proxy", "10.0.0.1"]
    with caplog.at_level(logging.WARNING, logger="tooluse.service"):
        assert main([*argv, "--host", "0.0.0.0", "--jwt-secret", "x" * 32]) == 0
    (uvicorn_config,) = started
    assert uvicorn_config.proxy_headers is False  # the peer stays the proxy's address
    service = uvicorn_config.app.state.service
    kinds = [type(a).__name__ for a in service.authenticators]
    assert kinds == ["ApiKeys", "TrustedProxyHeaders", "JwtBearer"]
    assert service.tool_visibility.tools == {"cancel_order": ToolAccess(allow_roles=["support"])}
    assert "without an API key" not in caplog.text  # users are authenticated
    keys.write_text("{}")
    assert main([*base, "--keys", str(keys)]) == 2
