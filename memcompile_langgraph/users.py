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
