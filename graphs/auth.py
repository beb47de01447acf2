"""An example LangGraph custom auth handler (graphs/langgraph.auth.json: "auth" -> "./graphs/auth.py:auth").

Bearer tokens from the file named by $MEMCOMPILE_AUTH_TOKENS, one `TOKEN USER_ID` a line (the format of
`memcompile mcp --tokens`; `TOKEN *` lines are refused here: a served graph acts for one user). The authenticated
user id is the memory user of every run (the graphs read it from the run's config; a run naming another user_id
fails), threads are visible to their owner only, and the store's namespace is the caller's own: ("tom",) for tom.
Replace `authenticate` with your identity provider's check; keep the rest.
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


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType:
    """Threads (and their runs) carry their owner; each caller sees only its own (recalled memory lives in them)."""
    metadata = value.get("metadata") if isinstance(value, dict) else None
    if isinstance(metadata, dict):
        metadata["owner"] = ctx.user.identity
    elif isinstance(value, dict) and "metadata" in value:
        value["metadata"] = {"owner": ctx.user.identity}
    return {"owner": ctx.user.identity}


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
