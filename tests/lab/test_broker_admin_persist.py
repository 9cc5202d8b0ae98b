"""What mqadmin changes on a broker survives its kill and restart, as on a 4.9.8 broker's disk.

4.9.8 writes store/config/subscriptionGroup.json at every change of the subscription groups
(updateSubGroup, deleteSubGroup, a group auto-created by a heartbeat or pull) and reads it at boot
over its built-in groups (putAll); updateBrokerConfig rewrites the broker's properties file
(Configuration.persist to the -c file), which the next start reads. The lab keeps both in the
broker's MessageStore (`config_files`): the same object across a simulated kill, a file a new
process replays over sockets.
"""

from __future__ import annotations

import json

import trio

from lab.broker import admin
from lab.broker.store import MessageStore
from nameserver.protocol import RequestCode, ResponseCode

from test_mqadmin_commands import SUB_GROUP_DEFAULTS, TOPIC, heartbeat, properties, route, sub_group_body, \
    subscription_groups


async def change_groups_and_config(harness, broker) -> dict:
    """updateSubGroup, deleteSubGroup, a heartbeat's auto-created group, updateBrokerConfig: the
    subscription group wrapper afterwards."""
    for body in (sub_group_body("held", consumeEnable=False, retryQueueNums=2), sub_group_body("gone")):
        reply = await harness.call(broker.address, admin.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    for group in ("gone", "TOOLS_CONSUMER"):
        deleted = await harness.call(broker.address, admin.DELETE_SUBSCRIPTIONGROUP,
                                     {"groupName": group, "removeOffset": "false"})
        assert deleted.code == ResponseCode.SUCCESS, deleted.remark
    assert (await harness.call(broker.address, RequestCode.HEART_BEAT, body=heartbeat(consumer="beat"))).code == 0
    reply = await harness.call(broker.address, admin.UPDATE_BROKER_CONFIG,
                               body=b"brokerPermission=4\nfileReservedTime=48\nautoCreateSubscriptionGroup=false\n")
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    reply = await harness.call(broker.address, admin.UPDATE_BROKER_CONFIG, body=b"fileReservedTime=24\n")
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return await subscription_groups(harness, broker.address)


async def check_restarted(harness, ns, broker, before: dict) -> None:
    after = await subscription_groups(harness, broker.address)
    table = after["subscriptionGroupTable"]
    assert table["held"] == {**SUB_GROUP_DEFAULTS, "groupName": "held", "consumeEnable": False, "retryQueueNums": 2}
    assert table["beat"] == {**SUB_GROUP_DEFAULTS, "groupName": "beat"}
    assert "gone" not in table
    assert "TOOLS_CONSUMER" in table, "putAll over the built-in groups: a deleted built-in one is back"
    assert {k: v for k, v in table.items() if k != "TOOLS_CONSUMER"} == before["subscriptionGroupTable"]
    assert after["dataVersion"] == before["dataVersion"]

    props = properties((await harness.call(broker.address, admin.GET_BROKER_CONFIG)).body)
    assert (props["brokerPermission"], props["fileReservedTime"], props["autoCreateSubscriptionGroup"]) == \
        ("4", "24", "false")
    assert route(harness, ns, TOPIC).queue_datas[0].perm == 4, "registered read-only from its start"
    assert (await harness.send(broker.address)).code == ResponseCode.NO_PERMISSION
    refused = await harness.pull(broker.address, consumerGroup="held")
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, held")
    stranger = await harness.pull(broker.address, consumerGroup="stranger")  # no auto-creation any more
    assert stranger.code == admin.SUBSCRIPTION_GROUP_NOT_EXIST


async def test_subscription_groups_and_broker_config_survive_a_kill_over_sockets(tcp, tmp_path):
    """A new store on the same file, as a restarted broker process opens it."""
    ns = await tcp.start_nameserver(port=0)
    path = tmp_path / "broker-a-0.store"
    store = MessageStore(path)
    broker = await tcp.start_broker(store=store)
    before = await change_groups_and_config(tcp, broker)
    port = int(broker.address.rpartition(":")[2])
    broker.kill()
    store.close()
    await trio.sleep(0.2)
    restarted = await tcp.start_broker(store=MessageStore(path), port=port)
    await check_restarted(tcp, ns, restarted, before)
    # the file holds it as a record per write: the last of each file is what a restart reads
    assert set(MessageStore(path).config_files) == {"subscriptionGroup.json", "broker.properties"}


async def test_subscription_groups_and_broker_config_survive_a_simulated_kill(sim, autojump_clock):
    ns = await sim.start_nameserver()
    store = MessageStore()
    broker = await sim.start_broker(store=store)
    before = await change_groups_and_config(sim, broker)
    port = int(broker.address.rpartition(":")[2])
    broker.kill()
    await trio.sleep(1)
    restarted = await sim.start_broker(store=store, port=port)
    await check_restarted(sim, ns, restarted, before)


async def test_a_broker_with_a_fresh_disk_has_only_the_built_in_groups_and_its_own_config(sim, autojump_clock):
    await sim.start_nameserver()
    broker = await sim.start_broker(store=MessageStore())
    wrapper = await subscription_groups(sim, broker.address)
    assert len(wrapper["subscriptionGroupTable"]) == 7 and wrapper["dataVersion"]["counter"] == 0
    props = properties((await sim.call(broker.address, admin.GET_BROKER_CONFIG)).body)
    assert (props["brokerPermission"], props["fileReservedTime"]) == ("6", "72")
    assert json.loads((await sim.call(broker.address, admin.GET_BROKER_CONFIG)).ext_fields["version"])["counter"] == 0
