"""A generated set of current facts of any kind, in BEAM's native layout (eval/beam.py reads it): chats where the user
states a fact about their own life (where they live, who they work for, who they are seeing, what they plan, what
they prefer, and a few numbers) in one session and a new value of it in a later one. Most values are names, places,
plans and preferences, not numbers; a third of the updates carry no word that says anything changed ("I work at
Northwind." after "I work at Contoso."). Each update gets a knowledge_update question whose gold is the later
statement.

It was written once and frozen (its digest is pinned in tests/test_current_facts_set.py) before any rule was measured
on it: it measures the update rule on changes nobody tuned on. `python -m memcompile_langgraph.eval.current_facts_set
OUT` writes it; `memcompile eval beam OUT` scores it. Questions also carry `update_form` and `kind` (the loader
ignores them).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

# how an update is stated: with a word that says it changed and the old value beside the new one ("moved from X to
# Y"), as a plain statement in the first statement's own pattern with no change word, or in other words without one
FORMS = ("changed", "plain", "reworded")


@dataclass(frozen=True)
class Fact:
    kind: str  # place, employer, partner, plan, preference, number, ...
    first: tuple[str, ...]  # first statements: {v} the value
    changed: tuple[str, ...]  # updates saying it changed: {o} the old value, {v} the new
    plain: tuple[str, ...]  # updates with no change word, the first statements' pattern
    reworded: tuple[str, ...]  # updates with no change word, other words
    ask: tuple[str, ...]  # questions about the current value
    values: tuple[str, ...]
    nearby: tuple[str, ...]  # the same kind of value about someone or something else ({v}: a value not asked)


FACTS = (
    Fact(
        "place",
        ("I live in {v}.", "My flat is in {v}.", "Home for me is {v}."),
        ("I moved from {o} to {v}.", "We relocated to {v}, leaving {o} behind."),
        ("I live in {v}.", "My flat is in {v}."),
        ("These days I wake up in {v}.", "Our neighbours in {v} are lovely."),
        ("Where do I live?", "Which city is my home?"),
        ("Berlin", "Lisbon", "Toronto", "Melbourne", "Osaka"),
        ("My brother lives in {v}.",),
    ),
    Fact(
        "employer",
        ("I work at {v}.", "I'm an engineer at {v}.", "My employer is {v}."),
        ("I left {o} and joined {v}.", "I switched jobs from {o} to {v}."),
        ("I work at {v}.", "I'm an engineer at {v}."),
        ("My badge at {v} finally arrived.", "My manager at {v} wants a design doc by Friday."),
        ("Where do I work?", "Who is my employer?"),
        ("Contoso", "Northwind", "Globex", "Initech", "Umbrella Labs"),
        ("My wife works at {v}.",),
    ),
    Fact(
        "partner",
        ("I'm dating {v}.", "My partner is {v}.", "{v} and I have been together a while."),
        ("{o} and I broke up; I'm seeing {v} now.", "After splitting with {o}, I started dating {v}."),
        ("I'm dating {v}.", "My partner is {v}."),
        ("{v} cooked dinner for me and my parents last night.", "{v} is coming with me to the wedding as my date."),
        ("Who is my partner?", "Who am I dating?"),
        ("Sam", "Priya", "Jonas", "Elena", "Marcus"),
        ("My best friend is dating {v}.",),
    ),
    Fact(
        "plan",
        ("For the summer holiday we're going to {v}.", "Our vacation this year is {v}.", "We booked {v} for August."),
        ("We changed the holiday from {o} to {v}.", "We cancelled {o}; the summer trip is {v} instead."),
        ("For the summer holiday we're going to {v}.", "Our vacation this year is {v}."),
        ("I just bought a guidebook for {v} for our August trip.", "The kids are excited about {v} this summer."),
        ("Where are we going on our summer holiday?", "What is our vacation plan this year?"),
        ("Crete", "Iceland", "the Dolomites", "Kyoto", "Patagonia"),
        ("My parents are going to {v} in spring.",),
    ),
    Fact(
        "preference",
        ("My favourite coffee is {v}.", "I always order {v}.", "I drink {v} every morning."),
        ("I've gone off {o}; my go-to coffee is {v} now.", "I switched from {o} to {v}."),
        ("My favourite coffee is {v}.", "I always order {v}."),
        ("Nothing beats a {v} to start the day.", "The barista knows to make me a {v}."),
        ("What is my favourite coffee?", "What coffee do I order?"),
        ("flat white", "cortado", "oat latte", "cold brew", "espresso"),
        ("My colleague only drinks {v}.",),
    ),
    Fact(
        "tool",
        ("I write code in {v}.", "My editor is {v}.", "I use {v} for all my programming."),
        ("I dropped {o} and moved to {v}.", "After years of {o} I changed my editor to {v}."),
        ("I write code in {v}.", "My editor is {v}."),
        ("I spent the weekend tuning my {v} config.", "I know every {v} shortcut by heart."),
        ("Which editor do I use?", "What do I write code in?"),
        ("Vim", "VS Code", "Emacs", "Sublime Text", "PyCharm"),
        ("Our intern uses {v}.",),
    ),
    Fact(
        "pet",
        ("My dog is called {v}.", "Our dog's name is {v}.", "{v} is my dog."),
        ("We renamed the dog from {o} to {v}.", "The dog answers to {v} now instead of {o}."),
        ("My dog is called {v}.", "Our dog's name is {v}."),
        ("{v} chewed my slippers again, that dog.", "Took the dog, {v}, to the vet today."),
        ("What is my dog's name?", "What do we call our dog?"),
        ("Biscuit", "Luna", "Rex", "Pepper", "Otis"),
        ("The neighbour's dog is called {v}.",),
    ),
    Fact(
        "diet",
        ("I'm {v}.", "I eat {v}.", "My diet is {v}."),
        ("I stopped being {o} and I'm {v} now.", "I changed my diet from {o} to {v}."),
        ("I'm {v}.", "My diet is {v}."),
        ("Cooking {v} meals for the week takes me all Sunday.", "Finding {v} options at restaurants is easy here."),
        ("What is my diet?", "What do I eat?"),
        ("vegetarian", "vegan", "pescatarian", "gluten-free", "keto"),
        ("My roommate is {v}.",),
    ),
    Fact(
        "school",
        ("My son goes to {v}.", "Leo attends {v}.", "Leo's school is {v}."),
        ("Leo changed schools from {o} to {v}.", "We took Leo out of {o}; he's at {v} now."),
        ("My son goes to {v}.", "Leo attends {v}."),
        ("Leo's teacher at {v} sent a note home.", "Parents' evening at {v} is on Thursday."),
        ("Which school does my son go to?", "Where does Leo go to school?"),
        ("Hillside Primary", "Brookfield School", "St. Mary's", "Greenwood Academy", "Lakeview Elementary"),
        ("My niece goes to {v}.",),
    ),
    Fact(
        "doctor",
        ("My doctor is {v}.", "I see {v} for check-ups.", "My GP is {v}."),
        ("I changed doctors from {o} to {v}.", "{o} retired, so my GP is {v} now."),
        ("My doctor is {v}.", "My GP is {v}."),
        ("{v} ordered blood tests for me.", "I have an appointment with {v} on Monday."),
        ("Who is my doctor?", "Who is my GP?"),
        ("Dr. Okafor", "Dr. Lindqvist", "Dr. Reyes", "Dr. Chen", "Dr. Novak"),
        ("My mother's doctor is {v}.",),
    ),
    Fact(
        "car",
        ("I drive a {v}.", "My car is a {v}.", "I get around in a {v}."),
        ("I sold the {o} and bought a {v}.", "I traded my {o} for a {v}."),
        ("I drive a {v}.", "My car is a {v}."),
        ("The {v} handles the mountain roads well.", "Parking the {v} downtown is a pain."),
        ("What car do I drive?", "What is my car?"),
        ("Volvo XC40", "Ford Focus", "Kia Niro", "VW Golf", "Nissan Leaf"),
        ("My uncle drives a {v}.",),
    ),
    Fact(
        "sport",
        ("I play {v} on weekends.", "My sport is {v}.", "I do {v} to stay fit."),
        ("I gave up {o} and took up {v}.", "I quit {o}; {v} is my sport now."),
        ("I play {v} on weekends.", "My sport is {v}."),
        ("My {v} club has a tournament next month.", "I bought new gear for {v}."),
        ("What sport do I play?", "What do I do to stay fit?"),
        ("tennis", "squash", "badminton", "climbing", "rowing"),
        ("My sister plays {v}.",),
    ),
    Fact(
        "language",
        ("I'm learning {v}.", "The language I study is {v}.", "I take {v} lessons."),
        ("I stopped learning {o} and started {v}.", "I switched my lessons from {o} to {v}."),
        ("I'm learning {v}.", "I take {v} lessons."),
        ("My {v} tutor says my accent is improving.", "I practise {v} vocabulary on the train."),
        ("Which language am I learning?", "What language do I study?"),
        ("Spanish", "Japanese", "Portuguese", "Korean", "Italian"),
        ("My father is learning {v}.",),
    ),
    Fact(
        "bank",
        ("I bank with {v}.", "My bank is {v}.", "My salary goes to {v}."),
        ("I moved my account from {o} to {v}.", "I closed my {o} account and opened one at {v}."),
        ("I bank with {v}.", "My bank is {v}."),
        ("The {v} app keeps logging me out.", "I set up a standing order at {v}."),
        ("Which bank do I use?", "Who do I bank with?"),
        ("Monzo", "Barclays", "ING", "Revolut", "HSBC"),
        ("My partner banks with {v}.",),
    ),
    Fact(
        "role",
        ("My job title is {v}.", "I work as a {v}.", "I'm a {v}."),
        ("I got promoted from {o} to {v}.", "My title changed from {o} to {v}."),
        ("My job title is {v}.", "I work as a {v}."),
        ("As a {v} I spend most of the day in meetings.", "My business cards say {v}."),
        ("What is my job title?", "What do I work as?"),
        ("data analyst", "product manager", "staff engineer", "team lead", "designer"),
        ("My cousin is a {v}.",),
    ),
    Fact(
        "number",
        ("I have {v} cats.", "There are {v} cats in our house.", "We keep {v} cats."),
        ("We went from {o} to {v} cats.", "We adopted another, so it's {v} cats now instead of {o}."),
        ("I have {v} cats.", "We keep {v} cats."),
        ("Feeding all {v} cats takes a whole bag a week.", "All {v} of our cats slept on the bed last night."),
        ("How many cats do I have?", "How many cats live with us?"),
        ("2", "3", "4", "5", "6"),
        ("My aunt has {v} cats.",),
    ),
    Fact(
        "number",
        ("My commute is {v} minutes.", "Getting to work takes me {v} minutes.", "I spend {v} minutes commuting."),
        ("My commute went from {o} to {v} minutes.", "Getting to work now takes {v} minutes instead of {o}."),
        ("My commute is {v} minutes.", "Getting to work takes me {v} minutes."),
        ("I listen to a podcast on the {v}-minute ride in.", "With {v} minutes each way I read a lot on the train."),
        ("How long is my commute?", "How many minutes does getting to work take me?"),
        ("20", "35", "45", "50", "70"),
        ("My flatmate's commute is {v} minutes.",),
    ),
    Fact(
        "number",
        ("My rent is {v} euros a month.", "I pay {v} euros rent.", "The flat costs me {v} euros a month."),
        ("My rent went up from {o} to {v} euros.", "The landlord changed the rent to {v} euros from {o}."),
        ("My rent is {v} euros a month.", "I pay {v} euros rent."),
        ("Paying {v} euros for this place hurts.", "With {v} euros going on the flat, I budget tightly."),
        ("How much is my rent?", "What do I pay for the flat each month?"),
        ("900", "1100", "1250", "1400", "1600"),
        ("My friend pays {v} euros rent.",),
    ),
)

FILLER_USER = (
    "Can you suggest a good book on negotiation?",
    "How do I remove a stripped screw?",
    "What's the difference between baking soda and baking powder?",
    "Could you explain how compound interest works?",
    "How do I keep basil alive indoors?",
    "What's a polite way to ask a colleague to stop interrupting?",
    "Can you give me a 20-minute bodyweight workout?",
    "How should I store fresh ginger?",
    "What are good questions to ask at the end of an interview?",
    "How do I back up my phone photos?",
    "Any tips for falling asleep faster?",
    "How long should I boil an egg for a soft yolk?",
)
FILLER_ASSISTANT = (
    "A classic is 'Getting to Yes' by Fisher and Ury; it is short and built around practical principles.",
    "Press a wide rubber band between the screwdriver and the screw head for grip, then turn slowly with firm "
    "pressure.",
    "Baking soda needs an acid in the recipe to rise; baking powder already contains the acid it needs.",
    "Interest is added to the balance, and later interest is earned on that larger balance, so growth speeds up.",
    "Give it a sunny windowsill, water when the top of the soil is dry and pinch off flower buds.",
    "Catch them privately, describe what happened without blame and ask if you can finish your points first.",
    "Three rounds of squats, push-ups, lunges, plank and burpees, forty seconds each with twenty seconds rest.",
    "Unpeeled in a sealed bag in the fridge for a few weeks, or peeled and frozen for months.",
    "Ask what success looks like in the first months, how the team works together and what the next steps are.",
    "Turn on your phone's cloud backup and also copy the photos to a computer or an external drive now and then.",
    "Keep a regular wake-up time, avoid screens for the last hour and keep the bedroom cool and dark.",
    "About six and a half minutes in boiling water, then straight into cold water.",
)


def _fill(template: str, value: str, old: str = "") -> str:
    text = template.format(v=value, o=old)
    return text[0].upper() + text[1:]


def _chat(rng: random.Random, facts: list[tuple[int, Fact]], forms: list[str], start: date, sessions: int):
    """(chat.json batches, knowledge_update questions) for one chat."""
    plan: dict[int, list[tuple[str, int]]] = {b: [] for b in range(sessions)}  # batch -> (text, fact position)
    meta = []
    for i, ((_, f), form) in enumerate(zip(facts, forms)):
        first = rng.randrange(0, sessions - 2)
        later = rng.randrange(first + 1, sessions)
        old_v, new_v, other_v = rng.sample(f.values, 3)
        plan[first].append((_fill(rng.choice(f.first), old_v), i))
        update = {"changed": f.changed, "plain": f.plain, "reworded": f.reworded}[form]
        plan[later].append((_fill(rng.choice(update), new_v, old_v), i))
        plan[rng.randrange(sessions)].append((_fill(rng.choice(f.nearby), other_v), -1))
        meta.append((i, f, form, new_v))
    batches: list[dict] = []
    ids: dict[int, list[int]] = {}
    msg = 0
    for b in range(sessions):
        items = list(plan[b]) + [(rng.choice(FILLER_USER), -1) for _ in range(5)]
        rng.shuffle(items)
        turns = []
        for text, fact in items:
            if fact >= 0:
                ids.setdefault(fact, []).append(msg)
            reply = rng.choice(FILLER_ASSISTANT) if fact < 0 else "Thanks for telling me, I'll keep that in mind."
            turns.append(
                [{"role": "user", "id": msg, "content": text}, {"role": "assistant", "id": msg + 1, "content": reply}]
            )
            msg += 2
        anchor = (start + timedelta(days=11 * b)).strftime("%B-%d-%Y")
        batches.append({"batch_number": b + 1, "time_anchor": anchor, "turns": turns})
    questions = []
    for i, f, form, new_v in meta:
        old_id, new_id = ids[i]
        questions.append(
            {
                "question": rng.choice(f.ask),
                "answer": new_v,
                "source_chat_ids": {"original_info": [old_id], "updated_info": [new_id]},
                "update_form": form,
                "kind": f.kind,
            }
        )
    return batches, questions


def write(folder: Path, chats: int = 10, per_chat: int = 8, sessions: int = 10, seed: int = 0) -> Path:
    """Writes `chats` chat folders under `folder`, `per_chat` updated facts each, the forms in turn over the set."""
    rng = random.Random(seed + 5)
    n = 0
    for c in range(1, chats + 1):
        facts = rng.sample(list(enumerate(FACTS)), min(per_chat, len(FACTS)))
        forms = [FORMS[(n + k) % len(FORMS)] for k in range(len(facts))]
        n += len(facts)
        batches, questions = _chat(rng, facts, forms, date(2024, 1, 8) + timedelta(days=120 * c), sessions)
        out = folder / str(c)
        out.mkdir(parents=True, exist_ok=True)
        (out / "chat.json").write_text(json.dumps(batches, indent=1))
        (out / "probing_questions.json").write_text(json.dumps({"knowledge_update": questions}, indent=1))
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(write(args.out, args.chats, seed=args.seed))


if __name__ == "__main__":
    main()
