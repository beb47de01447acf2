"""A generated set of knowledge updates, in BEAM's native layout (eval/beam.py reads it): chats between a user and an
assistant where the user states a fact (an attribute of an entity) in one session and a new value for it in a later
one, in other words each time, among filler turns and distractors (the same entity's other attributes, the same
attribute of other entities). Each update gets a knowledge_update question whose gold is the later statement; four
families of such sets, one generator.

They exist to measure update handling where no rule can have been fitted: the templates (updates_set.json, data
next to this generator) were written once, before any mechanism was measured on them, and are not to be tuned to.
`python -m memcompile_langgraph.eval.updates_set OUT [--family N]` writes a set; `memcompile eval beam OUT` scores
it. tests/test_updates_set.py pins each family's files by digest.

- Family 1: each update stated in one user turn, in other words than the first statement.
- Family 2, harder, over family 1's subjects: each update in one of three forms (split across two user turns, the
  subject in the first and the new value alone in the next; stated among other news and restated by the assistant's
  recap; in other words for the attribute), another entity's value of the same kind somewhere in the chat, and for
  every other subject the older value told again after the update as history ("I used to ..."). Questions also
  carry `update_form` and `history_after` (the loader ignores them).
- Family 3, over 16 new subjects: each update in one of five forms neither earlier family has (a correction "it's
  X, not Y", the consequence of an event, a sentence of a long message of unrelated news, a turn without the
  entity's name several exchanges after the turn that names it, the user's reply to the assistant's question); a
  third of the subjects are updated twice. Questions also carry `updated_twice`.
- Family 4, over 16 more new subjects whose values are of six kinds (numbers in digits, numbers in words, names,
  dates and times, frequencies, states): each update in one of five forms no earlier family has (inside a question
  to the assistant, set against the value it replaces, the assistant's reading of a document the user attached and
  then confirms, a denial of the old value without the entity's name, a line of a list in a long message with
  code); a third of the questions are updated twice and a third have the first value told again after the update.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("updates_set.json")
Turns = list[tuple[str, str, bool]]  # (role, text, is gold) in order


@dataclass(frozen=True)
class Subject:
    """An entity's attribute: the ways to name the entity ({e}), its values ({v}), the questions about its current
    value, and its templates by role (old: first statements; other: the entity's other facts; near: another
    entity's value of the same kind; history: an earlier value told as the past; the rest: the update's forms)."""

    names: tuple[str, ...]
    values: tuple[str, ...]
    ask: tuple[str, ...]
    said: dict[str, tuple[str, ...]]
    kind: str = ""  # family 4: the kind of its values


@dataclass(frozen=True)
class Family:
    number: int
    subjects: tuple[Subject, ...]
    forms: tuple[str, ...]
    start: date  # chat c begins 40 * c days after it
    first_room: int  # the first statement's session leaves this many sessions after it
    later_room: int  # and the update's this many
    drawn: tuple[str, ...]  # the values drawn for each subject, by role (old, mid, new, near)
    # (question number in the set, in the chat) -> (form, updated twice, first value told again after the update)
    flags: Callable[[int, int], tuple[str, bool, bool]]
    marks: tuple[str, ...]  # what each question carries besides question, answer and gold


def _subject(raw: dict[str, Any], more: dict[str, Any] | None = None) -> Subject:
    fields = {**raw, **(more or {})}
    core = {k: tuple(fields.pop(k)) for k in ("names", "values", "ask")}
    kind = fields.pop("kind", "")
    return Subject(**core, said={role: tuple(texts) for role, texts in fields.items()}, kind=kind)


def _load() -> tuple[dict[str, tuple[Any, ...]], dict[int, dict[str, Any]]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    phrases = {name: tuple(tuple(p) if isinstance(p, list) else p for p in v) for name, v in data["phrases"].items()}
    return phrases, {int(n): family for n, family in data["families"].items()}


PHRASES, _RAW = _load()
_FIRST = tuple(_subject(s) for s in _RAW[1]["subjects"])
_HARDER = _RAW[2]["subjects"]  # family 2's templates, by the family-1 subject's first name
KINDS4 = tuple(_RAW[4]["kinds"])
FORMS2, FORMS3, FORMS4 = (tuple(_RAW[n]["forms"]) for n in (2, 3, 4))
FAMILIES = {
    1: Family(
        1, _FIRST, ("update",), date(2024, 3, 1), 2, 0, ("old", "new"), lambda n, k: ("update", False, False), ()
    ),
    2: Family(
        2,
        tuple(_subject(s, more=_HARDER[s["names"][0]]) for s in _RAW[1]["subjects"]),
        FORMS2,
        date(2024, 3, 1),
        3,
        1,
        ("old", "new", "near"),
        lambda n, k: (FORMS2[n % len(FORMS2)], False, k % 2 == 0),
        ("update_form", "history_after"),
    ),
    3: Family(
        3,
        tuple(_subject(s) for s in _RAW[3]["subjects"]),
        FORMS3,
        date(2025, 1, 6),
        4,
        1,
        ("old", "mid", "new", "near"),
        lambda n, k: (FORMS3[n % len(FORMS3)], n % 3 == 2, k % 2 == 1),
        ("update_form", "history_after", "updated_twice"),
    ),
    4: Family(
        4,
        tuple(_subject(s) for s in _RAW[4]["subjects"]),
        FORMS4,
        date(2025, 6, 2),
        4,
        1,
        ("old", "mid", "new", "near"),
        lambda n, k: (FORMS4[n % len(FORMS4)], n % 3 == 2, n % 6 in (2, 3)),
        ("update_form", "history_after", "updated_twice"),
    ),
}


def _fill(template: str, entity: str, value: str, prior: str = "") -> str:
    text = template.format(e=entity, E=entity[0].upper() + entity[1:], v=value, V=value, o=prior)
    return text[0].upper() + text[1:]


def _one(rng: random.Random, name: str) -> Any:
    return rng.choice(PHRASES[name])


# --- the update's turns in each form: (subject, entity as named, new value, the value it replaces, rng) ----------


def _update(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    return [("user", _fill(rng.choice(s.said["new"]), e, value), True)]


def _split(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    """The subject alone in one user turn, the new value alone in the next."""
    lead = _fill(_one(rng, "leads"), e, "")
    return [
        ("user", lead, False),
        ("assistant", _one(rng, "acks"), False),
        ("user", _fill(rng.choice(s.said["cont"]), e, value), True),
        ("assistant", _one(rng, "filler_assistant"), False),
    ]


def _synonym(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    said = _fill(rng.choice(s.said["synonym"]), e, value)
    return [("user", said, True), ("assistant", _one(rng, "filler_assistant"), False)]


def _recap(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    """Stated among other news; the assistant's recap restates it."""
    said = _fill(rng.choice(s.said["synonym"]), e, value)
    user = f"{_one(rng, 'news')} {said} Anyway: {_one(rng, 'filler_user')}"
    opening = _one(rng, "recaps")  # drawn before the restatement, as the set was frozen
    recap = f"{opening.format(y=rng.choice(s.said['you']).format(v=value))} {_one(rng, 'filler_assistant')}"
    return [("user", user, True), ("assistant", recap, True)]


def _mixed(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    """One sentence of a long message of unrelated news."""
    news = rng.sample(PHRASES["mixed_news"], 4)
    said = _fill(rng.choice(s.said["plain"]), e, value)
    text = f"{_one(rng, 'mixed_open')} {news[0]} {news[1]} {said} {news[2]} {news[3]} {_one(rng, 'filler_user')}"
    return [("user", text, True)]


def _later(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    """The subject named, then two to four other exchanges, then the value without the name."""
    turns = [
        ("user", _fill(rng.choice(s.said["mention"]), e, ""), False),
        ("assistant", _one(rng, "filler_assistant"), False),
    ]
    for _ in range(rng.randrange(2, 5)):
        turns += [("user", _one(rng, "filler_user"), False), ("assistant", _one(rng, "filler_assistant"), False)]
    return [*turns, ("user", _fill(rng.choice(s.said["bare"]), e, value), True)]


def _asked(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    """The user names the subject, the assistant asks about it, the user answers with the value."""
    return [
        ("user", _fill(rng.choice(s.said["mention"]), e, ""), False),
        ("assistant", rng.choice(s.said["asked"]), False),
        ("user", _fill(rng.choice(s.said["bare"]), e, value), True),
    ]


def _question(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    said = _fill(rng.choice(s.said["question"]), e, value)
    return [("user", said, True), ("assistant", _one(rng, "asked_back"), False)]


def _in_one_turn(role: str) -> Callable[[Subject, str, str, str, random.Random], Turns]:
    """A form stated in one user turn by its templates ({o}: the value it replaces)."""

    def block(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
        return [("user", _fill(rng.choice(s.said[role]), e, value, prior), True)]

    return block


def _confirmed(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    """The value is the assistant's reading of a document the user attached, which the user confirms."""
    said = _one(rng, "reads").format(y=rng.choice(s.said["you"]).format(v=value))
    return [
        ("user", _fill(rng.choice(s.said["doc"]), e, ""), False),
        ("assistant", f"{said} {_one(rng, 'checks')}", True),
        ("user", _one(rng, "confirms"), False),
        ("assistant", _one(rng, "noted"), False),
    ]


def _listed(s: Subject, e: str, value: str, prior: str, rng: random.Random) -> Turns:
    """One line of a list in a message of several paragraphs with code."""
    lines = list(rng.sample(PHRASES["list_notes"], 4))
    lines.insert(rng.randrange(len(lines) + 1), "- " + rng.choice(s.said["note"]).format(e=e, v=value))
    ask, lang, code = _one(rng, "code")
    text = "\n".join(lines)
    return [("user", f"{_one(rng, 'list_open')}\n\n{text}\n\n{ask}\n\n```{lang}\n{code}\n```", True)]


BLOCKS: dict[str, Callable[[Subject, str, str, str, random.Random], Turns]] = {
    "update": _update,
    "split": _split,
    "recap": _recap,
    "synonym": _synonym,
    "correction": _in_one_turn("correction"),
    "consequence": _in_one_turn("consequence"),
    "mixed": _mixed,
    "later": _later,
    "asked": _asked,
    "question": _question,
    "compared": _in_one_turn("compared"),
    "confirmed": _confirmed,
    "negation": _in_one_turn("negation"),
    "list": _listed,
}
Plan = dict[int, list[tuple[Turns, int, str]]]  # session -> (turns, subject index or -1, "old"/"new"/"")


def _sessions_of(
    plan: Plan, sessions: int, start: date, rng: random.Random
) -> tuple[list[dict[str, Any]], dict[tuple[int, str], list[int]]]:
    """BEAM batches of the planned blocks with six filler exchanges shuffled into each session, and the message ids
    of each (subject, tag)'s gold messages."""
    batches: list[dict[str, Any]] = []
    ids: dict[tuple[int, str], list[int]] = {}
    msg = 0
    for b in range(sessions):
        items = list(plan[b]) + [([("user", _one(rng, "filler_user"), False)], -1, "") for _ in range(6)]
        rng.shuffle(items)
        turns = []
        for block, subject, tag in items:
            if block[-1][0] == "user":
                block = [*block, ("assistant", _one(rng, "filler_assistant"), False)]
            messages = []
            for role, text, gold in block:
                if gold and subject >= 0:
                    ids.setdefault((subject, tag), []).append(msg)
                messages.append({"role": role, "id": msg, "content": text})
                msg += 1
            turns += [messages[k : k + 2] for k in range(0, len(messages), 2)]
        anchor = (start + timedelta(days=9 * b)).strftime("%B-%d-%Y")
        batches.append({"batch_number": b + 1, "time_anchor": anchor, "turns": turns})
    return batches, ids


def _chat(
    rng: random.Random,
    family: Family,
    subjects: list[Subject],
    flags: list[tuple[str, bool, bool]],
    sessions: int,
    start: date,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(chat.json batches, knowledge_update questions) for one chat: each subject's first statement, the update in
    its form (after a middle one when updated twice), another entity's value of the same kind, the first value told
    again after the update (by flags), and the entity's other facts."""
    plan: Plan = {b: [] for b in range(sessions)}
    facts = []
    for i, (s, (form, twice, history)) in enumerate(zip(subjects, flags)):
        first = rng.randrange(0, sessions - family.first_room)
        mid = rng.randrange(first + 1, sessions - 2) if twice else first
        later = rng.randrange(mid + 1, sessions - family.later_room)
        value = dict(zip(family.drawn, rng.sample(s.values, len(family.drawn))))
        names = list(s.names)
        rng.shuffle(names)  # the update names the entity in other words than the first statement, where it can
        plan[first].append(([("user", _fill(rng.choice(s.said["old"]), names[0], value["old"]), True)], i, "old"))
        prior = value["old"]
        if twice:
            plan[mid].append(([("user", _fill(rng.choice(s.said["plain"]), names[1], value["mid"]), True)], i, "old"))
            prior = value["mid"]
        plan[later].append((BLOCKS[form](s, names[-1], value["new"], prior, rng), i, "new"))
        if "near" in value:
            at = rng.randrange(sessions)
            plan[at].append(([("user", rng.choice(s.said["near"]).format(v=value["near"]), False)], -1, ""))
        if history:  # the first value told again after the update, as the past
            said = _fill(rng.choice(s.said["history"]), rng.choice(names), value["old"])
            plan[rng.randrange(later + 1, sessions)].append(([("user", said, False)], -1, ""))
        for text in s.said.get("other", ()):
            plan[rng.randrange(sessions)].append(([("user", _fill(text, rng.choice(names), ""), False)], -1, ""))
        facts.append((i, value["new"], {"update_form": form, "history_after": history, "updated_twice": twice}))
    batches, ids = _sessions_of(plan, sessions, start, rng)
    questions = []
    for i, new_v, marks in facts:
        question = {
            "question": rng.choice(subjects[i].ask),
            "answer": new_v,
            "source_chat_ids": {"original_info": ids[(i, "old")], "updated_info": ids[(i, "new")]},
        }
        questions.append(question | {mark: marks[mark] for mark in family.marks})
    return batches, questions


def write(folder: Path, family: int = 1, chats: int = 10, per_chat: int = 8, sessions: int = 10, seed: int = 0) -> Path:
    """Writes `chats` chat folders of the family under `folder`, each with `per_chat` updated subjects; returns the
    folder. The forms go in turn over the set's questions."""
    fam = FAMILIES[family]
    rng = random.Random(seed + (family if family > 1 else 0))
    n = 0
    for c in range(1, chats + 1):
        subjects = rng.sample(fam.subjects, min(per_chat, len(fam.subjects)))
        flags = [fam.flags(n + k, k) for k in range(len(subjects))]
        n += len(subjects)
        _save(folder / str(c), *_chat(rng, fam, subjects, flags, sessions, fam.start + timedelta(days=40 * c)))
    return folder


def _save(out: Path, batches: list[dict[str, Any]], questions: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "chat.json").write_text(json.dumps(batches, indent=1))
    (out / "probing_questions.json").write_text(json.dumps({"knowledge_update": questions}, indent=1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--family",
        type=int,
        choices=sorted(FAMILIES),
        default=1,
        help="1: updates in other words; 2: harder forms; 3: new subjects and forms; 4: other new subjects and forms",
    )
    args = parser.parse_args(argv)
    print(write(args.out, args.family, args.chats, seed=args.seed))


if __name__ == "__main__":
    main()
