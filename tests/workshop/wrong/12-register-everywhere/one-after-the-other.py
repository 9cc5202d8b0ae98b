"""Registers with one NameServer after the other (failures caught): a hung one delays the rest.
expect-fail: test_registers_with_all_at_once
expect-fail: a slow NameServer holds back no other
expect-text: 6.0s after it began (one after the other
expect-not: test_a_failing_nameserver_costs_only_itself
"""

from lab.workshop.interfaces import (LAB_SERIALIZE_TYPE, BrokerRegisterResult, RemotingError, RequestCode,
                                     ResponseCode, crc32, encode_register_body, request)

from _reference_12 import Reference


class BrokerOuterAPI(Reference):
    async def register_broker_all(self, broker, topic_config_table, data_version, *, compressed, timeout):
        body = encode_register_body(topic_config_table, data_version, [], LAB_SERIALIZE_TYPE, compressed=compressed)
        header = {"brokerAddr": broker.broker_addr, "brokerName": broker.broker_name,
                  "clusterName": broker.cluster_name, "haServerAddr": broker.ha_server_addr,
                  "brokerId": broker.broker_id, "compressed": compressed, "bodyCrc32": crc32(body)}
        result = None
        for address in self.namesrv_addrs:
            try:
                reply = await self.channels.invoke(address, request(RequestCode.REGISTER_BROKER, header, body), timeout)
            except RemotingError:
                continue
            if reply.code == ResponseCode.SUCCESS and result is None:
                result = BrokerRegisterResult(reply.field("masterAddr"), reply.field("haServerAddr"))
        return result
