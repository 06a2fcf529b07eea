"""Plain chats: a user's everyday facts told once, then changed in passing or only restated.

A chat product calls ``remember()`` on every turn and does nothing else: no correction call,
no judge. ``plain_chat`` writes that case, one session per (slot, kind), for twelve everyday
facts of a user's life (where they live, who employs them, their pet, diet, car, sport, drink,
instrument, the language they learn, their commute, partner and phone):

- ``"update"`` sessions: the fact, small talk over weeks, then the new value told as an event
  and in other words ("the movers dropped the furniture at the new apartment in Denver"), no
  "actually"; later a turn names the old value in another sense ("a documentary about the
  history of Lisbon") and a fresh small-talk turn shares a word with the question; the probe
  asks for the current value: relevant the update, stale the old statement.
- ``"control"`` sessions: the same, but the later turn restates the same value in other words;
  relevant the fact and its restatement, never the other-sense mention or the small talk.

Each probe's ``meta`` names its ``slot``, its ``split`` and the labels of the ``old`` statement,
the ``update`` or ``restatement``, the ``namesake`` (the other-sense mention) and the ``echo``
(the small talk sharing the question's word). The first six slots are the ``"dev"`` split, the
last six the ``"held"`` one: tune on the first, report the second (``benchmarks/bench_plain_chat.py``).
"""

from __future__ import annotations

from typing import Any

from .timeline import ScenarioTimeline, chit_chat, reply

SPLITS = {"dev": range(0, 6), "held": range(6, 12)}

SLOTS: list[dict[str, Any]] = [

    {"slot": "home",
     "values": ["Lisbon", "Denver", "Osaka", "Glasgow", "Montreal", "Valencia", "Adelaide", "Krakow"],
     "state": ["I live in {v}.", "My flat is in {v}, close to the river.",
               "I've been living in {v} for about three years.", "Home for me is {v} these days."],
     "update": ["Finally signed the lease on a two-bedroom place in {v}, boxes everywhere.",
                "The movers dropped the last of our furniture at the new apartment in {v} yesterday.",
                "First week waking up in {v}, the neighbours here are really friendly.",
                "Got the keys to my house in {v} on Friday and slept on a mattress on the floor."],
     "restate": ["Still loving life here in {v}, the markets on Saturday are great.",
                 "Walking around {v} after work is the best part of living here.",
                 "Living in {v} means I can cycle almost everywhere."],
     "namesake": ["My colleague just got back from a conference in {v} and loved the food.",
                  "I watched a documentary about the history of {v} last night.",
                  "There's a new café downtown named after {v}, funny coincidence."],
     "ask": ["Where does the user live now?", "Which city am I living in?", "What city is my home these days?"],
     "echo": ["The band played live for three hours, amazing night.", "I could live on pizza alone honestly.",
              "Which city has the best museums in Europe?"]},
    {"slot": "employer",
     "values": ["Siemens", "a small design studio", "the city hospital", "Shopify", "a law firm", "Spotify",
                "the public library", "a bakery chain"],
     "state": ["I work at {v}.", "My job is at {v}, I've been there four years.", "I'm employed by {v} as an analyst.",
               "Work-wise, I'm at {v}."],
     "update": ["Today was my first day at {v}, the onboarding took forever.",
                "Handed in my badge at the old office and started with {v} this Monday.",
                "The team at {v} threw me a welcome lunch on my first day.",
                "Signed the contract with {v}, starting next week on the product team."],
     "restate": ["Another busy week at {v}, the quarterly review is coming up.",
                 "My manager at {v} approved my holiday request.",
                 "Lunch at {v}'s canteen was surprisingly good today."],
     "namesake": ["I read an article about {v} in the newspaper this morning.",
                  "My cousin applied to {v} but didn't hear back.",
                  "There was an ad for {v} on the bus today."],
     "ask": ["Where does the user work now?", "Who is my employer?", "Which company do I work for?"],
     "echo": ["That job of cleaning the gutters took all afternoon.", "Good work on the summary earlier.",
              "Who invented the company car idea anyway?"]},
    {"slot": "pet",
     "values": ["a beagle called Biscuit", "a grey cat named Miso", "two budgies", "a rescue greyhound called Luna",
                "a tortoise named Sheldon", "a golden retriever called Maple", "a rabbit named Clover",
                "a black cat called Pepper"],
     "state": ["I have {v}.", "My pet is {v}.", "At home it's just me and {v}."],
     "update": ["We picked up {v} from the shelter on Saturday and the house is chaos.",
                "Brought home {v} this weekend, still figuring out the feeding schedule.",
                "The vet said {v} is healthy, first check-up since we adopted."],
     "restate": ["Took {v} to the park again, best part of my day.",
                 "{V} fell asleep on my feet while I was working.",
                 "Bought a new bed for {v}, it was totally ignored."],
     "namesake": ["My neighbour's kid drew a picture of {v} from a cartoon.",
                  "Saw a poster about {v} for adoption at the supermarket, not mine though.",
                  "The children's book we read had {v} in it."],
     "ask": ["What pet does the user have?", "What animal do I have at home?", "Which pet do I own now?"],
     "echo": ["Do you have a pet peeve about email etiquette?", "What animal is on the Welsh flag?",
              "I have a meeting at three."]},
    {"slot": "diet",
     "values": ["vegetarian", "vegan", "pescatarian", "gluten-free", "keto", "dairy-free", "halal",
                "low-sodium"],
     "state": ["I'm {v}.", "I follow a {v} diet.", "I've eaten {v} for years now.", "Just so you know, I eat {v}."],
     "update": ["My doctor put me on a {v} plan last month and I'm sticking to it.",
                "Three weeks into eating {v} and honestly I feel great.",
                "Cleared out the fridge to go {v}, the shopping list looks very different."],
     "restate": ["Found a great {v} recipe for lentil curry.",
                 "Eating {v} at the office party was easy this time.",
                 "The new place near work has lots of {v} options."],
     "namesake": ["My sister wrote an article about {v} trends for a magazine.",
                  "There was a {v} stand at the fair, I didn't stop though.",
                  "A podcast guest argued against {v} diets for athletes."],
     "ask": ["What diet does the user follow?", "What do I eat, diet-wise?", "Are there foods I avoid?"],
     "echo": ["The diet coke machine at work is broken again.", "I follow a lot of chess streamers.",
              "What should I eat before a long run?"]},
    {"slot": "car",
     "values": ["a Toyota Corolla", "a red Mini", "a Tesla Model 3", "an old Volvo estate", "a Ford pickup",
                "a Honda Civic", "a VW Golf", "a Kia Niro"],
     "state": ["I drive {v}.", "My car is {v}.", "I get around in {v}."],
     "update": ["Traded in my old car and drove {v} off the lot yesterday.",
                "Picked up {v} from the dealer, it still has that new car smell.",
                "Spent the weekend setting up the phone mount in {v} I just bought."],
     "restate": ["Washed {v} this morning, it needed it.",
                 "{V} passed its inspection without problems.",
                 "Filled up {v} on the way home."],
     "namesake": ["A commercial for {v} came on during the match.",
                  "My uncle keeps talking about {v} he had in the eighties.",
                  "Saw {v} in a film chase scene last night."],
     "ask": ["What car does the user drive?", "Which car do I have?", "What vehicle do I own now?"],
     "echo": ["I drive myself crazy with these spreadsheets.", "Which car park is closest to the station?",
              "Is it safe to drive in fog?"]},
    {"slot": "sport",
     "values": ["running", "swimming", "bouldering", "tennis", "yoga", "cycling", "rowing", "boxing"],
     "state": ["For exercise I do {v}.", "My sport is {v}, three times a week.", "I keep fit with {v}."],
     "update": ["Signed up for {v} classes at the leisure centre, first session was brutal.",
                "Bought all the gear for {v} and did my first proper session this morning.",
                "My legs are sore after my first month of {v}."],
     "restate": ["Did {v} again after work, felt great.",
                 "Another early {v} session before breakfast.",
                 "Sticking with {v}, it's the only thing that clears my head."],
     "namesake": ["The {v} highlights were on TV at the pub.",
                  "My nephew's school had a {v} day, he came last.",
                  "Read a story about an Olympic {v} coach."],
     "ask": ["What exercise does the user do?", "Which sport do I do these days?", "How do I keep fit?"],
     "echo": ["Can you exercise some patience with my typos?", "What's a good sport drink?",
              "These days everything costs more."]},
    {"slot": "drink",
     "values": ["oat flat white", "green tea", "espresso", "chai latte", "black coffee", "hot chocolate",
                "matcha", "peppermint tea"],
     "state": ["My usual drink is {v}.", "I start every day with {v}.", "My go-to order is {v}."],
     "update": ["The café near the new office makes a great {v}, I've had one every morning this month.",
                "Switched my morning routine to {v} and I'm sleeping better.",
                "Bought a machine so I can make {v} at home."],
     "restate": ["Having my {v} by the window, perfect start.",
                 "The barista knows my {v} order by heart.",
                 "Two {v}s today, it's been that kind of day."],
     "namesake": ["There's a {v} flavoured ice cream at the shop, weird.",
                  "An ad for {v} keeps showing up on my phone.",
                  "My colleague spilled {v} on the printer."],
     "ask": ["What does the user like to drink?", "What's my usual drink order?", "What do I drink in the morning?"],
     "echo": ["Drink plenty of water on hot days, they say.", "What's the usual time for the standup?",
              "Morning meetings are the worst."]},
    {"slot": "instrument",
     "values": ["guitar", "piano", "violin", "drums", "saxophone", "cello", "ukulele", "trumpet"],
     "state": ["I play the {v}.", "I've played {v} since I was a kid.", "My instrument is the {v}."],
     "update": ["Had my first {v} lesson with a teacher downstairs, my fingers hurt.",
                "Sold my old instrument and bought a second-hand {v} on Saturday.",
                "Practised {v} scales for an hour, I'm hooked on it now."],
     "restate": ["Played {v} for an hour tonight, it's so relaxing.",
                 "Learned a new song on the {v}.",
                 "Restrung my {v}, sounds much brighter."],
     "namesake": ["A street musician with a {v} was outside the station.",
                  "Watched a documentary about a famous {v} maker.",
                  "My niece wants a toy {v} for her birthday."],
     "ask": ["What instrument does the user play?", "Which instrument do I play now?",
             "What music do I make myself?"],
     "echo": ["Let's play it by ear for Saturday.", "What instrument panel does a plane have?",
              "The music at the café was too loud."]},
    {"slot": "language",
     "values": ["Spanish", "Japanese", "German", "Italian", "Korean", "Portuguese", "Dutch", "Mandarin"],
     "state": ["I'm learning {v}.", "I study {v} in the evenings.", "My language project is {v}."],
     "update": ["Enrolled in a {v} course at the community college, homework already.",
                "Downloaded a {v} app and kept a 20 day streak.",
                "My {v} tutor says my pronunciation is improving after our first month."],
     "restate": ["Did my {v} homework on the train.",
                 "Watched a film in {v} without subtitles, understood half.",
                 "{V} verbs are killing me but I'm enjoying it."],
     "namesake": ["The {v} restaurant on the corner changed owners.",
                  "My boss had a meeting with the {v} partners.",
                  "A {v} tourist asked me for directions."],
     "ask": ["What language is the user learning?", "Which language am I studying?", "What language do I learn now?"],
     "echo": ["Mind your language in the team chat, ha.", "What's the hardest thing about learning to swim?",
              "Studying for exams was never my thing."]},
    {"slot": "commute",
     "values": ["by bike", "by train", "on the bus", "by car", "on foot", "by scooter", "by ferry", "by tram"],
     "state": ["I get to work {v}.", "I commute {v}.", "My commute is {v}, about forty minutes."],
     "update": ["Bought a monthly pass and went to the office {v} all week.",
                "Started going in {v} since the move, takes twenty minutes.",
                "Getting to the office {v} now that the new route opened, so much calmer."],
     "restate": ["The trip in {v} was smooth today.",
                 "Read a whole chapter on my way in {v}.",
                 "Rain again on the way in {v}."],
     "namesake": ["Saw a film where the hero escapes {v}.",
                  "My friend travelled across France {v} on holiday.",
                  "The kids went to the zoo {v} with school."],
     "ask": ["How does the user get to work?", "How do I commute?", "What's my way to the office?"],
     "echo": ["Work has been hectic this month.", "How do I get to the airport from the hotel?",
              "I need to get a new umbrella."]},
    {"slot": "partner",
     "values": ["Sam", "Priya", "Jonas", "Amara", "Leo", "Noor", "Felix", "Ines"],
     "state": ["My partner is {v}.", "I'm with {v}, we've been together two years.", "{V} and I live together."],
     "update": ["Had our third date with {v} last night and I think it's serious.",
                "Introduced {v} to my parents on Sunday as my girlfriend, it went well.",
                "Moved in with {v} after a lovely year of dating."],
     "restate": ["Cooked dinner with {v} tonight.", "{V} and I watched a film on the sofa.",
                 "Planning a weekend away with {v}."],
     "namesake": ["A singer called {v} won the talent show.", "My new colleague is also named {v}, confusing.",
                  "There's a storm named {v} on the news."],
     "ask": ["Who is the user's partner?", "Who am I dating?", "What's my partner's name?"],
     "echo": ["Our business partner sent the invoice.", "Who is dating who in that show?",
              "The name of that actor escapes me."]},
    {"slot": "phone",
     "values": ["an iPhone 15", "a Pixel 8", "a Samsung Galaxy", "a Fairphone", "a Nokia flip phone",
                "a OnePlus", "a Motorola", "a Sony Xperia"],
     "state": ["My phone is {v}.", "I use {v}.", "I've had {v} for ages."],
     "update": ["Unboxed {v} today and spent the evening moving my photos over.",
                "The shop swapped my broken phone for {v}, so far so good.",
                "Setting up {v} took all morning, the apps are finally back."],
     "restate": ["The battery on {v} still lasts two days.", "Took great photos on {v} at the beach.",
                 "{V} survived another drop."],
     "namesake": ["An ad for {v} played before the video.", "My dad asked about {v} for his birthday.",
                  "Read a review of {v}, mixed opinions."],
     "ask": ["What phone does the user have?", "Which phone do I use?", "What's my phone?"],
     "echo": ["I'll phone the dentist tomorrow.", "Which is the best app for notes?",
              "My battery of tests at the clinic went fine."]},
]


def _fill(template: str, value: str) -> str:
    text = template.replace("{v}", value).replace("{V}", value[:1].upper() + value[1:])
    return text[:1].upper() + text[1:]


def _say(tl: ScenarioTimeline, spec: dict[str, Any], key: str, value: str, session: str) -> str:
    """One user turn of ``spec[key]``'s templates with ``value``, answered half the time."""
    label = tl.turn(_fill(tl.pick(spec[key]), value), session)
    reply(tl, session)
    return label


def _chat_days(tl: ScenarioTimeline, session: str, turns: int, days: float) -> None:
    """``turns`` small-talk turns spread over about ``days`` days."""
    for _ in range(turns):
        tl.advance(days=float(tl.rng.uniform(0.0, 2.0 * days / max(turns, 1))))
        chit_chat(tl, session, 1)


def _session(tl: ScenarioTimeline, index: int, kind: str, round_: int) -> None:
    spec = SLOTS[index]
    session = f"{spec['slot']}-{kind}-{round_ + 1}"
    i, j = tl.rng.choice(len(spec["values"]), size=2, replace=False)
    old, new = spec["values"][int(i)], spec["values"][int(j)]
    _chat_days(tl, session, int(tl.rng.integers(0, 4)), 2)
    labels = {"old": _say(tl, spec, "state", old, session)}
    _chat_days(tl, session, int(tl.rng.integers(3, 10)), float(tl.rng.uniform(10, 60)))
    if kind == "update":
        labels["update"] = _say(tl, spec, "update", new, session)
    else:
        labels["restatement"] = _say(tl, spec, "restate", old, session)
    _chat_days(tl, session, int(tl.rng.integers(2, 8)), float(tl.rng.uniform(1, 20)))
    labels["namesake"] = _say(tl, spec, "namesake", old, session)
    _chat_days(tl, session, int(tl.rng.integers(1, 5)), 3)
    labels["echo"] = tl.turn(tl.pick(spec["echo"]), session)
    reply(tl, session)
    _chat_days(tl, session, int(tl.rng.integers(0, 3)), 1)
    tl.advance(hours=float(tl.rng.uniform(2, 48)))
    split = "dev" if index in SPLITS["dev"] else "held"
    if kind == "update":
        relevant, stale = [labels["update"]], [labels["old"]]
    else:
        relevant, stale = [labels["old"], labels["restatement"]], []
    tl.probe(tl.pick(spec["ask"]), session, relevant=relevant, stale=stale, category=kind, slot=spec["slot"],
             split=split, **labels)


def plain_chat(tl: ScenarioTimeline, rounds: int) -> dict[str, Any]:
    """``rounds`` update sessions and ``rounds`` control sessions for every slot."""
    for r in range(rounds):
        for index in range(len(SLOTS)):
            for kind in ("update", "control"):
                _session(tl, index, kind, r)
    return {"description": f"Plain chats: {len(SLOTS)} everyday facts of a user's life, each told once and later "
                           "changed in passing (update) or only restated (control), with small talk and a mention "
                           "of the old value in another sense; remember() on every turn, nothing else."}
