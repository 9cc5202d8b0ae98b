"""Unregisters from every NameServer at once (4.9.8 goes one after the other).
expect-fail: test_unregisters_from_each_in_turn
"""

import trio

from lab.workshop.interfaces import RemotingError, RequestCode, request

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def unregister_broker_all(self, broker):
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "brokerId": broker.broker_id}

        async def one(address):
            try:
                await self.channels.invoke(address, request(RequestCode.UNREGISTER_BROKER, header), 3.0)
            except RemotingError:
                pass

        async with trio.open_nursery() as nursery:
            for address in self.namesrv_addrs:
                nursery.start_soon(one, address)
