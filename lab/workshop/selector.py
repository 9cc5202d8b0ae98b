"""Exercise 11: the learner's NamesrvSelector in every client of the lab.

A client keeps one NameServer while its channel is open and fails over to the others in turn when
it is gone (NettyRemotingClient's namesrvAddrList / namesrvAddrChoosed / namesrvIndex, 4.9.8).
The class is swapped in where a client builds it (`lab.clients.instance:NamesrvSelector`); the
client's request loop calls it as it calls the lab's. Checked by unit tests (one rule each), 4.9.8's
rules over generated sequences (selector_properties.py, shrunk by Hypothesis), and the scenarios
where a NameServer dies or swallows packets.
"""

from __future__ import annotations

import itertools
import random

from . import selector_properties
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
    assert len(starts) > 1 and all(0 <= i < selector_properties.MAX_INITIAL_INDEX for i in starts), \
        f"namesrv_index starts at rng.randrange(999), so clients spread (got {sorted(starts)})"


RULES = [test_a_changed_list_replaces_the_old, test_an_empty_list_is_ignored, test_the_list_is_shuffled, test_sticky_while_its_channel_is_open,
         test_failover_is_one_round_after_the_index, test_a_dropped_choice_is_forgotten,
         test_the_index_starts_at_random]


@needs(*RULES)  # what the generated sequences find beyond the rules: a broken rule is already said
def test_follows_4_9_8_on_generated_sequences(NamesrvSelector):
    """Hypothesis: generated client lives, each step checked against 4.9.8's rules, the failing one shrunk."""
    selector_properties.test_follows_4_9_8_on_generated_sequences(NamesrvSelector)


TESTS = [*RULES, test_follows_4_9_8_on_generated_sequences]


def nemesis(seed: int) -> dict:
    """The fault of `nameserver-failover.toml`, drawn from the seed: which NameServer, what happens
    to it (killed, frozen, or swallowing every packet; each kind on a third of the seeds), from when."""
    rng = random.Random(f"nameserver-failover:{seed}")
    bad = rng.choice(("ns-0", "ns-1"))
    kind, does, fault = (
        ("killed", "is down", f'[[timeline]]\nat = "{{at}}s"\nfault = "ns-down"\nnode = "{bad}"'),
        ("frozen", "is frozen", f'[[timeline]]\nat = "{{at}}s"\nfault = "freeze"\nnode = "{bad}"'),
        ("blackhole", "swallows every packet",
         f'[[timeline]]\nat = "{{at}}s"\nfault = "toxic"\nnode = "{bad}"\nkind = "blackhole"'),
    )[seed % 3]
    at = rng.randint(40, 80)
    # A client started while a NameServer is down gets its route at once (a refused connection moves
    # it on); one that picks a silent NameServer waits out a timeout first, as 4.9.8's does.
    new_client = "" if kind != "killed" else (
        f'[[timeline]]\nat = "{at + rng.randint(5, 20)}s"\nfault = "new-client"\nnode = "consumer"\n\n'
        f'[[expect]]\nname = "a client started while {bad} is down gets its route"\ntype = "new_client"\n'
        f'succeeds_in = "faulty"')
    return {"bad": bad, "good": "ns-1" if bad == "ns-0" else "ns-0", "does": does, "at": f"{at}s",
            "fault": fault.format(at=at), "new_client": new_client, "summary": f"{bad} {does} from t={at}s"}
