"""Bearer tokens of the served surfaces (`memcompile mcp --tokens FILE`, the example LangGraph auth in graphs/auth.py).

A tokens file has one token a line: `TOKEN USER_ID` (the token acts only as that user) or `TOKEN *` (any user);
blank lines and lines starting with # are skipped. Tokens are compared in constant time, and every token is
compared, so the time taken says nothing about which one came close. A loaded file is read again when it changes
(its modification time, size, inode or mode), so removing a line revokes its token at the next request; a changed
file that cannot be used grants nothing until it is fixed (revoking must not depend on getting the edit right). A
file loaded as private is checked again at each change: one opened to other users while serving grants nothing.
"""

from __future__ import annotations

import hmac
import logging
import stat
from dataclasses import dataclass
from pathlib import Path

from ..users import InvalidUserId, validate_user_id

log = logging.getLogger(__name__)

ANY_USER = "*"
MIN_TOKEN = 16  # characters: a short token is guessable over the network


class BadTokensFile(ValueError):
    """The tokens file cannot be used; the message is one line."""


def check_private(path: str | Path) -> None:
    """Refuses a tokens file that other users of the machine may read or write (as ssh refuses such a private key):
    any of them could act as every user the file names."""
    try:
        mode = Path(path).stat().st_mode
    except OSError as exc:
        raise BadTokensFile(f"tokens file {path}: cannot read ({exc.strerror or exc})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BadTokensFile(
            f"tokens file {path} is open to other users (mode {stat.S_IMODE(mode):04o}): chmod 600 {path}"
        )


@dataclass(frozen=True)
class Grant:
    user_id: str | None  # None: any user (a `*` line)

    def allows(self, user_id: str) -> bool:
        return self.user_id is None or self.user_id == user_id


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode  # a chmod changes no other of these


class Tokens:
    def __init__(self, grants: dict[str, Grant], path: str | Path | None = None, private: bool = False):
        self._grants = self._encoded(grants)
        self._path = Path(path) if path is not None else None
        self._private = private
        self._stamp = _stamp(self._path) if self._path is not None else None

    @staticmethod
    def _encoded(grants: dict[str, Grant]) -> list[tuple[bytes, Grant]]:
        if not grants:
            raise BadTokensFile("no tokens: add lines 'TOKEN USER_ID' or 'TOKEN *'")
        return [(token.encode(), grant) for token, grant in grants.items()]

    @classmethod
    def load(cls, path: str | Path, private: bool = False) -> Tokens:
        """The file's tokens; `private`: refused when other users may read or write it (check_private), then and at
        every change while serving (a file saved anew with the umask's mode must not stay in force)."""
        return cls(cls._read(path, private), path, private)

    @staticmethod
    def _read(path: str | Path, private: bool = False) -> dict[str, Grant]:
        if private:
            check_private(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadTokensFile(f"tokens file {path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
        grants: dict[str, Grant] = {}
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                raise BadTokensFile(f"tokens file {path}, line {n}: expected 'TOKEN USER_ID' or 'TOKEN *'")
            token, user = parts[0], parts[1].strip()
            if len(token) < MIN_TOKEN or not token.isascii() or not token.isprintable():
                raise BadTokensFile(f"tokens file {path}, line {n}: a token is {MIN_TOKEN}+ printable ASCII characters")
            if token in grants:
                raise BadTokensFile(f"tokens file {path}, line {n}: this token is already on an earlier line")
            try:
                grants[token] = Grant(None if user == ANY_USER else validate_user_id(user))
            except InvalidUserId as exc:
                raise BadTokensFile(f"tokens file {path}, line {n}: {exc}") from None
        return grants

    def _current(self) -> list[tuple[bytes, Grant]]:
        """The grants of the file as it is now: read again when it changed since the last read."""
        if self._path is None:
            return self._grants
        stamp = _stamp(self._path)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._grants = self._encoded(self._read(self._path, self._private))
            except BadTokensFile as exc:
                self._grants = []
                log.warning("%s: no token is accepted until it is fixed", exc)
        return self._grants

    def grant(self, presented: str | None) -> Grant | None:
        """The grant of a presented token, None when it is no token of the file."""
        if not isinstance(presented, str):
            return None
        given = presented.encode("utf-8", "surrogatepass")
        found = None
        for token, grant in self._current():  # no early exit: each comparison takes its full time
            if hmac.compare_digest(token, given):
                found = grant
        return found

    def bearer(self, authorization: str | None) -> Grant | None:
        """The grant of an `Authorization: Bearer TOKEN` header value."""
        scheme, _, token = (authorization or "").partition(" ")
        return self.grant(token.strip()) if scheme.lower() == "bearer" else None
