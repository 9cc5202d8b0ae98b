"""Unregisters one NameServer after the other, but stops at the first that fails: the NameServers
after a dead one keep the broker until its channel closes or it expires.
expect-fail: test_unregisters_from_each_in_turn
expect-not: test_registers_with_every_nameserver
"""

from lab.workshop.interfaces import RemotingError, RequestCode, request

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def unregister_broker_all(self, broker):
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "brokerId": broker.broker_id}
        for address in self.namesrv_addrs:
            try:
                await self.channels.invoke(address, request(RequestCode.UNREGISTER_BROKER, header), 3.0)
            except RemotingError:
                return
