"""User ids: validated here; every name derived from one (rows, collections, lock files) is hashed or bound."""

from __future__ import annotations

import os
import unicodedata

MAX_USER_ID = 256


class InvalidUserId(ValueError):
    pass


def validate_user_id(user_id: object) -> str:
    """The user id in NFC (one user, however its characters were composed); InvalidUserId when unusable."""
    if not isinstance(user_id, str):
        raise InvalidUserId(f"user id must be a string, got {type(user_id).__name__}")
    if not user_id.strip():
        raise InvalidUserId("user id must not be empty")
    if len(user_id) > MAX_USER_ID:
        raise InvalidUserId(f"user id longer than {MAX_USER_ID} characters")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in user_id):
        raise InvalidUserId("user id contains control or format characters")
    return unicodedata.normalize("NFC", user_id)


class MissingUserId(InvalidUserId):
    pass


def nothing_stored_note(user_id: str) -> str:
    """What a recall for a user without stored turns says (an empty result alone reads like "nothing matched")."""
    return f"nothing is stored for user_id {user_id!r}"


STUDIO_USER_ENV = "MEMCOMPILE_STUDIO_USER"


def auth_identity(configurable: object) -> str | None:
    """The end user a LangGraph server authenticated for this run (custom auth, `langgraph_sdk.Auth`), from the run's
    configurable["langgraph_auth_user"]; None without any auth (a local server: the run's user_id decides).

    A Studio user is signed in by LangSmith (or, under `langgraph dev`, by nothing but an `x-auth-scheme: langsmith`
    header), not by the deployment's own auth: it names no end user, and may not pick one either. It acts as the user
    $MEMCOMPILE_STUDIO_USER names where the operator set one, else the run is refused."""
    user = configurable.get("langgraph_auth_user") if isinstance(configurable, dict) else None
    if user is None:
        return None
    get = user.get if isinstance(user, dict) else lambda key, default=None: getattr(user, key, default)
    kind = get("kind", None) or type(user).__name__
    if kind == "StudioUser":
        chosen = os.environ.get(STUDIO_USER_ENV)
        if not chosen:
            raise InvalidUserId(
                "this run comes from a LangGraph Studio sign-in, which names no user of this memory: call with the "
                f"deployment's own credentials, or set {STUDIO_USER_ENV}=USER_ID on the server to let Studio act as "
                "that one user"
            )
        return chosen
    if get("is_authenticated", True) is False:
        return None
    identity = get("identity", None)
    return identity if isinstance(identity, str) and identity else None


def resolve_user(requested: object, identity: str | None, surface: str) -> str:
    """The user a run or call acts for: the authenticated identity when there is one (a request naming another user
    is refused, never silently redirected), else the user id it names; a missing one is an error, never a shared
    "default" user."""
    if identity is not None:
        user = validate_user_id(identity)
        if requested is not None and validate_user_id(requested) != user:
            raise InvalidUserId(f"{surface}: the caller is authenticated as user {user!r} and may not name another")
        return user
    if requested is None:
        raise MissingUserId(f"{surface} needs a user_id (whose memory): none was given")
    return validate_user_id(requested)
