"""An example LangGraph custom auth handler (graphs/langgraph.auth.json: "auth" -> "./graphs/auth.py:auth").

Bearer tokens from the file named by $MEMCOMPILE_AUTH_TOKENS, one `TOKEN USER_ID` a line (the format of
`memcompile mcp --tokens`; `TOKEN *` lines are refused here: a served graph acts for one user). The authenticated
user id is the memory user of every run (the graphs read it from the run's config; a run naming another user_id
fails), and every resource LangGraph's auth names has a rule here: threads (with their runs) and crons are visible to
their owner only; assistants are shared, readable by everyone, changed or deleted only by the user who created one
(the graphs' own assistants by nobody), and none may carry whose memory a run uses or the speaker names it stores;
the store's namespace is the caller's own: ("tom",) for tom. A resource or action without a rule of its own is
refused. Replace `authenticate` with your identity provider's check; keep the rest.
"""

import os

from langgraph_sdk import Auth

from memcompile_langgraph.integrations.base_store import one_label_namespace
from memcompile_langgraph.integrations.tokens import Tokens

auth = Auth()
_tokens_file = os.environ.get("MEMCOMPILE_AUTH_TOKENS")
if not _tokens_file:
    raise RuntimeError("graphs/auth.py needs MEMCOMPILE_AUTH_TOKENS: a file of 'TOKEN USER_ID' lines")
TOKENS = Tokens.load(_tokens_file)


@auth.authenticate
async def authenticate(authorization: str | None) -> str:
    grant = TOKENS.bearer(authorization)
    if grant is None or grant.user_id is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="a valid 'Authorization: Bearer TOKEN' is needed")
    return grant.user_id


IDENTITY_KEYS = ("user_id", "user_name", "assistant_name")  # what the graphs read as whose memory and who spoke


@auth.on
async def refuse_the_rest(ctx: Auth.types.AuthContext, value: dict) -> None:
    """A resource or action that no rule below names (one a newer LangGraph adds) is refused, never open."""
    raise Auth.exceptions.HTTPException(status_code=403, detail=f"no rule allows {ctx.resource} {ctx.action}")


@auth.on.threads
@auth.on.crons
async def own_threads(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType:
    """Threads (and their runs) and crons carry their owner; each caller sees only its own (recalled memory lives in
    threads, and a cron starts runs with what its owner gave it)."""
    metadata = value.get("metadata") if isinstance(value, dict) else None
    if isinstance(metadata, dict):
        metadata["owner"] = ctx.user.identity
    elif isinstance(value, dict) and "metadata" in value:
        value["metadata"] = {"owner": ctx.user.identity}
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def shared_assistants(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType | None:
    """Assistants are shared: everyone may read, search and run them. One is changed or deleted by the user who created
    it only (an assistant without an owner, as the graphs' own are, by nobody through the API), and none carries a
    user id or speaker names: those come from the signed-in user, never from a config another user can write. Nor
    does one carry LangGraph's created_by mark, by which clients find the graphs' own."""
    if ctx.action in ("read", "search"):
        return None
    for options in ((value.get("config") or {}).get("configurable"), value.get("context")):
        named = sorted(k for k in IDENTITY_KEYS if isinstance(options, dict) and k in options)
        if named:
            raise Auth.exceptions.HTTPException(
                status_code=403,
                detail=f"an assistant may not set {', '.join(named)}: runs take them from the signed-in user",
            )
    metadata = value.get("metadata")
    if isinstance(metadata, dict) and "created_by" in metadata:  # "system" marks the graphs' own: none passes for one
        raise Auth.exceptions.HTTPException(status_code=403, detail="an assistant may not set created_by")
    if isinstance(metadata, dict) and (ctx.action == "create" or "owner" in metadata):
        metadata["owner"] = ctx.user.identity  # the creator owns it; nobody hands it to another user
    elif ctx.action == "create":
        value["metadata"] = {"owner": ctx.user.identity}
    return None if ctx.action == "create" else {"owner": ctx.user.identity}


@auth.on.store
async def own_namespaces(ctx: Auth.types.AuthContext, value: dict) -> None:
    """The store (graphs/store.py: namespace ("tom",) is tom's memory) is reachable under the caller's own namespace
    only, exactly: a namespace below it would be another memory."""
    own = one_label_namespace(ctx.user.identity)
    if own is None:
        raise Auth.exceptions.HTTPException(status_code=403, detail="this user id has no store namespace")
    namespace = tuple(value.get("namespace") or ())
    if not namespace:
        value["namespace"] = own
    elif namespace != own:
        raise Auth.exceptions.HTTPException(status_code=403, detail="another user's namespace")
