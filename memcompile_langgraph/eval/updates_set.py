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
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path


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


def _fill(template: str, entity: str, value: str) -> str:
    text = template.format(e=entity, E=entity[0].upper() + entity[1:], v=value, V=value)
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


def _chat3(
    rng: random.Random, subjects: list[Subject3], forms: list[str], chains: list[bool], sessions: int, start: date
) -> tuple:
    """Family 3's (chat.json batches, knowledge_update questions) for one chat."""
    plan: dict[int, list[tuple[list, int, str]]] = {b: [] for b in range(sessions)}  # batch -> (turns, subject, tag)
    facts = []
    for i, (s, form, chain) in enumerate(zip(subjects, forms, chains)):
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
        plan[later].append((_block3(form, s, names[-1], new_v, prior, rng), i, "new"))
        plan[rng.randrange(sessions)].append(([("user", rng.choice(s.near).format(v=near_v), False)], -1, ""))
        history = i % 2 == 1
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


def write3(folder: Path, chats: int = 10, per_chat: int = 8, sessions: int = 10, seed: int = 0) -> Path:
    """Family 3: new subjects, the updates in FORMS3 (in turn over the set's questions), a third updated twice."""
    rng = random.Random(seed + 3)
    n = 0
    for c in range(1, chats + 1):
        subjects = rng.sample(SUBJECTS3, min(per_chat, len(SUBJECTS3)))
        forms = [FORMS3[(n + k) % len(FORMS3)] for k in range(len(subjects))]
        chains = [(n + k) % 3 == 2 for k in range(len(subjects))]
        n += len(subjects)
        _save(
            folder / str(c), *_chat3(rng, subjects, forms, chains, sessions, date(2025, 1, 6) + timedelta(days=40 * c))
        )
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--family",
        type=int,
        choices=(1, 2, 3),
        default=1,
        help="1: updates in other words; 2: harder forms (FORMS); 3: new subjects and forms (FORMS3)",
    )
    args = parser.parse_args(argv)
    print({1: write, 2: write2, 3: write3}[args.family](args.out, args.chats, seed=args.seed))


if __name__ == "__main__":
    main()
