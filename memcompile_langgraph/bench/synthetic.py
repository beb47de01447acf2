"""A deterministic synthetic multi-session history for benchmarks: offline, seeded, LoCoMo-shaped.

One memory owner talks with a cast of friends (a few close ones most often) over many dated sessions of
15-35 turns. Turns mix chit-chat with factual sentences about hobbies, trips, work, pets, family and
purchases, drawn from a long-tailed vocabulary (adjective x noun phrases give thousands of distinct
keywords); about one turn in five shares a photo, as in LoCoMo (~28 tokens a turn on average there).
Questions are asked about facts that were actually said, so every query has matching memory.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import accumulate

NAMES = """Ava Ben Chloe Daniel Elena Felix Grace Hugo Isla Jonas Kira Liam Maya Noah Olivia Pavel Quinn Rosa
Samir Tara Umar Vera Wes Xenia Yusuf Zoe Aiden Bianca Caleb Dalia Emil Farah Gideon Hana Ivan Jade Kenji Lena
Marco Nadia Oscar Priya Rafael Sofia Theo Uma Victor Wren""".split()
RELATIVES = "sister brother mom dad cousin aunt uncle grandma grandpa niece nephew son daughter partner".split()
PETS = "dog puppy cat kitten rabbit parrot hamster turtle".split()
PET_NAMES = "Biscuit Luna Pepper Milo Olive Ziggy Mango Nala Oreo Pumpkin Rocket Toffee Willow Bean Clover".split()
ADJECTIVES = """old new tiny huge vintage handmade wooden ceramic bright quiet cozy rusty shiny secondhand
antique colorful heavy fragile waterproof electric portable homemade local famous hidden crowded rainy sunny
snowy spicy sweet bitter fresh frozen green blue red golden silver purple striped leather woolen cotton glass
stone marble digital classic modern rustic tropical alpine coastal urban rural massive miniature""".split()
NOUNS = """bike guitar camera telescope kayak tent notebook sketchbook painting sculpture vase mug bowl lamp
chair table bookshelf rug quilt scarf jacket boots sneakers backpack suitcase watch necklace bracelet ring
violin piano ukulele drum keyboard laptop tablet phone headphones speaker record poster map globe puzzle
chessboard kite surfboard skateboard snowboard helmet paddle hammock grill oven blender kettle
teapot cookbook recipe garden greenhouse orchid cactus bonsai sunflower tulip tomato pepper basil herb
candle soap perfume mirror clock frame album diary novel comic biography magazine ticket trophy medal
sweater blanket pillow curtain sofa desk printer drone robot microscope aquarium birdhouse treehouse canoe
scooter van cabin boat sailboat truck tractor costume mask banner mural tattoo""".split()
HOBBIES = """hiking painting pottery running swimming climbing cycling baking gardening knitting photography
birdwatching surfing skiing fishing camping yoga dancing singing drumming woodworking sewing journaling
sketching kayaking sailing skating boxing fencing archery chess volunteering tutoring coding podcasting
blogging calligraphy origami beekeeping foraging stargazing snorkeling""".split()
PLACES = """museum|library|market|bakery|cafe|park|beach|lake|forest|trail|gym|studio|gallery|theater|stadium|
zoo|aquarium|farm|vineyard|harbor|island|campsite|bookstore|flea market|thrift store|community center|
concert hall|art school|climbing gym|animal shelter|botanical garden|night market|ski resort|hot spring|
music festival|food festival|craft fair|science fair""".replace("\n", "").split("|")
CITIES = """Lisbon|Porto|Madrid|
Seville|Paris|Lyon|Berlin|Munich|Vienna|Prague|Krakow|Budapest|Rome|Naples|Florence|Athens|Istanbul|Cairo|
Marrakesh|Nairobi|Lagos|Cape Town|Dubai|Mumbai|Delhi|Kathmandu|Bangkok|Hanoi|Seoul|Tokyo|Osaka|Kyoto|Taipei|
Manila|Bali|Sydney|Melbourne|Auckland|Vancouver|Toronto|Montreal|Boston|Chicago|Denver|Austin|Seattle|Portland|
Miami|Havana|Mexico City|Lima|Bogota|Santiago|Quito|Reykjavik|Oslo|Stockholm|Helsinki|Dublin|Edinburgh""".replace(
    "\n", ""
).split("|")
JOBS = """nurse teacher architect chef paramedic librarian accountant carpenter electrician photographer
designer engineer veterinarian pharmacist translator journalist lawyer barista baker gardener mechanic
pilot firefighter therapist researcher data analyst social worker florist tailor musician""".split()
COMPANY_A = "North Blue Bright Silver Green Red Iron Stone Cloud River Sun Oak Maple Harbor Pine".split()
COMPANY_B = "wind peak field works labs forge path bridge line craft point gate".split()
FEELINGS = (
    "amazing exhausting relaxing inspiring stressful fun peaceful chaotic rewarding tough wonderful scary".split()
)
PAST_VERBS = "bought found fixed built painted sold borrowed ordered made repaired won lost".split()
MONTHS = "January February March April May June July August September October November December".split()
WHEN = [
    "yesterday",
    "last week",
    "last weekend",
    "on Saturday",
    "on Sunday",
    "last month",
    "two days ago",
    "this morning",
    "last Friday",
    "a few weeks ago",
    "over the holidays",
    "last night",
]
FILLER = [
    "That's so {feel}!",
    "Wow, {name}, that sounds {feel}.",
    "Haha, totally.",
    "Thanks, {name}!",
    "Good luck with that!",
    "I'm so happy for you!",
    "Oh no, I hope it gets better.",
    "Same here, honestly.",
    "That's awesome, tell me more!",
    "Really? No way!",
    "Take care and talk soon!",
    "Sounds like a plan.",
]
QUESTIONS = [
    "How was your week, {name}?",
    "What have you been up to lately?",
    "Did you ever finish that {noun}?",
    "Are you still into {hobby}?",
    "How is your {rel} doing?",
    "Any plans for {month}?",
]


@dataclass
class Fact:
    """What one factual sentence said, so a question can be asked about it."""

    kind: str
    speaker: str
    slots: dict[str, str]
    turn: int = 0  # position of the turn that said it


@dataclass
class History:
    turns: list[dict] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)


def _zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1.0 / (i + 1) ** s for i in range(n)]


class _Speaker:
    """Sentence generator; every sentence kind returns (text, Fact | None)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.noun_w = list(accumulate(_zipf_weights(len(NOUNS), 0.9)))

    def pick(self, seq):
        return self.rng.choice(seq)

    def thing(self) -> str:
        return f"{self.pick(ADJECTIVES)} {self.rng.choices(NOUNS, cum_weights=self.noun_w)[0]}"

    def sentence(self, speaker: str, other: str) -> tuple[str, Fact | None]:
        r, p = self.rng.random(), self.pick
        if r < 0.16:
            s = {"verb": p(PAST_VERBS), "thing": self.thing(), "place": p(PLACES), "when": p(WHEN)}
            return f"I {s['verb']} a {s['thing']} at the {s['place']} {s['when']}.", Fact("purchase", speaker, s)
        if r < 0.30:
            s = {"hobby": p(HOBBIES), "with": p(NAMES), "feel": p(FEELINGS)}
            return (
                f"I've been doing a lot of {s['hobby']} lately, mostly with {s['with']}, and honestly it has been {s['feel']}.",
                Fact("hobby", speaker, s),
            )
        if r < 0.42:
            s = {"city": p(CITIES), "with": p(NAMES), "month": p(MONTHS)}
            return (
                f"{s['with']} and I are planning a trip to {s['city']} in {s['month']}, we want to see the {p(PLACES)}.",
                Fact("trip", speaker, s),
            )
        if r < 0.52:
            s = {"rel": p(RELATIVES), "verb": p(PAST_VERBS), "thing": self.thing(), "city": p(CITIES)}
            return f"My {s['rel']} just {s['verb']} a {s['thing']} back in {s['city']}.", Fact("relative", speaker, s)
        if r < 0.60:
            s = {"pet": p(PETS), "pet_name": p(PET_NAMES), "thing": self.thing()}
            return f"My {s['pet']} {s['pet_name']} keeps chewing the {s['thing']} I got for the living room.", Fact(
                "pet", speaker, s
            )
        if r < 0.68:
            s = {"job": p(JOBS), "company": p(COMPANY_A) + p(COMPANY_B), "feel": p(FEELINGS)}
            return f"I started working as a {s['job']} at {s['company']}, and the first weeks were {s['feel']}.", Fact(
                "job", speaker, s
            )
        if r < 0.76:
            s = {"place": p(PLACES), "city": p(CITIES), "when": p(WHEN), "feel": p(FEELINGS)}
            return f"We went to the {s['place']} in {s['city']} {s['when']} and it was {s['feel']}.", Fact(
                "visit", speaker, s
            )
        if r < 0.86:
            q = p(QUESTIONS)
            return q.format(name=other, noun=self.thing(), hobby=p(HOBBIES), rel=p(RELATIVES), month=p(MONTHS)), None
        return p(FILLER).format(feel=p(FEELINGS), name=other), None

    def turn(self, speaker: str, other: str) -> tuple[str, list[Fact]]:
        n = self.rng.choices((1, 2, 3), (0.3, 0.45, 0.25))[0]
        parts, facts = [], []
        for _ in range(n):
            text, fact = self.sentence(speaker, other)
            parts.append(text)
            if fact:
                facts.append(fact)
        return " ".join(parts), facts


def generate(n_turns: int, seed: int = 7) -> History:
    """n_turns turns in LoCoMo's turn format (speaker, text, time, session, dia_id, optional image caption)."""
    rng = random.Random(seed)
    gen = _Speaker(rng)
    owner, cast = NAMES[0], NAMES[1:]
    friend_w = list(accumulate(_zipf_weights(len(cast), 1.2)))
    day = datetime(2021, 1, 4, 9, 0)
    out = History()
    session = 0
    while len(out.turns) < n_turns:
        session += 1
        day += timedelta(days=rng.randint(0, 3), minutes=rng.randint(0, 600))
        stamp = f"{day.strftime('%I:%M %p').lstrip('0').lower()} on {day.day} {day.strftime('%B')}, {day.year}"
        friend = rng.choices(cast, cum_weights=friend_w)[0]
        pair = [owner, friend] if rng.random() < 0.5 else [friend, owner]
        for i in range(min(rng.randint(15, 35), n_turns - len(out.turns))):
            speaker, other = pair[i % 2], pair[(i + 1) % 2]
            text, facts = gen.turn(speaker, other)
            turn = {
                "speaker": speaker,
                "text": text,
                "time": stamp,
                "session": session,
                "dia_id": f"D{session}:{i + 1}",
            }
            if rng.random() < 0.2:
                thing = gen.thing()
                turn["image_caption"] = f"a photo of a {thing} on a table"
                turn["image_query"] = thing
            for fact in facts:
                fact.turn = len(out.turns)
            out.turns.append(turn)
            out.facts += facts
    return out


ASK = {
    "purchase": "What did {speaker} buy or find at the {place}?",
    "hobby": "Who does {speaker} do {hobby} with?",
    "trip": "When are {speaker} and {with} going to {city}?",
    "relative": "What did {speaker}'s {rel} get in {city}?",
    "pet": "What is the name of {speaker}'s {pet}?",
    "job": "Where does {speaker} work as a {job}?",
    "visit": "When did {speaker} go to the {place} in {city}?",
}


def questions(history: History, n: int, seed: int = 11, upto: int | None = None) -> list[str]:
    """n questions about facts said in the first `upto` turns (default all), spread over that span."""
    facts = [f for f in history.facts if upto is None or f.turn < upto]
    if not facts:
        return []
    rng = random.Random(seed)
    picked = [facts[rng.randrange(len(facts))] for _ in range(n)]
    return [ASK[f.kind].format(speaker=f.speaker, **f.slots) for f in picked]
