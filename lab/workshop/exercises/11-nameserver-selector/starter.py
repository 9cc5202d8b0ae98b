"""Exercise 11: which NameServer a client talks to, and how it fails over (NettyRemotingClient's
namesrvAddrList, namesrvAddrChoosed, namesrvIndex).

Every client of the lab builds NamesrvSelector(rng) (rng: a random.Random), gives it the NameServer
list with update_addr_list, and before each NameServer request asks is_sticky(channel_ok): when
True it uses `chosen`; else it tries the addresses candidates() yields, in order, until one
connects. The rules are in the brief (`nslab workshop show 11`).

Check: nslab workshop check 11
"""


class NamesrvSelector:
    def __init__(self, rng):
        self.rng = rng
        self.addr_list = []
        self.namesrv_index = 0  # TODO: where RocketMQ starts it
        self.chosen = None

    def update_addr_list(self, addrs):
        # TODO: only a changed list (other members) replaces the old, shuffled; a chosen address
        # no longer listed is dropped. Returns whether the list changed.
        self.addr_list = list(addrs)
        return True

    def is_sticky(self, channel_ok):
        # The naive client: once it has a NameServer it keeps it, even after the channel is gone.
        # TODO: sticky only while channel_ok(chosen) says the channel is open.
        return self.chosen is not None

    def candidates(self):
        # TODO: one round over addr_list from the one after namesrv_index; each address becomes
        # `chosen` (and namesrv_index goes up by one) as it is handed out.
        for addr in self.addr_list:
            self.chosen = addr
            yield addr
