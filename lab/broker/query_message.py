"""QueryMessageProcessor (4.9.8) on a lab broker: QUERY_MESSAGE (12; mqadmin queryMsgByKey,
queryMsgByUniqueKey, queryMsgTraceById) and VIEW_MESSAGE_BY_ID (33; mqadmin queryMsgById, which
decodes the offset msgId a SEND reply carried into the broker's address and the commit-log offset).

Both replies carry the stored records as they are, as a pull's body does: a 4.9.8 broker writes
them straight from the commit log's pages.
"""

from __future__ import annotations

from nameserver.protocol import RemotingCommand, ResponseCode

from .store import MessageStore

QUERY_MESSAGE = 12
VIEW_MESSAGE_BY_ID = 33
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"  # MixAll: the client's isUniqKey, as an extField
DEFAULT_QUERY_MAX_NUM = 32  # MessageStoreConfig.defaultQueryMaxNum: a unique-key query's maxNum
MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch: IndexService caps maxNum with it


def query_message(req: RemotingCommand, store: MessageStore) -> RemotingCommand:
    """QueryMessageProcessor.queryMessage: indexLastUpdateTimestamp / indexLastUpdatePhyoffset are
    the last record's when the index was read (something found), 0 otherwise."""
    topic, key = req.require("topic"), req.require("key")
    max_num, begin, end = req.require_ints("maxNum", "beginTimestamp", "endTimestamp")
    if req.field(UNIQUE_MSG_QUERY_FLAG) == "true":
        max_num = DEFAULT_QUERY_MAX_NUM
    records = store.query_message(topic, key, min(max_num, MAX_MSGS_NUM_BATCH), begin, end)
    last = store.last_record()
    header = {"indexLastUpdateTimestamp": 0, "indexLastUpdatePhyoffset": 0}
    if records and last is not None:
        header = {"indexLastUpdateTimestamp": last.store_timestamp,
                  "indexLastUpdatePhyoffset": last.commit_log_offset}
    if not records:
        return req.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct",
                            ext_fields=header)
    return req.response(ResponseCode.SUCCESS, ext_fields=header, body=b"".join(r.data for r in records))


def view_message_by_id(req: RemotingCommand, store: MessageStore) -> RemotingCommand:
    """QueryMessageProcessor.viewMessageById: the record at the header's commit-log offset."""
    offset = req.require_int("offset")
    data = store.record_at(offset)
    if data is None:
        return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
    return req.response(ResponseCode.SUCCESS, body=data)
