"""A generated set of knowledge updates, in BEAM's native layout (eval/beam.py reads it): chats between a user and an
assistant where the user states a fact (an attribute of an entity) in one session and a new value for it in a later
one, in other words each time, among filler turns and distractors (the same entity's other attributes, the same
attribute of other entities). Each update gets a knowledge_update question whose gold is the later statement.

It exists to measure update handling where no rule can have been fitted: the templates were written once, before
any mechanism was measured on them, and are not to be tuned to. `python -m memcompile_langgraph.eval.updates_set OUT`
writes the set; `memcompile eval beam OUT` scores it.

`--family 2` writes a second, harder set over the same subjects, frozen in the same way: each update in one of three
forms (split across two user turns, the subject in the first and the new value alone in the next; stated by the user
among other news and restated by the assistant's recap; in other words for the attribute), another entity's value
of the same kind somewhere in the chat, and for every other subject the older value told again after the update as
history ("I used to ..."). Each question also carries `update_form` and `history_after` (the loader ignores them).

`--family 3` writes a third set, frozen the same way, over 16 new subjects (entities, attributes and questions of
their own) with the update in one of five forms neither earlier family has (FORMS3: a correction "it's X, not Y",
the consequence of an event, a sentence of a long message of unrelated news, a turn without the entity's name several
exchanges after the turn that names it, the user's reply to the assistant's question); a third of the subjects are
updated twice. Questions also carry `updated_twice`.

`--family 4` writes a fourth set, frozen the same way before anyone measured it, over 16 more new subjects whose
values are of six kinds (KINDS4: numbers in digits, numbers in words, names, dates and times, frequencies, states),
with the update in one of five forms no earlier family has (FORMS4: inside a question to the assistant, set against
the value it replaces, the assistant's reading of a document the user attached and then confirms, a denial of the
old value without the entity's name, a line of a list in a long message with code); a third of the questions are
updated twice and a third have the first value told again after the update.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TypeVar


@dataclass(frozen=True)
class Subject:
    names: tuple[str, ...]  # ways to name the entity
    old: tuple[str, ...]  # first statements: {e} entity, {v} value
    new: tuple[str, ...]  # later statements of another value
    ask: tuple[str, ...]  # questions about the current value
    values: tuple[str, ...]
    other: tuple[str, ...] = ()  # the same entity's other facts (distractors)


SUBJECTS = (
    Subject(
        ("the staging database", "our staging DB", "the staging Postgres instance"),
        (
            "{E} is about {v} in size right now.",
            "I checked and {e} takes up {v} of disk.",
            "Storage-wise, {e} sits at {v}.",
        ),
        (
            "Quick update: {e} has grown to {v}.",
            "{E} is at {v} now after the import.",
            "Looks like {e} is {v} these days.",
            "After last week's migration {e} ended up using {v}.",
        ),
        ("How big is the staging database now?", "What's the current size of our staging DB?"),
        ("12 GB", "18 GB", "31 GB", "47 GB", "64 GB"),
        ("{E} runs two read replicas.", "Backups of {e} go to a separate bucket."),
    ),
    Subject(
        ("my team", "the mobile team I lead", "our app squad"),
        ("{E} has {v} engineers at the moment.", "Right now {e} is {v} people.", "There are {v} developers on {e}."),
        (
            "We hired again, so {e} is {v} people now.",
            "Headcount on {e} went to {v}.",
            "{E} is down to {v} engineers after the reorg.",
            "These days {e} counts {v} developers.",
        ),
        ("How many engineers are on my team now?", "What is the current headcount of the mobile team I lead?"),
        ("four", "five", "six", "seven", "nine"),
        ("{E} does standups at 9:30.", "{E} ships a release every two weeks."),
    ),
    Subject(
        ("the API gateway", "our gateway service", "the edge proxy"),
        (
            "{E} times out requests after {v}.",
            "The timeout on {e} is set to {v}.",
            "We configured {e} with a {v} timeout.",
        ),
        (
            "I bumped the timeout on {e} to {v}.",
            "{E} now waits {v} before giving up on a request.",
            "Changed {e}'s timeout: it's {v} from today.",
            "For the record, {e} uses a {v} timeout these days.",
        ),
        ("What timeout does the API gateway use now?", "How long does our gateway service wait before timing out?"),
        ("15 seconds", "30 seconds", "45 seconds", "60 seconds", "90 seconds"),
        ("{E} terminates TLS for every service.", "Logs from {e} are kept for a week."),
    ),
    Subject(
        ("my rent", "the monthly rent on my flat", "what I pay for the apartment"),
        ("{E} is {v} a month.", "I pay {v} for {e} every month.", "Currently {e} comes to {v}."),
        (
            "The landlord raised {e} to {v}.",
            "From next month {e} will be {v}.",
            "{E} went up, it's {v} now.",
            "I renegotiated and {e} is {v} from now on.",
        ),
        ("How much is my rent now?", "What do I currently pay for the apartment each month?"),
        ("$1,450", "$1,600", "$1,725", "$1,880", "$2,050"),
        ("{E} includes heating.", "I pay {e} by bank transfer."),
    ),
    Subject(
        ("the product launch", "our launch date", "the public release"),
        ("{E} is planned for {v}.", "We're aiming for {v} for {e}.", "{E} is scheduled on {v}."),
        (
            "{E} slipped to {v}.",
            "We moved {e} to {v}.",
            "New plan: {e} happens on {v}.",
            "Marketing confirmed {e} for {v} instead.",
        ),
        ("When is the product launch now?", "What date is our public release set for?"),
        ("May 12", "May 26", "June 9", "June 23", "July 7"),
        ("{E} needs sign-off from legal.", "The press kit for {e} is almost done."),
    ),
    Subject(
        ("my running distance", "how far I run each week", "my weekly mileage"),
        ("{E} is {v} at the moment.", "I'm doing {v} a week for {e}.", "Right now {e} is around {v}."),
        (
            "I've built up and {e} is {v} now.",
            "{E} dropped to {v} because of my knee.",
            "These days {e} is {v}.",
            "Hit a new level: {e} reached {v}.",
        ),
        ("How far am I running each week now?", "What is my current weekly mileage?"),
        ("15 km", "22 km", "30 km", "38 km", "45 km"),
        ("I run {e} mostly before work.", "My shoes for {e} are almost worn out."),
    ),
    Subject(
        ("the test suite", "our CI test run", "the full set of tests"),
        ("{E} takes {v} to finish.", "A run of {e} lasts about {v}.", "{E} needs {v} on the build server."),
        (
            "After parallelising, {e} finishes in {v}.",
            "{E} is slower again, {v} per run.",
            "We got {e} down to {v}.",
            "Latest numbers: {e} completes in {v}.",
        ),
        ("How long does the test suite take now?", "What is the current duration of our CI test run?"),
        ("6 minutes", "9 minutes", "14 minutes", "21 minutes", "28 minutes"),
        ("{E} has about 900 cases.", "Flaky cases in {e} are tagged for review."),
    ),
    Subject(
        ("my manager", "the person I report to", "my boss"),
        ("{E} is {v}.", "I report to {v}, who is {e}.", "Currently {e} is {v}."),
        (
            "There was a reshuffle and {e} is {v} now.",
            "I've been moved under {v}.",
            "{V} took over as {e}.",
            "Starting this month {e} is {v}.",
        ),
        ("Who is my manager now?", "Who do I currently report to?"),
        ("Dana Whitfield", "Marco Ruiz", "Priya Natarajan", "Tom Becker", "Aiko Sato"),
        ("I have a one-on-one with {e} on Thursdays.",),
    ),
    Subject(
        ("the cache hit rate", "our Redis hit ratio", "how often the cache serves a request"),
        ("{E} is {v}.", "Monitoring shows {e} around {v}.", "We measured {e} at {v}."),
        (
            "After the key change {e} is {v}.",
            "{E} climbed to {v}.",
            "{E} fell to {v} with the new traffic.",
            "Dashboard says {e} sits at {v} these days.",
        ),
        ("What is the cache hit rate now?", "How high is our Redis hit ratio currently?"),
        ("62%", "71%", "78%", "85%", "93%"),
        ("{E} is reported every hour.",),
    ),
    Subject(
        ("my gym", "where I work out", "the fitness club I go to"),
        ("{E} is {v}.", "I train at {v}.", "For workouts I go to {v}."),
        (
            "I switched to {v}.",
            "{E} is {v} now since I moved.",
            "These days I train at {v} instead.",
            "I cancelled and joined {v}.",
        ),
        ("Which gym do I go to now?", "Where do I currently work out?"),
        ("Iron Works", "Peak Fitness", "the YMCA on Elm Street", "CrossFit Harbor", "Urban Climb"),
        ("{E} opens at six.",),
    ),
    Subject(
        ("the Node version we deploy", "our runtime version", "the Node.js release on the servers"),
        ("{E} is {v}.", "Production runs {v} as {e}.", "We're on {v} for {e}."),
        (
            "We upgraded, {e} is {v} now.",
            "Ops rolled {e} forward to {v}.",
            "Production is on {v} since Tuesday.",
            "{E} moved to {v}.",
        ),
        ("Which Node version do we deploy now?", "What Node.js release runs on the servers currently?"),
        ("Node 18", "Node 20", "Node 22", "Node 24"),
        ("{E} is pinned in the Dockerfile.",),
    ),
    Subject(
        ("my commute", "the trip to the office", "how long it takes me to get to work"),
        ("{E} is about {v}.", "Getting in takes me {v}.", "{E} lasts {v} door to door."),
        (
            "With the new bus line {e} is {v}.",
            "Since we moved, {e} takes {v}.",
            "{E} is more like {v} now.",
            "Roadworks made {e} {v}.",
        ),
        ("How long is my commute now?", "How long does it currently take me to get to work?"),
        ("20 minutes", "35 minutes", "45 minutes", "55 minutes", "70 minutes"),
        ("I listen to podcasts on {e}.",),
    ),
    Subject(
        ("the project budget", "what we can spend on the redesign", "our budget for the rebuild"),
        ("{E} is {v}.", "Finance approved {v} as {e}.", "We have {v} for {e}."),
        (
            "Finance cut {e} to {v}.",
            "{E} was raised to {v}.",
            "Revised figure: {e} is {v}.",
            "We've now got {v} in total for {e}.",
        ),
        ("What is the project budget now?", "How much can we currently spend on the redesign?"),
        ("$40,000", "$55,000", "$70,000", "$85,000", "$120,000"),
        ("{E} is tracked in the shared sheet.",),
    ),
    Subject(
        ("my daughter's school", "where Mia goes to school", "Mia's school"),
        ("{E} is {v}.", "Mia attends {v}.", "She goes to {v}."),
        (
            "Mia changed schools, she's at {v} now.",
            "{E} is {v} since September.",
            "We enrolled Mia at {v}.",
            "Mia started at {v} this term.",
        ),
        ("Which school does my daughter go to now?", "Where does Mia go to school currently?"),
        ("Lincoln Elementary", "Oak Hill Academy", "Riverside Primary", "St. Anne's", "Maple Grove School"),
        ("{E} starts at 8:15.",),
    ),
    Subject(
        ("the error rate on checkout", "checkout failures", "how often payments fail"),
        ("{E} is {v}.", "We see {e} at {v}.", "{E} sits around {v}."),
        (
            "The fix brought {e} down to {v}.",
            "{E} spiked to {v} yesterday and stayed there.",
            "{E} is {v} after the provider switch.",
            "Current figure for {e}: {v}.",
        ),
        ("What is the error rate on checkout now?", "How often do payments fail these days?"),
        ("0.4%", "0.9%", "1.6%", "2.3%", "3.1%"),
        ("{E} is alerted on in PagerDuty.",),
    ),
    Subject(
        ("my car", "what I drive", "the car I have"),
        ("{E} is a {v}.", "I drive a {v}.", "Right now I have a {v}."),
        (
            "I traded in and got a {v}.",
            "{E} is a {v} now.",
            "Sold the old one, I drive a {v} these days.",
            "Picked up a {v} last weekend.",
        ),
        ("What car do I drive now?", "What car do I currently have?"),
        ("Honda Civic", "Toyota RAV4", "Subaru Outback", "Tesla Model 3", "Mazda CX-5"),
        ("{E} needs new tyres soon.",),
    ),
)

FILLER_USER = (
    "Can you help me write a unit test for the date parser?",
    "What's a good way to structure a weekly planning meeting?",
    "How should I name feature branches in git?",
    "Could you explain the difference between a mutex and a semaphore?",
    "Any tips for keeping a reading habit going?",
    "How do I make a pie chart in matplotlib with percentages?",
    "What's a quick healthy lunch I can prep on Sundays?",
    "Can you review this SQL query for performance problems?",
    "How do I politely decline a meeting that has no agenda?",
    "What should go into a good README?",
    "How do I set up a Python virtual environment on Windows?",
    "Can you suggest a stretching routine after runs?",
)
FILLER_ASSISTANT = (
    "Sure. Start with the simplest case, then add the edge cases one at a time, and keep each test focused on one "
    "behaviour so a failure tells you exactly what broke.",
    "A good structure is a short review of last week, the priorities for this one, and a few minutes for blockers. "
    "Keep it to half an hour and write the decisions down.",
    "A common convention is a type prefix and a short description, like feature/login-form or fix/null-dates. "
    "Consistency matters more than the exact scheme.",
    "A mutex lets one thread into a section at a time and is owned by the thread that locked it; a semaphore "
    "counts permits and any thread may release one.",
    "Tie it to a routine you already have, keep a book with you, and set a small daily target such as ten pages.",
    "Use plt.pie with autopct='%1.1f%%' and set the axis to equal so the chart is round.",
    "Grain bowls work well: cook rice or quinoa, roast vegetables, add a protein and keep the dressing separate.",
    "Check that the join columns are indexed, avoid functions on indexed columns in the WHERE clause and look at "
    "the query plan before and after.",
    "Thank them, say you can't attend, and offer to read the notes or send your input ahead of time.",
    "What it does, how to install it, a short example, how to run the tests and where to ask questions.",
    "Run python -m venv .venv, then .venv\\Scripts\\activate, and install your packages with pip.",
    "Calf, hamstring and hip flexor stretches, about thirty seconds each, and a few minutes of easy walking first.",
)


def _chat(rng: random.Random, subjects: list[Subject], sessions: int, start: date) -> tuple[list, list]:
    """(chat.json batches, knowledge_update questions) for one chat."""
    plan: dict[int, list[tuple[str, int]]] = {b: [] for b in range(sessions)}  # batch -> (text, subject index)
    facts = []
    for i, s in enumerate(subjects):
        first = rng.randrange(0, sessions - 2)
        later = rng.randrange(first + 1, sessions)
        old_v, new_v = rng.sample(s.values, 2)
        names = list(s.names)
        rng.shuffle(names)  # the update names the entity in other words than the first statement, where it can
        old_t, new_t = rng.choice(s.old), rng.choice(s.new)
        plan[first].append((_fill(old_t, names[0], old_v), i))
        plan[later].append((_fill(new_t, names[-1], new_v), i))
        for text in s.other:
            plan[rng.randrange(sessions)].append((_fill(text, rng.choice(names), ""), -1))
        facts.append((i, new_v))
    batches: list[dict] = []
    ids: dict[int, list[int]] = {}
    msg = 0
    for b in range(sessions):
        items = list(plan[b])
        items += [(rng.choice(FILLER_USER), -1) for _ in range(6)]
        rng.shuffle(items)
        turns = []
        anchor = (start + timedelta(days=9 * b)).strftime("%B-%d-%Y")
        for text, subject in items:
            user = {"role": "user", "id": msg, "content": text}
            if subject >= 0:
                ids.setdefault(subject, []).append(msg)
            reply = {"role": "assistant", "id": msg + 1, "content": rng.choice(FILLER_ASSISTANT)}
            turns.append([user, reply])
            msg += 2
        batches.append({"batch_number": b + 1, "time_anchor": anchor, "turns": turns})
    questions = []
    for i, new_v in facts:
        old_id, new_id = ids[i]
        questions.append(
            {
                "question": rng.choice(subjects[i].ask),
                "answer": new_v,
                "source_chat_ids": {"original_info": [old_id], "updated_info": [new_id]},
            }
        )
    return batches, questions


def _fill(template: str, entity: str, value: str, prior: str = "") -> str:
    text = template.format(e=entity, E=entity[0].upper() + entity[1:], v=value, V=value, o=prior)
    return text[0].upper() + text[1:]


def write(folder: Path, chats: int = 10, per_chat: int = 8, sessions: int = 10, seed: int = 0) -> Path:
    """Writes `chats` chat folders under `folder`, each with `per_chat` updated subjects; returns the folder."""
    rng = random.Random(seed)
    for c in range(1, chats + 1):
        subjects = rng.sample(SUBJECTS, min(per_chat, len(SUBJECTS)))
        _save(folder / str(c), *_chat(rng, subjects, sessions, date(2024, 3, 1) + timedelta(days=40 * c)))
    return folder


def _save(out: Path, batches: list, questions: list) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "chat.json").write_text(json.dumps(batches, indent=1))
    (out / "probing_questions.json").write_text(json.dumps({"knowledge_update": questions}, indent=1))


# Family 2: harder forms, written once and frozen before anything was measured on them. The update is stated in a
# form the first family never uses, and the chat holds traps a rule keyed to family 1's phrasing falls into.
FORMS = ("split", "recap", "synonym")


@dataclass(frozen=True)
class Harder:
    """Family 2's templates for one family-1 subject (same names, first statements, questions and values)."""

    synonym: tuple[str, ...]  # the update in other words for the attribute than the first statement and the question
    cont: tuple[str, ...]  # the new value alone, the turn after a turn that only names the subject
    you: tuple[str, ...]  # the assistant's restatement of the update, in the second person
    history: tuple[str, ...]  # the older value told later as history: {e} entity, {v} the older value
    near: tuple[str, ...]  # another entity's value of the same kind: {v} a third value


LEADS = ("About {e} —", "Quick thing regarding {e}.", "Oh, and one more note on {e}:", "Re {e}:")
ACKS = ("Sure, go ahead.", "Okay, I'm listening.", "Go on.", "Yes?")
RECAPS = ("So to recap: {y}.", "Got it. To sum up, {y}.", "Noted. So, to recap what changed: {y}.")
NEWS = ("Also, a couple of things from this week.", "Some news first.", "Catching up on a few things.")

HARDER = {
    "the staging database": Harder(
        (
            "The footprint of {e} is {v} as of this week.",
            "{E} now occupies {v} on the volume.",
            "{E} weighs in at {v} since the import finished.",
        ),
        ("it's {v} now.", "that changed, it takes {v} these days."),
        ("the staging database now takes {v} of storage", "your staging DB has grown to {v}"),
        ("Back when {e} was {v}, the nightly dump took minutes.", "I remember {e} used to be {v}."),
        ("The analytics warehouse is {v} in size.", "Our production backup archive takes {v}."),
    ),
    "my team": Harder(
        (
            "{E} now has {v} people writing code.",
            "The roster of {e} counts {v} members after the changes.",
            "We're {v} strong on {e} as of this sprint.",
        ),
        ("we're {v} people now.", "that changed, it's {v} engineers these days."),
        ("your team is now {v} engineers", "the mobile team you lead has {v} people now"),
        ("Back when {e} was {v} people, standups were short.", "I used to have {v} engineers on {e}."),
        ("The backend team has {v} engineers.", "My friend's startup employs {v} developers."),
    ),
    "the API gateway": Harder(
        (
            "{E} now gives up on a slow request after {v}.",
            "The cut-off for slow calls on {e} is {v} as of today.",
            "We let {e} hold a request for {v} before it aborts.",
        ),
        ("it's {v} now.", "that changed, the limit is {v} from today."),
        ("the gateway's timeout is now {v}", "your API gateway waits {v} before timing out"),
        ("Back when {e} used {v}, the batch jobs kept failing.", "I remember {e} used to cut requests at {v}."),
        ("The database driver times out after {v}.", "Our load balancer's idle timeout is {v}."),
    ),
    "my rent": Harder(
        (
            "Housing costs me {v} a month as of the new lease.",
            "The landlord now charges {v} for the flat.",
            "The new lease says {v} per month for the apartment.",
        ),
        ("it's {v} now.", "that went up, it's {v} from next month."),
        ("your rent is now {v} a month", "you pay {v} for the flat each month now"),
        ("Back when {e} was {v}, I could save more.", "I used to pay {v} for the flat."),
        ("My sister pays {v} a month for her place.", "The flat next door rents for {v}."),
    ),
    "the product launch": Harder(
        (
            "Go-live for the product is now {v}.",
            "We ship to the public on {v} under the new plan.",
            "The release day moved, it's {v}.",
        ),
        ("it's {v} now.", "that slipped, {v} is the new date."),
        ("the product launch is now on {v}", "your public release is set for {v}"),
        ("Back when {e} was planned for {v}, we were too optimistic.", "We used to aim for {v} for {e}."),
        ("The partner's launch is on {v}.", "The company offsite is planned for {v}."),
    ),
    "my running distance": Harder(
        (
            "I cover {v} a week on foot now.",
            "My weekly kilometres are at {v} these days.",
            "Week to week I log {v} of running now.",
        ),
        ("it's {v} now.", "that changed, I'm doing {v} a week."),
        ("you now run {v} a week", "your weekly mileage is {v} now"),
        ("Back when {e} was {v}, I felt fitter.", "I used to run {v} a week."),
        ("My running partner does {v} a week.", "The club's beginners group runs {v} a week."),
    ),
    "the test suite": Harder(
        (
            "A full CI pass now takes {v}.",
            "The tests need {v} end to end on the build server these days.",
            "Wall-clock time for the tests is {v} after the change.",
        ),
        ("it's {v} now.", "that changed, a run is {v} these days."),
        ("the test suite now takes {v}", "your CI run finishes in {v} now"),
        ("Back when {e} took {v}, we merged less often.", "I remember {e} used to last {v}."),
        ("The nightly deploy takes {v}.", "The lint step on its own needs {v}."),
    ),
    "my manager": Harder(
        (
            "My line manager is {v} as of this month.",
            "I now answer to {v}.",
            "{V} is the one I report to after the reshuffle.",
        ),
        ("it's {v} now.", "that changed, I report to {v}."),
        ("your manager is now {v}", "you report to {v} now"),
        ("Back when {e} was {v}, one-on-ones were weekly.", "I used to report to {v}."),
        ("My colleague reports to {v}.", "The design team's lead is {v}."),
    ),
    "the cache hit rate": Harder(
        (
            "The share of requests the cache answers is {v} as of this week.",
            "Redis now serves {v} of lookups without a miss.",
            "Cache efficiency is at {v} after the change.",
        ),
        ("it's {v} now.", "that changed, we're at {v} these days."),
        ("the cache hit rate is now {v}", "your Redis hit ratio sits at {v} now"),
        ("Back when {e} was {v}, the database was overloaded.", "I remember {e} used to be {v}."),
        ("The CDN's hit rate is {v}.", "Our error budget burn is {v}."),
    ),
    "my gym": Harder(
        (
            "My workouts happen at {v} since the move.",
            "I've got a membership at {v} these days.",
            "For training I use {v} as of this month.",
        ),
        ("it's {v} now.", "that changed, I go to {v}."),
        ("you now work out at {v}", "your gym is {v} now"),
        ("Back when I trained at {v}, I went every morning.", "I used to work out at {v}."),
        ("My sister trains at {v}.", "My coworker goes to {v}."),
    ),
    "the Node version we deploy": Harder(
        (
            "The servers execute {v} as of this release.",
            "Our production runtime is {v} after the upgrade.",
            "Deployments ship with {v} now.",
        ),
        ("it's {v} now.", "that changed, it's {v} in production."),
        ("you now deploy {v}", "your servers run {v} now"),
        ("Back when we deployed {v}, the build was slower.", "We used to run {v} in production."),
        ("The build agents use {v}.", "Our legacy admin tool still runs on {v}."),
    ),
    "my commute": Harder(
        (
            "Getting to the office eats {v} of my morning these days.",
            "Door to door I'm on the road {v} each way now.",
            "The journey to work lasts {v} with the new route.",
        ),
        ("it's {v} now.", "that changed, it takes {v} each way."),
        ("your commute now takes {v}", "getting to work takes you {v} now"),
        ("Back when {e} was {v}, I read on the way.", "I used to spend {v} getting to work."),
        ("My partner's commute is {v}.", "The drive to my parents' place takes {v}."),
    ),
    "the project budget": Harder(
        (
            "The money we have for the redesign is {v} as of the review.",
            "Our spending cap for the rebuild is {v} after the review.",
            "Funding for the redesign stands at {v}.",
        ),
        ("it's {v} now.", "that changed, we have {v} in total."),
        ("the project budget is now {v}", "you can spend {v} on the redesign now"),
        ("Back when {e} was {v}, we planned a bigger scope.", "We used to have {v} for the redesign."),
        ("The marketing budget is {v}.", "The hiring plan costs {v}."),
    ),
    "my daughter's school": Harder(
        (
            "Mia is a pupil at {v} as of this term.",
            "Mia's classes are at {v} now.",
            "Every morning I drop Mia at {v} since September.",
        ),
        ("it's {v} now.", "that changed, she's at {v}."),
        ("Mia now goes to {v}", "your daughter's school is {v} now"),
        ("Back when Mia was at {v}, the drive was short.", "Mia used to go to {v}."),
        ("My nephew goes to {v}.", "The neighbours' son attends {v}."),
    ),
    "the error rate on checkout": Harder(
        (
            "The share of payments that fail is {v} as of this week.",
            "Failed purchases run at {v} after the provider switch.",
            "Our checkout failure ratio stands at {v}.",
        ),
        ("it's {v} now.", "that changed, we're at {v}."),
        ("the checkout error rate is now {v}", "your payments fail {v} of the time now"),
        ("Back when {e} was {v}, support was flooded.", "I remember {e} used to be {v}."),
        ("The login error rate is {v}.", "Search requests fail {v} of the time."),
    ),
    "my car": Harder(
        (
            "My vehicle is a {v} these days.",
            "I get around in a {v} since the trade-in.",
            "The one in my driveway is a {v} as of last weekend.",
        ),
        ("it's a {v} now.", "that changed, I have a {v}."),
        ("you now drive a {v}", "your car is a {v} now"),
        ("Back when I drove a {v}, road trips were cramped.", "I used to have a {v}."),
        ("My brother drives a {v}.", "My neighbour just bought a {v}."),
    ),
}


def _block(form: str, h: Harder, names: list[str], value: str, rng: random.Random) -> list:
    """The update's turns, (role, text, is_gold) in order: one user turn, a split across two, or a user turn and
    the assistant's recap."""
    if form == "split":
        lead = _fill(rng.choice(LEADS), names[-1], "")
        return [
            ("user", lead, False),
            ("assistant", rng.choice(ACKS), False),
            ("user", _fill(rng.choice(h.cont), names[-1], value), True),
            ("assistant", rng.choice(FILLER_ASSISTANT), False),
        ]
    said = _fill(rng.choice(h.synonym), names[-1], value)
    if form == "synonym":
        return [("user", said, True), ("assistant", rng.choice(FILLER_ASSISTANT), False)]
    user = f"{rng.choice(NEWS)} {said} Anyway: {rng.choice(FILLER_USER)}"
    recap = f"{rng.choice(RECAPS).format(y=rng.choice(h.you).format(v=value))} {rng.choice(FILLER_ASSISTANT)}"
    return [("user", user, True), ("assistant", recap, True)]


def _sessions_of(
    plan: dict[int, list[tuple[list, int, str]]], sessions: int, start: date, rng: random.Random
) -> tuple[list[dict], dict[tuple[int, str], list[int]]]:
    """BEAM batches of the planned blocks with six filler exchanges shuffled into each session, and the message ids
    of each (subject, tag)'s gold messages: the chats of families 2 and 3 (rng drawn in their order)."""
    batches: list[dict] = []
    ids: dict[tuple[int, str], list[int]] = {}
    msg = 0
    for b in range(sessions):
        items = list(plan[b]) + [([("user", rng.choice(FILLER_USER), False)], -1, "") for _ in range(6)]
        rng.shuffle(items)
        turns = []
        for block, subject, tag in items:
            if block[-1][0] == "user":
                block = [*block, ("assistant", rng.choice(FILLER_ASSISTANT), False)]
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


def _chat2(rng: random.Random, subjects: list[Subject], forms: list[str], sessions: int, start: date) -> tuple:
    """Family 2's (chat.json batches, knowledge_update questions) for one chat: each subject updated in its form,
    another entity's value of the same kind somewhere, and every other subject's older value told again after the
    update as history."""
    plan: dict[int, list[tuple[list, int, str]]] = {b: [] for b in range(sessions)}  # batch -> (turns, subject, tag)
    facts = []
    for i, (s, form) in enumerate(zip(subjects, forms)):
        h = HARDER[s.names[0]]
        first = rng.randrange(0, sessions - 3)
        later = rng.randrange(first + 1, sessions - 1)
        old_v, new_v, near_v = rng.sample(s.values, 3)
        names = list(s.names)
        rng.shuffle(names)
        plan[first].append(([("user", _fill(rng.choice(s.old), names[0], old_v), True)], i, "old"))
        plan[later].append((_block(form, h, names, new_v, rng), i, "new"))
        plan[rng.randrange(sessions)].append(([("user", rng.choice(h.near).format(v=near_v), False)], -1, ""))
        history = i % 2 == 0
        if history:
            said = _fill(rng.choice(h.history), rng.choice(names), old_v)
            plan[rng.randrange(later + 1, sessions)].append(([("user", said, False)], -1, ""))
        for text in s.other:
            plan[rng.randrange(sessions)].append(([("user", _fill(text, rng.choice(names), ""), False)], -1, ""))
        facts.append((i, new_v, form, history))
    batches, ids = _sessions_of(plan, sessions, start, rng)
    questions = []
    for i, new_v, form, history in facts:
        questions.append(
            {
                "question": rng.choice(subjects[i].ask),
                "answer": new_v,
                "source_chat_ids": {"original_info": ids[(i, "old")], "updated_info": ids[(i, "new")]},
                "update_form": form,
                "history_after": history,
            }
        )
    return batches, questions


def write2(folder: Path, chats: int = 10, per_chat: int = 8, sessions: int = 10, seed: int = 0) -> Path:
    """Family 2: like write(), the updates in FORMS (in turn over the set's questions), with traps."""
    rng = random.Random(seed + 2)
    n = 0
    for c in range(1, chats + 1):
        subjects = rng.sample(SUBJECTS, min(per_chat, len(SUBJECTS)))
        forms = [FORMS[(n + k) % len(FORMS)] for k in range(len(subjects))]
        n += len(subjects)
        _save(folder / str(c), *_chat2(rng, subjects, forms, sessions, date(2024, 3, 1) + timedelta(days=40 * c)))
    return folder


# Family 3: new subjects and update forms neither family 1 nor 2 has, written once and frozen before any mechanism
# was measured on it (its figure is measured once, for an adopted mechanism). Every subject is new (its entity, its
# attribute, its questions); the update is stated in one of FORMS3: as a correction of the value said before ("it's
# X, not Y"), as the consequence of an event, inside a long message of unrelated news, several turns after a turn
# that names the subject without a value, or as the user's reply to the assistant's question about it. A third of
# the subjects are updated twice (the question's gold is the newest, both earlier statements are replaced).
FORMS3 = ("correction", "consequence", "mixed", "later", "asked")


@dataclass(frozen=True)
class Subject3:
    names: tuple[str, ...]  # ways to name the entity: {e}
    old: tuple[str, ...]  # first statements: {v} the value
    plain: tuple[str, ...]  # a later statement of another value, in other words (the middle update, the mixed form)
    correction: tuple[str, ...]  # the update as a correction: {v} the new value, {o} the value it corrects
    consequence: tuple[str, ...]  # the update as the consequence of an event
    mention: tuple[str, ...]  # a turn that names the subject without a value
    bare: tuple[str, ...]  # the new value without naming the entity (said after a mention, or as a reply)
    asked: tuple[str, ...]  # the assistant's question about the subject
    ask: tuple[str, ...]  # questions about the current value
    values: tuple[str, ...]
    near: tuple[str, ...]  # another entity's value of the same kind: {v}
    history: tuple[str, ...]  # an earlier value told as history: {v}
    other: tuple[str, ...] = ()  # the same entity's other facts


SUBJECTS3 = (
    Subject3(
        ("my cat Miso", "Miso", "our cat"),
        ("{E} weighs {v}.", "At the vet {e} came in at {v}."),
        ("The scale says {e} is {v} these days.", "{E} is up to {v}, according to the vet."),
        ("Actually I had {e}'s weight wrong, she's {v}, not {o}.", "Correction on {e}: {v}, not {o} as I said."),
        (
            "Since we switched her to the diet food, {e} is down to {v}.",
            "All those treats from my parents mean {e} now weighs {v}.",
        ),
        ("I need to take {e} to the vet for her weigh-in.", "The vet wanted to keep an eye on how heavy {e} is."),
        ("She was {v} on the vet's scale this morning.", "{V} exactly, the vet was pleased."),
        ("How much does Miso weigh at the moment?", "What did the scale say for Miso?"),
        ("What does my cat weigh at this point?", "How heavy is Miso these days?"),
        ("4.1 kg", "4.6 kg", "5.2 kg", "5.8 kg", "6.3 kg"),
        ("My neighbour's dog weighs {v}.", "The kitten my sister adopted is {v}."),
        ("When Miso was {v} she could still jump onto the fridge.",),
        ("{E} sleeps on the windowsill all afternoon.",),
    ),
    Subject3(
        ("our hosting provider", "where the app is hosted", "the cloud we run on"),
        ("{E} is {v}.", "We host everything on {v}."),
        ("We've moved the whole stack over to {v}.", "Production lives on {v} as of the migration."),
        ("Correction about {e}: it's {v}, not {o}; I mixed up the invoices.", "Sorry, {e} is {v} rather than {o}."),
        ("After the pricing change we signed with {v}, so that's {e} now.", "The outage last month pushed us to {v}."),
        ("We had a long meeting about {e} today, costs are a worry.", "I'm not happy with {e} at all lately."),
        ("Decision made: it's {v} from here on.", "We're going with {v}, contracts are signed."),
        ("Did you settle the question of where to host the app?", "What did you decide about the hosting?"),
        ("Which cloud does our app run on?", "Who hosts our app at this point?"),
        ("AWS", "Hetzner", "DigitalOcean", "Google Cloud", "Fly.io"),
        ("Our marketing site is on {v}.", "My friend's startup uses {v}."),
        ("Back when we hosted on {v}, the bills were smaller.",),
        ("{E} bills us at the start of each month.",),
    ),
    Subject3(
        ("our sprint length", "how long a sprint lasts", "the sprint cadence"),
        ("{E} is {v}.", "Sprints on the team run {v}."),
        ("We switched to sprints of {v}.", "A sprint lasts {v} for us now."),
        ("I misspoke about {e}: it's {v}, not {o}.", "Small correction: sprints are {v}, not {o}."),
        ("The planning overhead was too much, so sprints are {v} long now.", "With the new PM, sprints last {v}."),
        ("The retro was all about {e} today.", "People keep complaining about {e}."),
        ("We settled on {v}.", "{V} it is, starting Monday."),
        ("So what did the retro decide about the sprints?", "Did the team agree on a new cadence?"),
        ("How long are our sprints?", "What length of sprint does the team work in?"),
        ("one week", "two weeks", "three weeks", "four weeks"),
        ("The design team plans in cycles of {v}.", "Our release train leaves every {v}."),
        ("When sprints were {v}, we never finished the board.",),
        ("{E} is written on the wiki's front page.",),
    ),
    Subject3(
        ("our monthly active users", "the app's MAU", "how many people use the app each month"),
        ("{E} is {v}.", "We're at {v} monthly active users."),
        ("The app counts {v} active users a month now.", "Monthly actives reached {v}."),
        ("I quoted {e} wrong yesterday: {v}, not {o}.", "Correction, {e} is {v} and not {o}."),
        ("The TikTok mention sent {e} to {v}.", "Since the paywall went up, {e} fell to {v}."),
        ("The board wants to see {e} in the deck.", "I've been staring at {e} all morning."),
        ("{V} last month, per the dashboard.", "The dashboard shows {v} for last month."),
        ("How is the usage looking this month?", "What does the dashboard say about monthly users?"),
        ("How many monthly active users does the app have?", "What's the latest MAU figure?"),
        ("8,400", "11,200", "15,900", "21,300", "27,800"),
        ("Our competitor claims {v} monthly users.", "The newsletter has {v} subscribers."),
        ("When we had {v} monthly users, the server never broke a sweat.",),
        ("{E} is reported to investors every quarter.",),
    ),
    Subject3(
        ("my phone plan", "what I pay for my mobile", "the monthly phone bill"),
        ("{E} is {v} a month.", "I pay {v} monthly for {e}."),
        ("The carrier now charges me {v} a month.", "My mobile costs {v} per month now."),
        ("I got {e} wrong, it's {v}, not {o}.", "Scratch that about {e}: {v} a month, not {o}."),
        ("Adding the roaming pack pushed {e} to {v}.", "Because I dropped the data add-on, {e} is {v}."),
        ("I called the carrier about {e} today.", "I want to look at {e} again, it feels high."),
        ("They agreed on {v} a month.", "It comes to {v} monthly from now on."),
        ("How did the call with the carrier go?", "Did they change your plan?"),
        ("What do I pay for my phone each month?", "How much is my mobile bill?"),
        ("$25", "$32", "$40", "$48", "$55"),
        ("My partner's plan is {v} a month.", "The streaming bundle is {v} monthly."),
        ("I remember paying {v} for the phone and thinking it was a lot.",),
        ("{E} includes unlimited texts.",),
    ),
    Subject3(
        ("my flight to Lisbon", "the Lisbon trip", "when I fly out to Lisbon"),
        ("{E} is on {v}.", "I'm booked to Lisbon on {v}."),
        ("I rebooked, I fly to Lisbon on {v}.", "The airline put me on the {v} flight to Lisbon."),
        ("Wrong date before: {e} is {v}, not {o}.", "Correction, I leave for Lisbon on {v}, not {o}."),
        ("The conference moved, so I fly to Lisbon on {v}.", "The strike cancelled my flight; I go on {v}."),
        ("I spent the morning on the phone about {e}.", "The airline emailed me about {e}."),
        ("They could only give me {v}.", "It's {v} now, the earliest they had."),
        ("Any news from the airline?", "Did the airline sort out your booking?"),
        ("When do I fly to Lisbon?", "What date is my Lisbon flight?"),
        ("October 3", "October 10", "October 17", "November 2", "November 14"),
        ("My brother flies to Rome on {v}.", "The team dinner is on {v}."),
        ("When I was booked for {v}, I'd planned to work from the hotel.",),
        ("{E} has a layover in Madrid.",),
    ),
    Subject3(
        ("the Docker image", "our container image", "the image we ship"),
        ("{E} is {v}.", "{E} comes to {v} compressed."),
        ("After the rebuild the image is {v}.", "Our container weighs {v} now."),
        ("I had {e}'s size wrong: {v}, not {o}.", "Correction: {e} is {v}, not {o}."),
        ("Adding the ML libraries took {e} to {v}.", "The multi-stage build brought {e} down to {v}."),
        ("Deploys are slow and I blame {e}.", "I finally profiled {e} today."),
        ("It comes in at {v}.", "{V}, measured on the registry."),
        ("How big did the image end up?", "What does the registry show for the image size?"),
        ("How large is our Docker image?", "What's the size of the image we ship?"),
        ("410 MB", "520 MB", "640 MB", "780 MB", "950 MB"),
        ("The database dump is {v}.", "Our frontend bundle is {v} uncompressed."),
        ("When the image was {v}, pulls took seconds.",),
        ("{E} is based on Debian slim.",),
    ),
    Subject3(
        ("my dentist", "the dentist I see", "who does my dental check-ups"),
        ("{E} is {v}.", "I see {v} for my teeth."),
        ("I'm registered with {v} for dental care now.", "{V} looks after my teeth these days."),
        ("I said the wrong name for {e}: it's {v}, not {o}.", "Correction: {e} is {v}, not {o}."),
        ("The practice closed, so {v} took over my check-ups.", "After the move I signed up with {v}."),
        ("I had a check-up booked with {e} and it got messy.", "I need to talk about {e}."),
        ("I'm with {v} now.", "{V} will be doing it from now on."),
        ("Did you find a new dentist?", "Who will do your check-ups then?"),
        ("Who is my dentist?", "Which dentist do I go to?"),
        ("Dr. Okafor", "Dr. Lindqvist", "Dr. Chen", "Dr. Moreau", "Dr. Haddad"),
        ("My kids' orthodontist is {v}.", "My mother's GP is {v}."),
        ("When I went to {v}, the waiting room was always full.",),
        ("{E} always sends a text reminder.",),
    ),
    Subject3(
        ("the search API's p95 latency", "search latency at p95", "how fast search answers"),
        ("{E} is {v}.", "The search endpoint's p95 is {v}."),
        ("Search answers in {v} at p95 now.", "Ninety-fifth percentile for search is {v}."),
        ("I misread the chart for {e}: {v}, not {o}.", "Correction: {e} is {v} and not {o}."),
        ("The new index brought {e} down to {v}.", "Since the traffic spike, {e} is {v}."),
        ("I was looking at {e} on the dashboard.", "Product asked me about {e} again."),
        ("It's {v} on the latest chart.", "The chart says {v}."),
        ("What does the latency chart show for search?", "How is search doing on speed?"),
        ("What is the p95 latency of search?", "How slow is the search API at the 95th percentile?"),
        ("120 ms", "180 ms", "240 ms", "310 ms", "450 ms"),
        ("The login endpoint's p95 is {v}.", "Our payments API answers in {v}."),
        ("Back when search took {v}, nobody complained.",),
        ("{E} is on the team's status page.",),
    ),
    Subject3(
        ("my sleep", "how much I sleep", "my nightly sleep"),
        ("I get about {v} of sleep a night.", "{E} averages {v}."),
        ("My tracker shows {v} a night now.", "I'm sleeping {v} on an average night."),
        ("I overstated {e}: it's {v}, not {o}.", "Correction: {e} is {v} a night, not {o}."),
        ("The new baby means I'm on {v} a night.", "Since I stopped coffee after noon I sleep {v}."),
        ("I've been tracking {e} with my watch.", "The doctor asked about {e}."),
        ("{V} on average, the watch says.", "It averages {v} this month."),
        ("What did the watch say about your nights?", "How are the nights going?"),
        ("How much do I sleep a night?", "How many hours of sleep am I getting?"),
        ("five hours", "six hours", "seven hours", "eight hours"),
        ("My partner sleeps {v}.", "The article said teenagers need {v}."),
        ("When I slept {v} a night, I was always tired.",),
        ("{E} is worse on Sundays.",),
    ),
    Subject3(
        ("our frontend framework", "what the web client is written in", "the UI framework"),
        ("{E} is {v}.", "The web client is built with {v}."),
        ("The web client is rewritten in {v}.", "We build the UI with {v} these days."),
        ("I named {e} wrong: it's {v}, not {o}.", "Correction: {e} is {v}, not {o}."),
        ("The new hires knew {v}, so the client is {v} now.", "Bundle size pushed us to {v}."),
        ("We argued about {e} all week.", "The rewrite question for {e} came up again."),
        ("We went with {v}.", "{V} won the vote."),
        ("Where did the framework debate land?", "What did you pick for the client?"),
        ("Which framework is our web client built with?", "What's our UI framework?"),
        ("React", "Vue", "Svelte", "Angular", "SolidJS"),
        ("The admin panel uses {v}.", "My side project is in {v}."),
        ("When the client was {v}, builds took forever.",),
        ("{E} is covered by our style guide.",),
    ),
    Subject3(
        ("our office address", "where the office is", "the office"),
        ("{E} is {v}.", "We work out of {v}."),
        ("The team moved into {v}.", "Our office is at {v} now."),
        ("I gave you the wrong address: {v}, not {o}.", "Correction, the office is at {v}, not {o}."),
        ("The lease ran out, so we're at {v}.", "Growing to forty people pushed us to {v}."),
        ("We've been looking at spaces for {e}.", "The landlord wrote about {e} again."),
        ("We signed for {v}.", "It's {v}, keys on Monday."),
        ("Did you find a new space?", "Where did you end up with the office?"),
        ("What's our office address?", "Where is the office located?"),
        ("14 Harbour Street", "220 Mill Road", "7 Canal Square", "95 Station Avenue", "31 Birch Lane"),
        ("My gym is at {v}.", "The client's office is at {v}."),
        ("When we were at {v}, lunch options were great.",),
        ("{E} has a bike room.",),
    ),
    Subject3(
        ("the database connection pool", "our pool size", "how many connections the pool holds"),
        ("{E} holds {v}.", "The pool is set to {v}."),
        ("We run the pool with {v} now.", "The pool was resized to {v}."),
        ("I got {e} wrong: it's {v}, not {o}.", "Correction: the pool holds {v}, not {o}."),
        ("The timeouts under load made us go to {v}.", "Postgres ran out of memory, so the pool is {v}."),
        ("I was tuning {e} all afternoon.", "Ops asked about {e}."),
        ("Settled on {v}.", "{V} after the load test."),
        ("What did the load test settle for the pool?", "Did you change the pool?"),
        ("How many connections does our pool hold?", "What's the connection pool size?"),
        ("12 connections", "24 connections", "40 connections", "64 connections", "96 connections"),
        ("The analytics replica allows {v}.", "Our Redis client opens {v}."),
        ("With {v} in the pool we had timeouts every night.",),
        ("{E} is configured in the Helm chart.",),
    ),
    Subject3(
        ("my savings goal", "what I'm saving towards", "the target for my savings"),
        ("{E} is {v}.", "I'm trying to save {v} this year."),
        ("I'm aiming to put away {v}.", "The target in my budget app is {v}."),
        ("I said {e} wrong: it's {v}, not {o}.", "Correction: {e} is {v}, not {o}."),
        ("The bonus lets me aim for {v}.", "With the car repair, I lowered the target to {v}."),
        ("I sat down with {e} this weekend.", "My partner and I talked about {e}."),
        ("We agreed on {v}.", "{V} is the number."),
        ("Where did you land on the savings?", "What target did you set?"),
        ("How much am I trying to save?", "What's my savings target?"),
        ("$6,000", "$9,000", "$12,000", "$18,000", "$25,000"),
        ("My sister saved {v} last year.", "The kitchen remodel quote was {v}."),
        ("When my goal was {v}, I still ate out a lot.",),
        ("{E} lives in a separate account.",),
    ),
    Subject3(
        ("the team offsite", "where the offsite is", "our offsite location"),
        ("{E} is in {v}.", "We're going to {v} for the offsite."),
        ("We're heading to {v} for the offsite.", "The offsite will happen in {v}."),
        ("I got {e} wrong: it's {v}, not {o}.", "Correction: the offsite is in {v}, not {o}."),
        ("Flights were cheaper, so the offsite is in {v}.", "The venue cancelled; we're off to {v}."),
        ("HR is still working on {e}.", "I got an email about {e}."),
        ("{V} got the most votes.", "It's {v}, booked this morning."),
        ("Did HR pick a place for the offsite?", "Where is everyone going?"),
        ("Where is our offsite?", "Which city is the offsite in?"),
        ("Lake Como", "Porto", "Kraków", "Edinburgh", "Valencia"),
        ("Last year's conference was in {v}.", "My cousin lives in {v}."),
        ("When the offsite was in {v}, it rained all week.",),
        ("{E} runs for three days.",),
    ),
    Subject3(
        ("my Spanish lesson", "the day of my Spanish class", "Spanish"),
        ("{E} is on {v}.", "I have Spanish on {v}."),
        ("Spanish class happens on {v} now.", "The tutor moved me to {v}."),
        ("Wrong day before: {e} is on {v}, not {o}.", "Correction: Spanish is on {v}, not {o}."),
        ("My tutor started a job, so Spanish is on {v}.", "The new shift means my class is on {v}."),
        ("I have to talk to the tutor about {e}.", "My tutor messaged about {e}."),
        ("{V} works for both of us.", "We agreed on {v}."),
        ("So when is Spanish going to be?", "Did you and the tutor find a day?"),
        ("What day is my Spanish lesson?", "When do I have Spanish class?"),
        ("Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Saturdays"),
        ("My piano lesson is on {v}.", "The book club meets on {v}."),
        ("When Spanish was on {v}, I always missed it.",),
        ("{E} is an hour long.",),
    ),
)

MIXED_NEWS = (
    "The plumber finally came on Tuesday.",
    "I finished the book about habits you recommended.",
    "My sister is visiting over the holidays.",
    "The garden is full of tomatoes.",
    "We adopted a new code review checklist.",
    "I signed up for a pottery class.",
    "The neighbours are renovating again.",
    "My laptop battery is dying.",
)
MIXED_OPEN = ("Long update, sorry.", "Lots going on, here's the rundown.", "A few things at once.")


def _block3(form: str, s: Subject3, e: str, value: str, prior: str, rng: random.Random) -> list:
    """Family 3: the update's turns, (role, text, is_gold) in order."""
    if form == "correction":
        return [("user", rng.choice(s.correction).format(e=e, E=e, v=value, V=value, o=prior), True)]
    if form == "consequence":
        return [("user", _fill(rng.choice(s.consequence), e, value), True)]
    if form == "mixed":
        news = rng.sample(MIXED_NEWS, 4)
        said = _fill(rng.choice(s.plain), e, value)
        text = f"{rng.choice(MIXED_OPEN)} {news[0]} {news[1]} {said} {news[2]} {news[3]} {rng.choice(FILLER_USER)}"
        return [("user", text, True)]
    if form == "later":  # the subject named, then two to four other exchanges, then the value without the name
        turns = [
            ("user", _fill(rng.choice(s.mention), e, ""), False),
            ("assistant", rng.choice(FILLER_ASSISTANT), False),
        ]
        for _ in range(rng.randrange(2, 5)):
            turns += [("user", rng.choice(FILLER_USER), False), ("assistant", rng.choice(FILLER_ASSISTANT), False)]
        return [*turns, ("user", _fill(rng.choice(s.bare), e, value), True)]
    # asked: the user names the subject, the assistant asks about it, the user answers with the value
    return [
        ("user", _fill(rng.choice(s.mention), e, ""), False),
        ("assistant", rng.choice(s.asked), False),
        ("user", _fill(rng.choice(s.bare), e, value), True),
    ]


S = TypeVar("S", "Subject3", "Subject4")  # a subject of family 3 or 4
Block = Callable[[str, S, str, str, str, random.Random], list]  # (form, subject, entity, value, prior value, rng)


def _chat_chained(
    rng: random.Random,
    subjects: Sequence[S],
    flags: list[tuple[str, bool, bool]],
    block: Block[S],
    sessions: int,
    start: date,
) -> tuple:
    """Family 3's or 4's (chat.json batches, knowledge_update questions) for one chat: each subject's update in its
    form (`block` writes it), by flags (form, updated twice, first value told again after the update)."""
    plan: dict[int, list[tuple[list, int, str]]] = {b: [] for b in range(sessions)}  # batch -> (turns, subject, tag)
    facts = []
    for i, (s, (form, chain, history)) in enumerate(zip(subjects, flags)):
        first = rng.randrange(0, sessions - 4)
        mid = rng.randrange(first + 1, sessions - 2) if chain else first
        later = rng.randrange(mid + 1, sessions - 1)
        old_v, mid_v, new_v, near_v = rng.sample(s.values, 4)
        names = list(s.names)
        rng.shuffle(names)
        plan[first].append(([("user", _fill(rng.choice(s.old), names[0], old_v), True)], i, "old"))
        prior = old_v
        if chain:
            plan[mid].append(([("user", _fill(rng.choice(s.plain), names[1], mid_v), True)], i, "old"))
            prior = mid_v
        plan[later].append((block(form, s, names[-1], new_v, prior, rng), i, "new"))
        plan[rng.randrange(sessions)].append(([("user", rng.choice(s.near).format(v=near_v), False)], -1, ""))
        if history:  # the first value told again after the update, as the past
            said = _fill(rng.choice(s.history), rng.choice(names), old_v)
            plan[rng.randrange(later + 1, sessions)].append(([("user", said, False)], -1, ""))
        for text in s.other:
            plan[rng.randrange(sessions)].append(([("user", _fill(text, rng.choice(names), ""), False)], -1, ""))
        facts.append((i, new_v, form, history, chain))
    batches, ids = _sessions_of(plan, sessions, start, rng)
    questions = []
    for i, new_v, form, history, chain in facts:
        questions.append(
            {
                "question": rng.choice(subjects[i].ask),
                "answer": new_v,
                "source_chat_ids": {"original_info": ids[(i, "old")], "updated_info": ids[(i, "new")]},
                "update_form": form,
                "history_after": history,
                "updated_twice": chain,
            }
        )
    return batches, questions


def _write_chained(
    folder: Path,
    rng: random.Random,
    pool: Sequence[S],
    block: Block[S],
    flags: Callable[[int, int], tuple[str, bool, bool]],
    chats: int,
    per_chat: int,
    sessions: int,
    start: date,
) -> Path:
    """Writes the chats of family 3 or 4: `per_chat` subjects of `pool` each, `flags(question number in the set,
    in the chat)` their (form, updated twice, history after)."""
    n = 0
    for c in range(1, chats + 1):
        subjects = rng.sample(pool, min(per_chat, len(pool)))
        marks = [flags(n + k, k) for k in range(len(subjects))]
        n += len(subjects)
        _save(folder / str(c), *_chat_chained(rng, subjects, marks, block, sessions, start + timedelta(days=40 * c)))
    return folder


def write3(folder: Path, chats: int = 10, per_chat: int = 8, sessions: int = 10, seed: int = 0) -> Path:
    """Family 3: new subjects, the updates in FORMS3 (in turn over the set's questions), a third updated twice."""

    def flags(n: int, k: int) -> tuple[str, bool, bool]:
        return FORMS3[n % len(FORMS3)], n % 3 == 2, k % 2 == 1

    return _write_chained(
        folder, random.Random(seed + 3), SUBJECTS3, _block3, flags, chats, per_chat, sessions, date(2025, 1, 6)
    )


# Family 4: 16 more new subjects and five update forms none of families 1 to 3 has, written once and frozen before
# anything was measured on it (its figure is measured once, by someone who did not write it). The subjects' values
# are of six kinds (KINDS4: numbers with units in digits, numbers in words, names, dates and times, frequencies,
# states); the update is stated in one of FORMS4: inside a question to the assistant ("Now that X is V, should
# I ...?"), set against the value it replaces ("went from O to V"), by the assistant reading a document the user
# attached and the user confirming it (the gold is the assistant's turn: the only one holding the value), as a
# negation of the replaced value in a turn that does not name the entity ("not on O any more, V since Monday"), or
# as one line of a list in a long message of several paragraphs with code. A third of the questions are updated
# twice and a third have the first value told again after the update, the two thirds overlapping in part.
FORMS4 = ("question", "compared", "confirmed", "negation", "list")
KINDS4 = ("digits", "words", "name", "time", "frequency", "state")


@dataclass(frozen=True)
class Subject4:
    kind: str  # of KINDS4
    names: tuple[str, ...]  # ways to name the entity: {e}
    old: tuple[str, ...]  # first statements: {v} the value
    plain: tuple[str, ...]  # a later statement of another value (the middle update of a subject updated twice)
    question: tuple[str, ...]  # the update inside a question to the assistant
    compared: tuple[str, ...]  # the update set against the value it replaces: {o}
    negation: tuple[str, ...]  # the replaced value {o} denied and the new one stated, without the entity's names
    doc: tuple[str, ...]  # the user attaching a document about the subject (no value)
    you: tuple[str, ...]  # the assistant's reading of that document: {v}
    note: tuple[str, ...]  # the update as a terse line of a list
    ask: tuple[str, ...]  # questions about the current value
    values: tuple[str, ...]
    near: tuple[str, ...]  # another entity's value of the same kind: {v}
    history: tuple[str, ...]  # the first value told as history: {v}
    other: tuple[str, ...] = ()  # the same entity's other facts


SUBJECTS4 = (
    Subject4(
        "digits",
        ("our home broadband", "the internet at home", "my home connection"),
        ("{E} runs at {v}.", "Speed tests put {e} at {v}.", "We pay for {v} on {e}."),
        ("The provider upgraded the line to {v}.", "Speed tests in the flat show {v} these days."),
        (
            "Now that {e} is {v}, is it worth getting a mesh router?",
            "With {e} at {v}, can we stream 4K on two TVs at once?",
        ),
        (
            "{E} went from {o} to {v} after the engineer's visit.",
            "Speed tests on {e} say {v}, where I used to get {o}.",
        ),
        (
            "No more {o} in the flat: the line tests at {v} since the fibre went in.",
            "We're not stuck on {o} any longer, the router reports {v}.",
        ),
        ("The provider sent a letter about {e}, it's attached. What does it say?", "Here's the upgrade PDF for {e}."),
        ("your home broadband now runs at {v}", "the line at home was upgraded to {v}"),
        ("{e}: upgraded to {v}", "{e} tests at {v} now"),
        (
            "How fast is my internet at home these days?",
            "What speed does our home broadband run at now?",
            "What do speed tests show for the connection at home at the moment?",
        ),
        ("80 Mbps", "150 Mbps", "300 Mbps", "500 Mbps", "940 Mbps"),
        ("My parents' connection runs at {v}.", "The office Wi-Fi tops out at {v}."),
        ("When {e} ran at {v}, video calls kept freezing.",),
        ("{E} comes with a static IP.", "The router for {e} sits in the hallway."),
    ),
    Subject4(
        "digits",
        ("the thermostat", "the heating setpoint", "the temperature setting at home"),
        ("{E} is set to {v}.", "We keep the flat at {v} during the day."),
        ("The heating holds the flat at {v} now.", "Daytime temperature at home is {v} these days."),
        (
            "Now that {e} is at {v}, should I get thicker curtains?",
            "Since we keep the flat at {v} now, is that warm enough for the houseplants?",
        ),
        ("We turned {e} from {o} to {v} to save on gas.", "{E} reads {v} on the dial; it was {o} before."),
        (
            "The heating isn't on {o} any more; the dial says {v}.",
            "No longer {o} in the living room: we keep it at {v}.",
        ),
        ("My partner sent a photo of {e}, attached. What does it say?", "Here's the energy app's report on {e}."),
        ("the thermostat is now set to {v}", "the flat is now kept at {v}"),
        ("{e}: {v} from now on", "turned {e} to {v}"),
        (
            "What temperature do we keep the flat at these days?",
            "What is the thermostat set to at the moment?",
            "How warm is it at home now?",
        ),
        ("18 °C", "19 °C", "20 °C", "21 °C", "22 °C"),
        ("My office is kept at {v}.", "The baby's room is at {v}."),
        ("When {e} was at {v}, we wore jumpers indoors.",),
        ("{E} is a smart one we control from the phone.",),
    ),
    Subject4(
        "digits",
        ("my daily step goal", "the step target on my watch", "my step count target"),
        ("{E} is {v}.", "I aim for {v} a day."),
        ("My watch nags me until I hit {v} now.", "I've set the watch to {v} a day."),
        (
            "Now that {e} is {v}, should I walk to work instead of taking the bus?",
            "With {e} at {v}, how long a walk do I need at lunch?",
        ),
        ("I moved {e} from {o} to {v}.", "{E} is {v}, it used to be {o}."),
        (
            "The watch isn't asking for {o} any more: it wants {v} a day.",
            "Forget {o} a day; the target on my wrist is {v}.",
        ),
        ("The physio emailed a plan that covers {e}, attached.", "Here's a screenshot of {e} from the health app."),
        ("your daily step goal is now {v}", "the plan sets your daily target at {v}"),
        ("{e} raised to {v}", "{e}: {v} a day"),
        (
            "How many steps a day am I aiming for now?",
            "What's my daily step goal at the moment?",
            "What does my watch expect of me each day these days?",
        ),
        ("6,000 steps", "8,000 steps", "10,000 steps", "12,500 steps", "15,000 steps"),
        ("My partner's watch asks for {v} a day.", "The office challenge goal is {v}."),
        ("When {e} was {v}, I hit it just by commuting.",),
        ("{E} resets at midnight.",),
    ),
    Subject4(
        "words",
        ("the wedding guest list", "our guest count for the wedding", "the RSVP list for the wedding"),
        ("{E} is at {v}.", "We're planning for {v} at the wedding.", "{E} comes to {v} so far."),
        ("We'll have {v} at the wedding after the last RSVPs.", "The caterer is cooking for {v} now."),
        (
            "Now that {e} is {v}, is the barn venue still big enough?",
            "With {e} at {v}, how many tables of eight do we need?",
        ),
        ("{E} went from {o} to {v} once the cousins replied.", "We're at {v} for the wedding; we started with {o}."),
        (
            "We're not feeding {o} any more, the caterer has us down for {v}.",
            "The seating plan no longer has {o}; it's {v}.",
        ),
        ("The venue's final confirmation is attached, it's about {e}.", "Here's the RSVP export for {e}."),
        ("the wedding now has {v} confirmed", "the venue now expects {v}"),
        ("{e}: {v} after the RSVPs", "{e} is {v}"),
        (
            "How many guests are coming to the wedding now?",
            "What's the current size of our wedding guest list?",
            "How many people will be at the wedding, as things stand?",
        ),
        ("forty guests", "sixty guests", "seventy-five guests", "ninety guests", "a hundred and twenty guests"),
        ("My brother's wedding had {v}.", "The venue's smaller room fits {v}."),
        ("When we planned for {v}, the budget looked fine.",),
        ("{E} lives in a shared spreadsheet.",),
    ),
    Subject4(
        "words",
        ("my piano practice", "my daily practice at the piano", "practising piano"),
        ("{E} takes {v} a day.", "I put {v} a day into {e}."),
        ("My teacher wants {v} at the keys every day now.", "I'm doing {v} of scales and pieces daily."),
        (
            "Now that {e} is {v} a day, should I get a digital piano with headphones for the evenings?",
            "Since {e} takes {v} a day now, how do I keep my wrists from aching?",
        ),
        ("{E} went from {o} to {v} a day before the exam.", "I'm at {v} a day with {e}, where it was {o}."),
        (
            "Not {o} at the keys any more; the teacher has me doing {v} a day.",
            "The keyboard gets {v} a day from me, no longer {o}.",
        ),
        ("My teacher sent a new plan covering {e}, it's attached.", "Here's the note from my teacher about {e}."),
        ("your daily piano practice is now {v}", "the plan asks for {v} at the piano each day"),
        ("{e}: {v} a day", "{e} up to {v} daily"),
        (
            "How long do I practise piano each day now?",
            "How much piano am I doing a day these days?",
            "What's my daily piano practice at the moment?",
        ),
        ("twenty minutes", "forty-five minutes", "one hour", "ninety minutes", "two and a half hours"),
        ("My daughter practises violin for {v} a day.", "The choir rehearsal lasts {v}."),
        ("When {e} was {v} a day, I never got past the easy pieces.",),
        ("{E} happens before breakfast.",),
    ),
    Subject4(
        "words",
        ("our coworking desks", "the desks we rent at the hub", "our coworking membership"),
        ("We rent {v} at the coworking hub.", "The coworking hub bills us for {v} a month."),
        ("The hub invoice is for {v} now.", "We've got {v} at the hub after the new hires."),
        (
            "Now that we rent {v} at the hub, is it cheaper to lease our own office?",
            "With {v} booked at the hub, should we get a meeting room pass too?",
        ),
        ("We went from {o} to {v} at the hub this month.", "The hub now bills us for {v} instead of {o}."),
        (
            "We're done paying for {o}; the hub has us on {v}.",
            "No longer {o} for us at the coworking place: {v} from the 1st.",
        ),
        ("The hub's new contract for {e} is attached.", "Here's this month's invoice for {e}, can you read it?"),
        ("you now rent {v} at the hub", "the contract covers {v} at the coworking hub"),
        ("{e}: {v} from the 1st", "{e} changed to {v}"),
        (
            "How many desks do we rent at the coworking hub now?",
            "How big is our coworking membership these days?",
            "What does the hub bill us for at the moment?",
        ),
        ("three desks", "five desks", "eight desks", "twelve desks", "fifteen desks"),
        ("The design agency next to us has {v}.", "Our Berlin partners rent {v}."),
        ("When we had {v} at the hub, everyone fit by the window.",),
        ("The hub includes free coffee with {e}.",),
    ),
    Subject4(
        "name",
        ("our issue tracker", "the ticketing tool", "the bug tracker we use"),
        ("{E} is {v}.", "We track all our tickets in {v}."),
        ("The team files every ticket in {v} now.", "We moved the backlog over to {v}."),
        (
            "Now that {e} is {v}, how should I import the old epics?",
            "Since we're on {v} for tickets these days, can I link it to Slack?",
        ),
        ("We swapped {e} from {o} to {v}.", "{E} is {v} now; before it was {o}."),
        ("We're not on {o} any more — {v} since Monday.", "No more {o} for tickets, the backlog lives in {v}."),
        ("Our CTO's announcement about {e} is attached.", "Here's the migration memo about {e}, can you read it?"),
        ("your issue tracker is now {v}", "the team tracks tickets in {v} from now on"),
        ("{e}: moved to {v}", "{e} is {v} as of Monday"),
        (
            "Which issue tracker does the team use now?",
            "Where do we track tickets these days?",
            "What tool holds our backlog at the moment?",
        ),
        ("Jira", "Linear", "GitHub Issues", "YouTrack", "Shortcut"),
        ("The design team tracks work in {v}.", "My previous company used {v}."),
        ("When we used {v}, nobody closed their tickets.",),
        ("{E} is linked to our GitHub repositories.",),
    ),
    Subject4(
        "name",
        ("our babysitter", "the kids' sitter", "the sitter on Wednesday evenings"),
        ("{E} is {v}.", "The kids stay with {v} when we go out."),
        ("The kids are looked after by {v} these days.", "We book {v} when we go out now."),
        (
            "Now that {e} is {v}, should I give her a house key?",
            "Since {v} looks after the kids now, how much should we pay per hour?",
        ),
        ("{E} is {v} now, after {o} moved away.", "We switched from {o} to {v} for the kids."),
        ("It's no longer {o} who watches the kids; {v} does.", "The kids don't go to {o} any more, {v} comes over."),
        ("The agency emailed about {e}, it's attached.", "Here's the agency's confirmation for {e}, can you read it?"),
        ("your babysitter is now {v}", "the agency has assigned {v} to look after the kids"),
        ("{e}: {v} from next week", "{e} is {v} now"),
        (
            "Who babysits our kids now?",
            "Who's our babysitter these days?",
            "Who looks after the kids when we go out, at the moment?",
        ),
        ("Hannah Brooks", "Lucia Ortega", "Grace Kim", "Olivia Novak", "Sofia Rossi"),
        ("Our neighbours' babysitter is {v}.", "My sister's nanny is {v}."),
        ("When {v} looked after the kids, they went to bed on time.",),
        ("{E} charges extra after midnight.",),
    ),
    Subject4(
        "name",
        ("my work laptop", "the laptop I work on", "my main machine"),
        ("{E} is a {v}.", "I do everything on a {v}."),
        ("IT handed me a {v} to work on.", "I'm on a {v} for work these days."),
        (
            "Now that {e} is a {v}, which USB-C dock should I buy?",
            "With a {v} as {e}, can I still run our Docker setup?",
        ),
        ("{E} went from a {o} to a {v}.", "I'm on a {v} now; before it was a {o}."),
        ("Not a {o} any more: IT gave me a {v}.", "I handed the {o} back, I work on a {v} now."),
        ("IT's hardware ticket about {e} is attached.", "Here's the delivery note for {e}, can you read it?"),
        ("your work laptop is now a {v}", "IT has issued you a {v}"),
        ("{e}: a {v} now", "swapped {e} for a {v}"),
        (
            "What laptop do I work on now?",
            "Which machine is my work laptop these days?",
            "What is my main computer at the moment?",
        ),
        ("ThinkPad X1 Carbon", "MacBook Air", "Dell XPS 13", "Framework 13", "MacBook Pro"),
        ("My colleague uses a {v}.", "The designer's machine is a {v}."),
        ("When I worked on a {v}, the fan was always loud.",),
        ("{E} has a German keyboard.",),
    ),
    Subject4(
        "time",
        ("the dinner reservation for Mum's birthday", "our table for Mum's birthday", "the birthday dinner booking"),
        ("{E} is at {v}.", "We've got a table for Mum's birthday at {v}."),
        ("The restaurant moved us to {v}.", "We're eating at {v} for Mum's birthday now."),
        (
            "Now that {e} is at {v}, when should we leave the house?",
            "Since we eat at {v} now, should I book a taxi back?",
        ),
        ("{E} moved from {o} to {v}.", "We sit down at {v} now rather than {o}."),
        (
            "The restaurant can't do {o} any more, so we're at {v}.",
            "Not {o} on Saturday after all: the restaurant can only seat us at {v}.",
        ),
        ("The restaurant's email about {e} is attached.", "Here's the confirmation text for {e}, can you read it?"),
        ("your table for Mum's birthday is now at {v}", "the restaurant has you down for {v}"),
        ("{e}: {v} now", "{e} moved to {v}"),
        (
            "What time is Mum's birthday dinner now?",
            "When is our table booked for Mum's birthday?",
            "What time did the birthday dinner booking end up at?",
        ),
        ("6:45 pm", "7:00 pm", "7:30 pm", "8:00 pm", "8:15 pm"),
        ("The cinema showing is at {v}.", "My sister lands at {v}."),
        ("When the booking was for {v}, we'd have had to rush from work.",),
        ("{E} is for six people.",),
    ),
    Subject4(
        "time",
        ("my passport appointment", "the passport office visit", "the appointment to renew my passport"),
        ("{E} is on {v}.", "I'm booked at the passport office on {v}."),
        ("The passport office rebooked me for {v}.", "I go to renew the passport on {v} now."),
        (
            "Now that {e} is on {v}, will the passport arrive before the trip?",
            "Since I'm going to the passport office on {v}, do I need new photos?",
        ),
        ("{E} got pushed from {o} to {v}.", "It's {v} for {e} now, instead of {o}."),
        ("The office cancelled {o}; I'm going in on {v}.", "Not {o} after all, the passport people have given me {v}."),
        ("The letter about {e} is attached.", "Here's the booking email for {e}, can you read it?"),
        ("your passport appointment is now on {v}", "the passport office has booked you for {v}"),
        ("{e}: {v}", "{e} rebooked for {v}"),
        (
            "When is my passport appointment now?",
            "What date do I go to the passport office?",
            "When am I renewing my passport, as of now?",
        ),
        ("March 4", "March 18", "April 9", "April 22", "May 6"),
        ("My partner's visa interview is on {v}.", "The car's inspection is due on {v}."),
        ("When the appointment was on {v}, I'd have missed the trip.",),
        ("{E} needs the old passport and two photos.",),
    ),
    Subject4(
        "time",
        ("the all-hands meeting", "our company all-hands", "the monthly all-hands"),
        ("{E} is on {v}.", "We hold {e} on {v}."),
        ("Leadership moved the all-hands to {v}.", "The all-hands takes place on {v} these days."),
        (
            "Now that {e} is on {v}, should I move my one-on-ones?",
            "With {e} on {v}, can I still make the school pickup that day?",
        ),
        ("{E} moved from {o} to {v}.", "{E} is on {v}; it used to be {o}."),
        (
            "Leadership dropped the {o} slot; the company meeting is {v} now.",
            "No more {o} for the whole-company meeting, it's {v}.",
        ),
        ("The CEO's calendar invite for {e} is attached.", "Here's the office manager's email about {e}."),
        ("the all-hands is now on {v}", "the invite puts the company meeting on {v}"),
        ("{e}: {v} from this month", "{e} moves to {v}"),
        (
            "When is the all-hands now?",
            "What day and time is the company all-hands these days?",
            "When does the whole company meet at the moment?",
        ),
        ("Monday at 4 pm", "Tuesday at 11 am", "Wednesday at 3 pm", "Thursday at 10 am", "Friday at 2 pm"),
        ("The board meeting is on {v}.", "The design review is on {v}."),
        ("When {e} was on {v}, half the team missed it.",),
        ("{E} is recorded for people in other time zones.",),
    ),
    Subject4(
        "frequency",
        ("watering the fiddle-leaf fig", "the fig's watering schedule", "the big plant in the living room"),
        ("I water the fiddle-leaf fig {v}.", "The fig gets water {v}."),
        ("The plant shop said to water the fig {v}, so I do.", "The fig only needs water {v} now."),
        (
            "Now that I water the fig {v}, should I add fertiliser too?",
            "If I'm watering the fig {v}, do I still need the drip tray?",
        ),
        ("I went from watering the fig {o} to {v}.", "The fig gets water {v} now instead of {o}."),
        (
            "No more watering {o}: the plant in the corner gets it {v}.",
            "The leafy one by the window doesn't get water {o} any more, it's {v}.",
        ),
        ("The plant shop's care card about {e} is attached.", "Here's a photo of the care label, it's about {e}."),
        ("you should now water the fig {v}", "the card says to water the fiddle-leaf fig {v}"),
        ("water the fig {v} from now on", "fig: water {v}"),
        (
            "How often do I water the fiddle-leaf fig now?",
            "How often does the fig get water these days?",
            "What's the fig's watering routine at the moment?",
        ),
        ("once a week", "twice a week", "every ten days", "every other week", "every five days"),
        ("The cactus gets water {v}.", "My neighbour waters her orchids {v}."),
        ("When I watered the fig {v}, the leaves kept dropping.",),
        ("The fig sits by the south window.",),
    ),
    Subject4(
        "frequency",
        ("our customer newsletter", "the email newsletter for customers", "the product newsletter"),
        ("{E} goes out {v}.", "We send {e} {v}."),
        ("Marketing sends the newsletter {v} now.", "Customers hear from us {v} by email these days."),
        (
            "Now that {e} goes out {v}, should we cut the number of sections?",
            "Since we send {e} {v} these days, how far ahead should I write it?",
        ),
        ("{E} went from {o} to {v}.", "We send {e} {v} now; it was {o}."),
        (
            "Customers won't get mail from us {o} any more; it's {v}.",
            "The email to customers isn't {o} now, marketing moved it to {v}.",
        ),
        ("Marketing's content calendar for {e} is attached.", "Here's the plan from marketing about {e}."),
        ("the customer newsletter now goes out {v}", "marketing will send the newsletter {v}"),
        ("{e}: {v} from now on", "{e} now goes out {v}"),
        (
            "How often does our customer newsletter go out now?",
            "How often do we email customers these days?",
            "What's the newsletter's schedule at the moment?",
        ),
        ("every week", "every other week", "once a month", "twice a month", "every quarter"),
        ("The investor update goes out {v}.", "Our blog gets a new post {v}."),
        ("When {e} went out {v}, the unsubscribe rate was high.",),
        ("{E} is written in Markdown.",),
    ),
    Subject4(
        "state",
        ("my diet", "what I eat", "the way I eat"),
        ("I'm {v} at the moment.", "{E} is {v}."),
        ("I've gone {v} for good.", "I eat {v} these days."),
        (
            "Now that I'm {v}, what should I order at the Thai place tonight?",
            "Since {e} is {v} now, can you suggest a lunch I can prep on Sundays?",
        ),
        ("I switched from {o} to {v}.", "I'm {v} now, I was {o} for years before."),
        ("I'm not {o} any more; I've been {v} since March.", "No more {o} meals for me, it's {v} from now on."),
        ("My nutritionist's plan is attached, it changes {e}.", "Here's the note from the nutritionist about {e}."),
        ("you're now eating {v}", "the nutritionist has you on a {v} diet"),
        ("{e}: {v} from now on", "{e} is {v} now"),
        (
            "What diet am I on now?",
            "How do I eat these days?",
            "What kind of food do I eat at the moment?",
        ),
        ("vegetarian", "vegan", "pescatarian", "gluten-free", "dairy-free"),
        ("My partner is {v}.", "The client we're taking to lunch is {v}."),
        ("When I was {v}, cooking for friends was easier.",),
        ("{E} includes a lot of lentils.",),
    ),
    Subject4(
        "state",
        ("the Acme contract", "our deal with Acme", "the Acme agreement"),
        ("{E} is {v}.", "Right now {e} is {v}."),
        ("Acme's lawyers say the deal is {v}.", "The Acme paperwork is {v} as of this week."),
        (
            "Now that {e} is {v}, should I tell the team to start on the integration?",
            "With {e} {v}, do I still need the Friday call with their buyer?",
        ),
        ("{E} went from {o} to {v}.", "{E} was {o}; now it's {v}."),
        ("The deal with them isn't {o} any more — it's {v}.", "Acme's paperwork is no longer {o}; it's {v}."),
        ("The latest email from Acme about {e} is attached.", "Here's the status note from legal on {e}."),
        ("the Acme contract is now {v}", "the status of the Acme deal is now {v}"),
        ("{e}: {v}", "{e} is {v} now"),
        (
            "What's the status of the Acme contract now?",
            "Where do things stand with the Acme agreement at the moment?",
            "What's the latest on our deal with Acme?",
        ),
        ("in negotiation", "under legal review", "on hold", "signed", "cancelled"),
        ("The Globex contract is {v}.", "Our deal with Initech is {v}."),
        ("When {e} was {v}, I couldn't plan the quarter.",),
        ("{E} covers three years of support.",),
    ),
)

ASKED_BACK = (
    "Good question. It depends on a few things; I'd weigh what it costs against the time it saves you.",
    "I'd check with the people it affects first, then decide; either way is reasonable.",
    "Worth a small trial: try it for a couple of weeks and see how it feels.",
)
READS = ("I've read it: {y}.", "According to the document, {y}.", "Here's the gist: {y}.")
CHECKS = ("Is that right?", "Does that match what you were told?", "Is that what you expected?")
CONFIRMS = ("Yes, that's right.", "Yes, that matches.", "Correct, thanks.", "Yep, that's it.")
NOTED = ("Great, noted.", "Thanks for confirming.", "Good, I'll keep that in mind.")
LIST_OPEN = (
    "Brain dump before the weekend, bear with me.",
    "My notes from this week, in no particular order.",
    "Catching up on my list; a few things and a question at the end.",
)
LIST_NOTES = (
    "- renew the domain before it lapses",
    "- book the boiler service",
    "- reply to the recruiter about Thursday",
    "- order printer paper",
    "- ask Sam about the conference talk",
    "- back up the photos from the trip",
    "- pay the water bill",
    "- try the new ramen place on Friday",
)
CODE = (
    (
        "Separately, this gives the wrong total, why?",
        "python",
        "def total(items):\n    for item in items:\n        s = 0\n        s += item.price\n    return s",
    ),
    (
        "Also, can you tidy this up?",
        "python",
        "with open(path) as f:\n    rows = f.readlines()\nrows.sort(key=len)\nprint(rows[0])",
    ),
    (
        "And why does this render nothing sometimes?",
        "javascript",
        "const res = await fetch(`/api/users/${id}`);\nif (res.ok) {\n  render(res.json());\n}",
    ),
)


def _block4(form: str, s: Subject4, e: str, value: str, prior: str, rng: random.Random) -> list:
    """Family 4: the update's turns, (role, text, is_gold) in order."""
    if form == "question":
        return [("user", _fill(rng.choice(s.question), e, value), True), ("assistant", rng.choice(ASKED_BACK), False)]
    if form in ("compared", "negation"):
        said = _fill(rng.choice(s.compared if form == "compared" else s.negation), e, value, prior)
        return [("user", said, True)]
    if form == "confirmed":  # the value is the assistant's reading of the attachment, which the user confirms
        said = rng.choice(READS).format(y=rng.choice(s.you).format(v=value))
        return [
            ("user", _fill(rng.choice(s.doc), e, ""), False),
            ("assistant", f"{said} {rng.choice(CHECKS)}", True),
            ("user", rng.choice(CONFIRMS), False),
            ("assistant", rng.choice(NOTED), False),
        ]
    # list: one line of a list in a message of several paragraphs with code
    lines = list(rng.sample(LIST_NOTES, 4))
    lines.insert(rng.randrange(len(lines) + 1), "- " + rng.choice(s.note).format(e=e, v=value))
    ask, lang, code = rng.choice(CODE)
    text = "\n".join(lines)
    return [("user", f"{rng.choice(LIST_OPEN)}\n\n{text}\n\n{ask}\n\n```{lang}\n{code}\n```", True)]


def write4(folder: Path, chats: int = 10, per_chat: int = 8, sessions: int = 10, seed: int = 0) -> Path:
    """Family 4: other new subjects, the updates in FORMS4 (in turn over the set's questions), a third updated twice,
    a third with the first value told again after the update."""

    def flags(n: int, k: int) -> tuple[str, bool, bool]:
        return FORMS4[n % len(FORMS4)], n % 3 == 2, n % 6 in (2, 3)

    return _write_chained(
        folder, random.Random(seed + 4), SUBJECTS4, _block4, flags, chats, per_chat, sessions, date(2025, 6, 2)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--family",
        type=int,
        choices=(1, 2, 3, 4),
        default=1,
        help="1: updates in other words; 2: harder forms (FORMS); 3: new subjects and forms (FORMS3); "
        "4: other new subjects and forms (FORMS4)",
    )
    args = parser.parse_args(argv)
    print({1: write, 2: write2, 3: write3, 4: write4}[args.family](args.out, args.chats, seed=args.seed))


if __name__ == "__main__":
    main()
