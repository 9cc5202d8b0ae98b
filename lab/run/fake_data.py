"""Seeded Faker text: topic names and message bodies. The same seed, the same words.

Faker writes each body slowly (~40 µs), so a producer draws its bodies from a pool of Faker
sentences made once at start; the pool and the draws come from the producer's seed.
"""

from __future__ import annotations

import random

from faker.generator import Generator
from faker.providers.lorem.en_US import Provider as Lorem

POOL_SIZE = 64


def _faker(seed: str | int) -> Generator:
    # Faker() with only the provider used here: the same words for a seed as Faker() gives, without
    # loading every other provider (a tenth of the start of a simulated run).
    fake = Generator()
    fake.add_provider(Lorem)
    fake.seed_instance(seed)
    return fake


def topic_names(count: int, seed: int) -> list[str]:
    """Readable, distinct topic names such as `TopicCareSuggest`."""
    fake = _faker(seed)
    names: list[str] = []
    seen: set[str] = set()  # membership in O(1): a list made this quadratic in `count`
    while len(names) < count:
        name = "Topic" + "".join(w.capitalize() for w in fake.words(2))
        if name not in seen and name.isascii() and name.isalnum():
            seen.add(name)
            names.append(name)
    return names


class Bodies:
    """Message bodies of exactly `size` bytes, made of Faker sentences."""

    def __init__(self, seed: str, size: int):
        self.size = size
        self.rng = random.Random(seed)
        self.pool = _faker(seed).sentences(POOL_SIZE)

    def __call__(self, i: int) -> bytes:
        text, length = [], 0
        while length < self.size:
            sentence = self.rng.choice(self.pool)
            text.append(sentence)
            length += len(sentence) + 1
        return " ".join(text).encode()[:self.size]
