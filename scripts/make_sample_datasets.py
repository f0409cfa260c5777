"""Write the small sample datasets under datasets/ (deterministic; re-run to regenerate).

Hand-written questions and answers on varied topics, arranged into ShareGPT-format
conversations (several multi-turn) and a JSONL file with every supported shape.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

TOPICS = [
    ("How do I reverse a list in Python?",
     "Use slicing: `items[::-1]` returns a reversed copy, and `items.reverse()` reverses in place. "
     "If you only need to iterate backwards, `reversed(items)` avoids a copy.",
     ["And for a string?", "Does slicing copy the whole list in memory?"]),
    ("What is the difference between TCP and UDP?",
     "TCP gives you an ordered, reliable byte stream with congestion control; UDP sends independent "
     "datagrams with no delivery guarantee. TCP suits file transfer and web traffic, UDP suits "
     "real-time audio, games and DNS where late data is useless.",
     ["Why does video calling use UDP then?", "What does QUIC change?"]),
    ("Explain photosynthesis to a ten year old.",
     "Plants make their own food using sunlight. Their leaves catch light, take in carbon dioxide "
     "from the air and water from the roots, and turn them into sugar. The leftover oxygen is what "
     "we breathe.", ["Why are leaves green?"]),
    ("Write a haiku about autumn rain.",
     "Cold rain on maples\nred leaves loosen one by one\nthe gutter fills gold", []),
    ("What causes inflation?",
     "Inflation happens when prices rise across the economy: demand outpacing supply, higher costs "
     "for energy or wages passed on to customers, and expectations that prices will keep rising. "
     "Central banks respond mostly with interest rates.",
     ["How do higher interest rates slow it down?", "Can inflation ever be good?",
      "What is the difference between inflation and deflation?"]),
    ("How many users can a single GPU serve for a 7B model?",
     "It depends on context length, batch size and the latency you accept. With continuous "
     "batching a single modern GPU can keep dozens of conversations streaming, but time to first "
     "token climbs once the KV cache fills and requests queue.",
     ["What is the KV cache?", "How would I measure that limit myself?"]),
    ("Give me a recipe for a quick tomato soup.",
     "Soften an onion and two garlic cloves in olive oil, add a tin of tomatoes, a cup of stock, "
     "salt and a pinch of sugar. Simmer fifteen minutes, blend, and finish with cream or basil.",
     ["Can I make it without a blender?"]),
    ("Summarize the plot of Hamlet in three sentences.",
     "Prince Hamlet learns from his father's ghost that his uncle Claudius murdered the king. "
     "Hamlet feigns madness while seeking proof and revenge, causing the deaths of Polonius and, "
     "indirectly, Ophelia. A final duel leaves Hamlet, Claudius, Gertrude and Laertes dead.", []),
    ("What is a race condition?",
     "A race condition is a bug where the result depends on the timing of concurrent operations, "
     "for example two threads reading and then writing the same counter. Locks, atomic operations "
     "or message passing remove it.", ["How do I find one in a large program?"]),
    ("Translate 'where is the train station' into French and German.",
     "French: « Où est la gare ? » German: „Wo ist der Bahnhof?“", ["And in Japanese?"]),
    ("Why is the sky blue?",
     "Sunlight scatters off air molecules, and shorter blue wavelengths scatter much more than red "
     "ones (Rayleigh scattering), so blue light reaches your eyes from every direction of the sky.",
     ["Then why are sunsets red?"]),
    ("How do I center a div in CSS?",
     "The simplest modern way is flexbox on the parent: `display: flex; justify-content: center; "
     "align-items: center;`. With grid, `display: grid; place-items: center;` does the same.", []),
    ("Plan a three day trip to Lisbon.",
     "Day one: Alfama, the castle and a fado evening. Day two: Belém's tower, monastery and "
     "pastéis, then LX Factory. Day three: a train to Sintra for the palaces, back for dinner in "
     "Bairro Alto.", ["What should I pack in March?", "Is the tram 28 worth it?"]),
    ("What is the halting problem?",
     "It asks whether a program can decide, for every program and input, if that program will "
     "eventually stop. Turing proved no such general decider exists, by showing that one could be "
     "turned against itself to produce a contradiction.", []),
    ("Help me write a polite email declining a meeting.",
     "Hi Sam, thank you for the invitation. Unfortunately I can't make Thursday's meeting because "
     "of a prior commitment. Could you share the notes afterwards? I'm happy to follow up by email. "
     "Best regards, Alex", ["Make it shorter.", "Now make it more formal."]),
    ("What are the benefits of strength training after 50?",
     "It preserves muscle and bone density, improves balance and reduces fall risk, helps blood "
     "sugar control and keeps everyday tasks easy. Two sessions a week with progressive loads is "
     "a good start.", ["Which exercises are safest to begin with?"]),
    ("Explain big O notation with an example.",
     "Big O describes how the cost of an algorithm grows with input size. Scanning a list for a "
     "value is O(n): twice the items, twice the work. Binary search on a sorted list is O(log n): "
     "doubling the items adds one step.", ["What is O(n log n) then?"]),
    ("Is it safe to eat raw cookie dough?",
     "Not entirely: raw flour can carry E. coli and raw eggs can carry salmonella. Heat-treated "
     "flour and pasteurized eggs, or dough made for eating raw, avoid both risks.", []),
    ("How does public key cryptography work?",
     "Each party has a key pair: a public key anyone may use to encrypt or verify, and a private "
     "key kept secret to decrypt or sign. The math makes it infeasible to derive the private key "
     "from the public one.", ["What is a digital signature exactly?", "Will quantum computers break it?"]),
    ("Suggest names for a coffee shop near a library.",
     "Chapter & Bean, The Reading Room Roastery, Footnote Coffee, Bookmark Brews, Margins Café.",
     ["Something shorter and punchier?"]),
    ("What should I check before buying a used car?",
     "Service history, rust underneath, tyre wear, warning lights, a cold start, a test drive on "
     "mixed roads, and an independent inspection. Check the registration matches the VIN.", []),
    ("Convert 72 degrees Fahrenheit to Celsius.",
     "(72 − 32) × 5/9 ≈ 22.2 °C.", ["And 0 Kelvin in Fahrenheit?"]),
    ("What is the difference between a virus and a bacterium?",
     "Bacteria are living single cells that reproduce on their own and can be killed by "
     "antibiotics. Viruses are much smaller, need a host cell to replicate, and antibiotics do "
     "nothing against them.", []),
    ("How do I make my Ollama server handle more users?",
     "Raise OLLAMA_NUM_PARALLEL so it serves several requests at once, keep the model loaded with "
     "a long keep_alive, and size the context so parallel slots fit in memory. Measure time to "
     "first token as you add users.", ["What happens to tokens per second per user?",
                                        "How do I know if it is queuing or compute bound?"]),
    ("Write a SQL query for the top 5 customers by revenue.",
     "SELECT customer_id, SUM(amount) AS revenue FROM orders GROUP BY customer_id ORDER BY "
     "revenue DESC LIMIT 5;", ["Include the customer's name from a customers table."]),
    ("What's a good way to learn a new language as an adult?",
     "Daily short practice beats long rare sessions: spaced repetition for vocabulary, listening "
     "to slow podcasts, speaking with a tutor or partner weekly, and reading simple books you "
     "enjoy.", []),
    ("Explain how a transformer model attends to tokens.",
     "Each token produces a query, key and value vector. Attention scores compare each query with "
     "every key, are normalized with softmax, and weight the values, so each token gathers "
     "information from the tokens most relevant to it.", ["Why is attention quadratic?"]),
    ("My sourdough is too dense. What am I doing wrong?",
     "Usually an under-active starter or under-proofing. Feed the starter until it doubles in 4 to "
     "6 hours, let the dough rise by about half in bulk, and shape with good surface tension.", []),
    ("What is the capital of Australia?", "Canberra.", ["Why not Sydney?"]),
    ("Describe the water cycle.",
     "Water evaporates from oceans and land, condenses into clouds, falls as precipitation, and "
     "returns to the sea through rivers and groundwater, driven by the sun's energy.", []),
    ("How do vaccines train the immune system?",
     "They show the immune system a harmless piece or version of a pathogen, so it builds "
     "antibodies and memory cells. If the real pathogen arrives, the response is fast and strong.", []),
    ("Create a workout plan for a beginner runner.",
     "Three runs a week for eight weeks: start with 1 minute running and 2 walking repeated 8 "
     "times, add a minute of running each week, and keep one easy longer session at the weekend.",
     ["How do I avoid shin splints?"]),
    ("What is Docker used for?",
     "Docker packages an application with its dependencies into an image that runs the same way "
     "on any machine with a container runtime, which simplifies deployment and isolation.",
     ["How is that different from a virtual machine?"]),
    ("Tell me a fun fact about octopuses.",
     "An octopus has three hearts and blue blood, and most of its neurons are in its arms, which "
     "can react to touch on their own.", []),
    ("Why do my tests pass locally but fail in CI?",
     "Common causes: different environment variables or versions, time zones, test order "
     "dependence, network access, file system case sensitivity, and timing assumptions under a "
     "slower machine.", ["How do I make timing tests robust?"]),
    ("How do I politely ask my neighbour to turn down music?",
     "Pick a calm moment, introduce yourself, mention the time it bothers you, and ask if they "
     "could lower it after a certain hour. Offer your number in case you are ever too loud.", []),
]


def main() -> None:
    rng = random.Random(2026)
    convs = []
    for i, (q, a, follow) in enumerate(TOPICS):
        turns = [{"from": "human", "value": q}, {"from": "gpt", "value": a}]
        for f in follow:
            turns.append({"from": "human", "value": f})
            turns.append({"from": "gpt", "value": "Good question. " + rng.choice(TOPICS)[1]})
        convs.append({"id": f"sample-{i:03d}", "conversations": turns})
    # a conversation too short for vLLM's sampling rules, and one with a system prompt
    convs.append({"id": "sample-short", "conversations": [{"from": "human", "value": "Hi"},
                                                          {"from": "gpt", "value": "Hello!"}]})
    convs.append({"id": "sample-system", "conversations": [
        {"from": "system", "value": "You are a terse assistant."},
        {"from": "human", "value": "List three prime numbers above fifty."},
        {"from": "gpt", "value": "53, 59, 61."}]})
    out = Path(__file__).resolve().parent.parent / "datasets"
    (out / "sharegpt_sample.json").write_text(json.dumps(convs, indent=1, ensure_ascii=False) + "\n",
                                              encoding="utf-8")
    lines = [
        {"id": "msg-1", "messages": [{"role": "system", "content": "Answer briefly."},
                                     {"role": "user", "content": TOPICS[0][0]}], "max_tokens": 64},
        {"id": "msg-2", "messages": [{"role": "user", "content": TOPICS[4][0]},
                                     {"role": "assistant", "content": TOPICS[4][1]},
                                     {"role": "user", "content": TOPICS[4][2][0]}]},
        {"id": "conv-1", "conversations": [{"from": "human", "value": TOPICS[10][0]},
                                           {"from": "gpt", "value": TOPICS[10][1]},
                                           {"from": "human", "value": TOPICS[10][2][0]}],
         "output_tokens": 96},
        {"id": "prompt-1", "prompt": TOPICS[13][0], "max_tokens": 128},
        {"id": "prompt-2", "prompt": TOPICS[26][0]},
    ]
    with open(out / "mixed_shapes.jsonl", "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
