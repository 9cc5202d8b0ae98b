"""The simulator's aggregation of idle traffic ("coasting"): what lets a simulated large cluster
skip the periodic traffic that changes nothing — a long-polled pull renewed in place rather than
answered empty and sent again, and from then on renewed every period with no work at all.

RocketMQ has none of this, and the roles do not need it: with NSLAB_AGGREGATE=0 the simulated
network (chaos/network.py) declines every offer and each role runs its plain flow, call by call,
and a run's event log is the same bytes (tests/lab/test_aggregation_off.py).

    remoting    CoastingRemotingClient: a remoting client's side of renewed and coasting calls;
                SimChannelTable, a simulated client's channel table; SimNetworkChannelTable,
                any other node's on the simulated network
    clients     SimMQClientInstance, SimConsumer: coasting route polls and rebalance rounds
                (CoastingRoutePoll, CoastingRebalance)
    broker      CoastingBroker: a broker's side of them (CoastingPullRequestHoldService,
                CoastingSuspendedPull); the member lists rebalance rounds read and watch (MemberWatch)
    nameserver  CoastingNameServer: a NameServer's side of coasting route polls (RouteQueryCoaster)
"""
