"""What the tests of generated sets share: the digest that pins a written set, and the unrelated chat that surrounds a
user's statements in the small update tests."""

import hashlib
from pathlib import Path

FILLER = [
    "Can you help me write a unit test for the date parser?",
    "How should I name feature branches in git?",
    "What should go into a good README?",
    "Any tips for keeping a reading habit going?",
    "How do I make a pie chart in matplotlib?",
    "What's a quick healthy lunch to prep on Sundays?",
]


def set_digest(folder: Path) -> str:
    """sha256 over each chat folder's files (relative path, then bytes), chats in numeric order."""
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*.json"), key=lambda p: (int(p.parent.name), p.name)):
        h.update(f.relative_to(folder).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()
