"""Exercise 11 judged by RocketMQ 4.9.8's rules, not by agreement with the lab's selector.

NettyRemotingClient (4.9.8) keeps namesrvAddrList, namesrvAddrChoosed and namesrvIndex:

- updateNameServerAddressList(addrs): an empty list is ignored; a list of another size, or with an
  address the old one lacks, replaces it shuffled (Collections.shuffle), and a chosen NameServer no
  longer listed is forgotten; anything else (the same members in any order) changes nothing.
- getAndCreateNameserverChannel: the chosen NameServer is kept while its channel is open; else one
  round over the list, from the NameServer after namesrvIndex (index = abs(++namesrvIndex) % size),
  each becoming the chosen one as it is tried, until one connects.
- namesrvIndex starts at abs(random.nextInt() % 999).

Hypothesis generates what a client's life does to it — lists from a name server address service
(new, the same reordered, one more or fewer, duplicates, empty), connection checks with any set of
channels open, and failovers that stop at the first NameServer that connects or try them all —
and checks after each step what those rules make true, reading the selector's own shuffle (any
order is 4.9.8's). A failure is shrunk to the shortest sequence that still fails: the message.
"""

from __future__ import annotations

import itertools
import random

from hypothesis import given
from hypothesis import strategies as st

from . import generated
from .override import describe

ADDRS = [f"ns-{i}:9876" for i in range(4)]
MAX_INITIAL_INDEX = 999

_addr = st.sampled_from(ADDRS)
_OPS = {
    # what a name server address service answers: any members, repeats, reordered, nothing at all
    "update": st.tuples(st.just("update"), st.lists(_addr, max_size=5)),
    # the client's next request: is the chosen NameServer's channel open? (these ones are)
    "request": st.tuples(st.just("request"), st.frozensets(_addr)),
    # a failover: candidates until one connects (these would), at most `limit` of them
    "failover": st.tuples(st.just("failover"), st.frozensets(_addr), st.integers(1, 6)),
}
OPS = st.sampled_from(("update", "update", "request", "request", "failover", "failover")).flatmap(_OPS.__getitem__)


class Violation(AssertionError):
    pass


def _check(rule: bool, message: str) -> None:
    if not rule:
        raise Violation(message)


def _state(selector) -> tuple[list, int, str | None]:
    attrs = selector.remote_attrs(("addr_list", "namesrv_index", "chosen")) if hasattr(selector, "remote_attrs") \
        else {n: getattr(selector, n) for n in ("addr_list", "namesrv_index", "chosen")}
    addr_list = attrs["addr_list"]
    _check(isinstance(addr_list, list), f"addr_list is a list (got {addr_list!r})")
    _check(isinstance(attrs["namesrv_index"], int), f"namesrv_index is an int (got {attrs['namesrv_index']!r})")
    return list(addr_list), attrs["namesrv_index"], attrs["chosen"]


def step(selector, op, history: list[str]) -> None:
    """One operation, and what 4.9.8 makes true of it."""
    addr_list, index, chosen = _state(selector)
    if op[0] == "update":
        addrs = list(op[1])
        history.append(f"update_addr_list({addrs})")
        changed = bool(addrs) and (len(addrs) != len(addr_list) or any(a not in addr_list for a in addrs))
        result = selector.update_addr_list(list(addrs))
        history[-1] += f" -> {result!r}"
        after, index_after, chosen_after = _state(selector)
        if not addrs:
            _check(result is False, "an empty list is ignored: update_addr_list returns False")
        elif not changed:
            _check(result is False, "the same members (same size, none new) are no change: update_addr_list "
                                    "returns False")
        else:
            _check(result is True, "a list of another size, or with a NameServer not listed before, is a change: "
                                   "update_addr_list returns True")
        if changed:
            _check(sorted(after) == sorted(addrs), f"addr_list is the new list, shuffled (want the members "
                                                   f"{sorted(addrs)}, got {after})")
            want = chosen if chosen in addrs else None
            _check(chosen_after == want, f"chosen: a NameServer still listed stays chosen, one no longer listed is "
                                         f"forgotten (want {want!r}, got {chosen_after!r})")
        else:
            _check(after == addr_list, f"addr_list stays as it was, in its order (was {addr_list}, got {after})")
            _check(chosen_after == chosen, f"chosen stays as it was (was {chosen!r}, got {chosen_after!r})")
        _check(index_after == index, f"namesrv_index changes only when a NameServer is tried (was {index}, got "
                                     f"{index_after})")
    elif op[0] == "request":
        open_ = op[1]
        history.append(f"is_sticky(open: {sorted(open_) or 'none'})")
        result = selector.is_sticky(open_.__contains__)
        history[-1] += f" -> {result!r}"
        want = chosen is not None and chosen in open_
        _check(result is want, f"the chosen NameServer ({chosen!r}) is kept while its channel is open, and only "
                               f"then: is_sticky returns {want}")
        after, index_after, _ = _state(selector)
        _check((after, index_after) == (addr_list, index), "is_sticky changes neither addr_list nor namesrv_index")
    else:
        connects, limit = op[1], op[2]
        history.append(f"candidates() until one of {sorted(connects) or 'none'} connects (at most {limit})")
        tried = []
        if not addr_list:
            got = list(itertools.islice(iter(selector.candidates()), 3))
            _check(got == [], f"with no NameServer listed, candidates() yields nothing (got {got})")
            history[-1] += " -> tried []"
            return
        for addr in selector.candidates():
            _, now_index, now_chosen = _state(selector)
            k = len(tried) + 1
            want = addr_list[abs(index + k) % len(addr_list)] if addr_list else None
            _check(addr == want, f"failover: the {_ordinal(k)} NameServer tried is addr_list[abs(namesrv_index + "
                                 f"{k}) % {len(addr_list)}] = {want!r} (namesrv_index was {index}; got {addr!r})")
            _check(now_index == index + k, f"namesrv_index goes up by one per NameServer tried (want {index + k}, "
                                           f"got {now_index})")
            _check(now_chosen == addr, f"each NameServer tried becomes the chosen one as it is tried (tried "
                                       f"{addr!r}, chosen is {now_chosen!r})")
            tried.append(addr)
            _check(len(tried) <= len(addr_list), f"one round: at most {len(addr_list)} NameServers per failover, "
                                                 f"then the request fails (got {tried})")
            if addr in connects or len(tried) >= limit:
                break
        history[-1] += f" -> tried {tried}"
        want_count = min(limit, len(addr_list))
        if not any(a in connects for a in tried):
            _check(len(tried) == want_count, f"a failover tries every listed NameServer, once each, until one "
                                             f"connects (want {want_count} tries, got {tried})")
        after, _, _ = _state(selector)
        _check(after == addr_list, f"a failover leaves addr_list as it was (was {addr_list}, got {after})")


def _ordinal(k: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(k, f"{k}th")


def run_sequence(NamesrvSelector, seed: int, ops) -> None:
    history = [f"NamesrvSelector(random.Random({seed}))"]
    try:
        selector = NamesrvSelector(random.Random(seed))
        addr_list, index, chosen = _state(selector)
        _check(addr_list == [] and chosen is None, f"a new selector lists nothing and has chosen nothing (got "
                                                   f"addr_list {addr_list}, chosen {chosen!r})")
        _check(0 <= index < MAX_INITIAL_INDEX, f"namesrv_index starts in 0..998 (got {index})")
        for op in ops:
            step(selector, op, history)
    except Violation as e:
        raise AssertionError(f"{e}\n    {generated.the_case()}:\n      " + "\n      ".join(history)) from None
    except Exception as e:
        raise AssertionError(f"{history[-1]} raised {describe(e)}\n    {generated.the_case()}:\n      "
                             + "\n      ".join(history)) from e


def test_follows_4_9_8_on_generated_sequences(NamesrvSelector):
    """Hypothesis: 150 generated client lives of up to 15 steps, then the failing one shrunk."""
    @generated.checks(max_examples=150)
    @given(st.integers(0, 2 ** 16), st.lists(OPS, min_size=1, max_size=15))
    def lives(seed, ops):
        run_sequence(NamesrvSelector, seed, ops)
    lives()

