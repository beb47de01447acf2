"""A small multi-session conversation written for this project's offline demo."""

from __future__ import annotations

SESSIONS = [
    (
        "9:15 am on 4 March, 2024",
        [
            ("Priya", "Morning Tom! How was your weekend?"),
            (
                "Tom",
                "Hi Priya! Pretty busy. I finally adopted a dog from the shelter on Saturday, a beagle named Biscuit.",
            ),
            (
                "Priya",
                "That's wonderful! I've been training for the Lisbon half marathon in June, so my weekends are all long runs now.",
            ),
            ("Tom", "Impressive. What got you into running?"),
            ("Priya", "My sister Anika ran her first marathon two years ago and I promised her I'd join the next one."),
            ("Tom", "Biscuit will need long walks too, maybe I should start jogging with him."),
        ],
    ),
    (
        "6:40 pm on 22 March, 2024",
        [
            ("Tom", "Hey Priya, guess what: I started a pottery class at the community center last Tuesday."),
            ("Priya", "No way! What have you made so far?"),
            ("Tom", "Just a lopsided mug, but the teacher says my glazing is good."),
            (
                "Priya",
                "Ha, nice. My knee has been hurting since the 15 km run last week, so I'm seeing a physiotherapist.",
            ),
            ("Tom", "Sorry to hear that. Are you still going to Lisbon?"),
            ("Priya", "Yes, the physio thinks I'll be fine if I rest for two weeks."),
        ],
    ),
    (
        "11:05 am on 3 May, 2024",
        [
            ("Priya", "Tom! I got a new job at a climate data startup called Northwind, I start next month."),
            ("Tom", "Congratulations! That's exactly what you wanted after leaving the bank."),
            ("Priya", "Thanks! How is Biscuit doing?"),
            ("Tom", "He chewed my pottery mug yesterday, so now I have a reason to make a better one."),
            ("Priya", "Classic beagle. Anika is flying in for the Lisbon race, we booked an apartment near the river."),
        ],
    ),
]

QUESTIONS = [
    "What kind of dog did Tom adopt and what is its name?",
    "When did Tom start the pottery class?",
    "Why is Priya seeing a physiotherapist?",
    "Which startup did Priya get a new job at?",
    "Who is flying in for the Lisbon race?",
]


def demo_turns() -> list[dict[str, object]]:
    turns = []
    for n, (time, lines) in enumerate(SESSIONS, 1):
        for speaker, text in lines:
            turns.append({"speaker": speaker, "text": text, "time": time, "session": n})
    return turns
