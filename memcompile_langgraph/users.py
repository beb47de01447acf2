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


TRUST_STUDIO_ENV = "MEMCOMPILE_TRUST_STUDIO"


def studio_trusted() -> bool:
    """Whether the operator lets a LangGraph Studio session pick any user ($MEMCOMPILE_TRUST_STUDIO=1; off by
    default: under `langgraph dev` a Studio session is one header, checked by nothing)."""
    value = os.environ.get(TRUST_STUDIO_ENV, "").strip().lower()
    if value not in ("", "0", "1", "false", "true"):
        raise ValueError(f"{TRUST_STUDIO_ENV} must be 1 or 0, got {value!r}")
    return value in ("1", "true")


def _field(user: object, key: str) -> object:
    """A field of a server's user: a dict once the run was queued, the server's user object in process."""
    return user.get(key) if isinstance(user, dict) else getattr(user, key, None)


def is_studio_user(user: object) -> bool:
    return (_field(user, "kind") or type(user).__name__) == "StudioUser"


def auth_identity(configurable: object) -> str | None:
    """The end user a LangGraph server authenticated for this run (custom auth, `langgraph_sdk.Auth`), from the run's
    configurable["langgraph_auth_user"]; None without custom auth (the run's user_id then decides). A Studio session
    is no end user: it reaches no memory unless the operator trusts Studio (studio_trusted), then it picks the user."""
    user = configurable.get("langgraph_auth_user") if isinstance(configurable, dict) else None
    if user is None:
        return None
    if is_studio_user(user):
        if studio_trusted():
            return None
        raise InvalidUserId(f"a LangGraph Studio session reaches no memory (an operator may set {TRUST_STUDIO_ENV}=1)")
    if _field(user, "is_authenticated") is False:
        return None
    identity = _field(user, "identity")
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
