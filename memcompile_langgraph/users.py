"""User ids: validated here; every name derived from one (rows, collections, lock files) is hashed or bound."""

from __future__ import annotations

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


def auth_identity(configurable: object) -> str | None:
    """The end user a LangGraph server authenticated for this run (custom auth, `langgraph_sdk.Auth`), from the run's
    configurable["langgraph_auth_user"]; None without custom auth. Studio's own user is the developer at the server,
    not an end user, so it names none (the run's user_id then decides)."""
    user = configurable.get("langgraph_auth_user") if isinstance(configurable, dict) else None
    if user is None:
        return None
    get = user.get if isinstance(user, dict) else lambda key, default=None: getattr(user, key, default)
    kind = get("kind", None) or type(user).__name__
    if kind == "StudioUser" or get("is_authenticated", True) is False:
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
