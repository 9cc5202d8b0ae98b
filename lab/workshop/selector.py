"""Exercise 11: the learner's NamesrvSelector in every client of the lab.

A client keeps one NameServer while its channel is open and fails over to the others in turn when
it is gone (NettyRemotingClient's namesrvAddrList / namesrvAddrChoosed / namesrvIndex, 4.9.8).
The class is swapped in where a client builds it (`lab.clients.instance:NamesrvSelector`); the
client's request loop calls it as it calls the lab's. Checked by unit tests (one rule each), a
differential run against the lab's selector on random sequences (same seed, same choices), and
the scenarios where a NameServer dies or swallows packets.
"""

from __future__ import annotations

import itertools
import random

from lab.clients import namesrv as lab_namesrv

from .warmups import needs

ADDRS = [f"ns-{i}:9876" for i in range(4)]


def _state(selector) -> tuple:
    return list(selector.addr_list), selector.namesrv_index, selector.chosen


def _take(selector, n: int) -> list[str]:
    """The first n candidates, each checked to be the chosen one as it is handed out."""
    out = []
    for addr in itertools.islice(iter(selector.candidates()), n):
        if selector.chosen != addr:
            raise AssertionError(f"candidates() gave {addr} but chosen is {selector.chosen!r}: each candidate "
                                 f"becomes the chosen one before the client tries it")
        out.append(addr)
    return out


def test_a_changed_list_replaces_the_old(NamesrvSelector):
    s = NamesrvSelector(random.Random(1))
    assert s.update_addr_list(ADDRS[:3]) is True, "a new list is taken (update_addr_list returns True)"
    assert sorted(s.addr_list) == ADDRS[:3], f"addr_list holds the new NameServers (got {s.addr_list})"
    before = list(s.addr_list)
    assert s.update_addr_list(list(reversed(ADDRS[:3]))) is False, \
        "the same NameServers in another order are no change (returns False)"
    assert s.addr_list == before, "and the list stays as it was: no reshuffle, clients keep their spread"
    assert s.update_addr_list(ADDRS[:2]) is True and sorted(s.addr_list) == ADDRS[:2], "one fewer is a change"


def test_an_empty_list_is_ignored(NamesrvSelector):
    s = NamesrvSelector(random.Random(1))
    s.update_addr_list(ADDRS[:3])
    chosen = _take(s, 1)[0]
    before = list(s.addr_list)
    assert s.update_addr_list([]) is False, "an empty list is no change (update_addr_list returns False)"
    assert s.addr_list == before and s.chosen == chosen, \
        f"the client keeps its NameServers and its choice: none is worse (got {s.addr_list}, chosen {s.chosen!r})"


def test_the_list_is_shuffled(NamesrvSelector):
    orders = set()
    for seed in range(20):
        s = NamesrvSelector(random.Random(seed))
        s.update_addr_list(list(ADDRS))
        orders.add(tuple(s.addr_list))
    assert len(orders) > 1, "each client shuffles its list (rng.shuffle): otherwise every client starts on the same one"


def test_sticky_while_its_channel_is_open(NamesrvSelector):
    s = NamesrvSelector(random.Random(1))
    s.update_addr_list(ADDRS[:3])
    assert not s.is_sticky(lambda addr: True), "nothing chosen yet: nothing to stick to"
    first = _take(s, 1)[0]
    assert s.is_sticky(lambda addr: addr == first), "the chosen NameServer is kept while its channel is open"
    assert not s.is_sticky(lambda addr: False), "and dropped when its channel is gone: the client fails over"


def test_failover_is_one_round_after_the_index(NamesrvSelector):
    s = NamesrvSelector(random.Random(3))
    s.update_addr_list(ADDRS[:3])
    start = s.namesrv_index
    got = _take(s, 3)
    want = [s.addr_list[abs(start + k) % 3] for k in (1, 2, 3)]
    assert got == want, f"one round from the NameServer after namesrv_index (index {start}: want {want}, got {got})"
    assert s.namesrv_index == start + 3, "namesrv_index goes up by one per NameServer tried"
    again = _take(s, 1)
    assert again == [s.addr_list[abs(start + 4) % 3]], "the next failover goes on from there, not from the start"


def test_a_dropped_choice_is_forgotten(NamesrvSelector):
    s = NamesrvSelector(random.Random(2))
    s.update_addr_list(ADDRS[:3])
    chosen = _take(s, 1)[0]
    s.update_addr_list([a for a in ADDRS[:3] if a != chosen])
    assert s.chosen is None, f"a chosen NameServer no longer listed is dropped (chosen is {s.chosen!r})"


def test_the_index_starts_at_random(NamesrvSelector):
    starts = {NamesrvSelector(random.Random(seed)).namesrv_index for seed in range(10)}
    assert len(starts) > 1 and all(0 <= i < lab_namesrv.MAX_INITIAL_INDEX for i in starts), \
        f"namesrv_index starts at rng.randrange(999), so clients spread (got {sorted(starts)})"


def random_operations(seed: int, count: int = 120):
    rng = random.Random(seed)
    for _ in range(count):
        roll = rng.random()
        if roll < 0.25:  # an empty list now and then: a name server address service that answered nothing
            yield "update", rng.sample(ADDRS, rng.choice((0, *range(1, len(ADDRS) + 1))))
        elif roll < 0.6:
            up = set(rng.sample(ADDRS, rng.randint(0, len(ADDRS))))
            yield "sticky", up
        else:
            yield "candidates", rng.randint(1, 4)


RULES = [test_a_changed_list_replaces_the_old, test_an_empty_list_is_ignored, test_the_list_is_shuffled, test_sticky_while_its_channel_is_open,
         test_failover_is_one_round_after_the_index, test_a_dropped_choice_is_forgotten,
         test_the_index_starts_at_random]


@needs(*RULES)  # what the differential finds beyond the rules: a broken rule is already said
def test_same_as_the_lab_on_random_sequences(NamesrvSelector):
    for seed in range(1, 6):
        ours, theirs = lab_namesrv.NamesrvSelector(random.Random(seed)), NamesrvSelector(random.Random(seed))
        history = []
        for op, arg in random_operations(seed):
            history.append(f"{op}({sorted(arg) if isinstance(arg, set) else arg})")
            if op == "update":
                expected, got = ours.update_addr_list(list(arg)), theirs.update_addr_list(list(arg))
            elif op == "sticky":
                expected, got = ours.is_sticky(arg.__contains__), theirs.is_sticky(arg.__contains__)
            else:
                expected = list(itertools.islice(ours.candidates(), arg)) if ours.addr_list else []
                got = list(itertools.islice(iter(theirs.candidates()), arg)) if theirs.addr_list else []
            where = f"seed {seed}, step {len(history)}: {history[-1]}, after {', '.join(history[-4:-1]) or 'nothing'}"
            if got != expected:
                raise AssertionError(f"returned {got!r}; the lab's selector returns {expected!r} ({where})")
            if _state(theirs) != _state(ours):
                names = ("addr_list", "namesrv_index", "chosen")
                diff = "; ".join(f"{n}: lab's {a!r}, yours {b!r}" for n, a, b in zip(names, _state(ours), _state(theirs))
                                 if a != b)
                raise AssertionError(f"{diff} ({where})")


TESTS = [*RULES, test_same_as_the_lab_on_random_sequences]
