"""Reference solution for exercise 11: a client's NameServer choice (NettyRemotingClient, 4.9.8)."""

MAX_INITIAL_INDEX = 999


class NamesrvSelector:
    def __init__(self, rng):
        self.rng = rng
        self.addr_list = []
        self.namesrv_index = rng.randrange(MAX_INITIAL_INDEX)  # clients start spread out
        self.chosen = None

    def update_addr_list(self, addrs):
        # Same members (in any order): no change, so a client keeps its shuffled order. An empty
        # list is ignored: better the NameServers it has than none.
        if not addrs or (len(addrs) == len(self.addr_list) and all(a in self.addr_list for a in addrs)):
            return False
        shuffled = list(addrs)
        self.rng.shuffle(shuffled)
        self.addr_list = shuffled
        if self.chosen not in shuffled:
            self.chosen = None
        return True

    def is_sticky(self, channel_ok):
        return self.chosen is not None and channel_ok(self.chosen)

    def candidates(self):
        # One round from the NameServer after namesrvIndex; each becomes the chosen one as it is tried.
        for _ in range(len(self.addr_list)):
            self.namesrv_index += 1
            addr = self.addr_list[abs(self.namesrv_index) % len(self.addr_list)]
            self.chosen = addr
            yield addr
