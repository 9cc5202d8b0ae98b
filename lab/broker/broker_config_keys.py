"""The keys of a 4.9.8 broker's configuration, as GET_BROKER_CONFIG lists them: every non-static
field of BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig (the four objects
BrokerController registers with its Configuration), in each class's field order, with its default.

A default that depends on the machine is a function of its processor count; None is a field Java
leaves null by default (left out of the text, as MixAll.object2Properties leaves nulls out) unless
the broker has a value. NettyServerConfig and NettyClientConfig share writeBufferHighWaterMark and
writeBufferLowWaterMark: one key each in the merged properties.

Enum fields (brokerRole, flushDiskType) cannot be set by UPDATE_BROKER_CONFIG: MixAll.properties2Object
sets only int, long, double, boolean, float and String fields.
"""

from __future__ import annotations

import os
from typing import Mapping

ENUM_KEYS = frozenset(("brokerRole", "flushDiskType"))

FIELDS: tuple[tuple[str, object], ...] = (
    # BrokerConfig
    ("rocketmqHome", None),
    ("namesrvAddr", None),
    ("brokerIP1", None),
    ("brokerIP2", None),
    ("brokerName", None),
    ("brokerClusterName", "DefaultCluster"),
    ("brokerId", 0),
    ("brokerPermission", 6),
    ("defaultTopicQueueNums", 8),
    ("autoCreateTopicEnable", True),
    ("clusterTopicEnable", True),
    ("brokerTopicEnable", True),
    ("autoCreateSubscriptionGroup", True),
    ("messageStorePlugIn", ""),
    ("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC"),
    ("traceTopicEnable", False),
    ("sendMessageThreadPoolNums", lambda cpus: min(cpus, 4)),
    ("putMessageFutureThreadPoolNums", lambda cpus: min(cpus, 4)),
    ("pullMessageThreadPoolNums", lambda cpus: 16 + cpus * 2),
    ("processReplyMessageThreadPoolNums", lambda cpus: 16 + cpus * 2),
    ("queryMessageThreadPoolNums", lambda cpus: 8 + cpus),
    ("adminBrokerThreadPoolNums", 16),
    ("clientManageThreadPoolNums", 32),
    ("consumerManageThreadPoolNums", 32),
    ("heartbeatThreadPoolNums", lambda cpus: min(32, cpus)),
    ("endTransactionThreadPoolNums", lambda cpus: max(8 + cpus * 2, min(cpus, 4) * 4)),
    ("flushConsumerOffsetInterval", 5000),
    ("flushConsumerOffsetHistoryInterval", 60000),
    ("rejectTransactionMessage", False),
    ("fetchNamesrvAddrByAddressServer", False),
    ("sendThreadPoolQueueCapacity", 10000),
    ("putThreadPoolQueueCapacity", 10000),
    ("pullThreadPoolQueueCapacity", 100000),
    ("replyThreadPoolQueueCapacity", 10000),
    ("queryThreadPoolQueueCapacity", 20000),
    ("clientManagerThreadPoolQueueCapacity", 1000000),
    ("consumerManagerThreadPoolQueueCapacity", 1000000),
    ("heartbeatThreadPoolQueueCapacity", 50000),
    ("endTransactionPoolQueueCapacity", 100000),
    ("filterServerNums", 0),
    ("longPollingEnable", True),
    ("shortPollingTimeMills", 1000),
    ("notifyConsumerIdsChangedEnable", True),
    ("highSpeedMode", False),
    ("commercialEnable", True),
    ("commercialTimerCount", 1),
    ("commercialTransCount", 1),
    ("commercialBigCount", 1),
    ("commercialBaseCount", 1),
    ("transferMsgByHeap", True),
    ("maxDelayTime", 40),
    ("regionId", "DefaultRegion"),
    ("registerBrokerTimeoutMills", 6000),
    ("slaveReadEnable", False),
    ("disableConsumeIfConsumerReadSlowly", False),
    ("consumerFallbehindThreshold", 17179869184),
    ("brokerFastFailureEnable", True),
    ("waitTimeMillsInSendQueue", 200),
    ("waitTimeMillsInPullQueue", 5000),
    ("waitTimeMillsInHeartbeatQueue", 31000),
    ("waitTimeMillsInTransactionQueue", 3000),
    ("startAcceptSendRequestTimeStamp", 0),
    ("traceOn", True),
    ("enableCalcFilterBitMap", False),
    ("expectConsumerNumUseFilter", 32),
    ("maxErrorRateOfBloomFilter", 20),
    ("filterDataCleanTimeSpan", 86400000),
    ("filterSupportRetry", False),
    ("enablePropertyFilter", False),
    ("compressedRegister", False),
    ("forceRegister", True),
    ("registerNameServerPeriod", 30000),
    ("transactionTimeOut", 6000),
    ("transactionCheckMax", 15),
    ("transactionCheckInterval", 60000),
    ("aclEnable", False),
    ("storeReplyMessageEnable", True),
    ("enableDetailStat", True),
    ("autoDeleteUnusedStats", False),
    ("isolateLogEnable", False),
    ("configBlackList", "configBlackList;brokerConfigPath"),
    # NettyServerConfig
    ("listenPort", 8888),
    ("serverWorkerThreads", 8),
    ("serverCallbackExecutorThreads", 0),
    ("serverSelectorThreads", 3),
    ("serverOnewaySemaphoreValue", 256),
    ("serverAsyncSemaphoreValue", 64),
    ("serverChannelMaxIdleTimeSeconds", 120),
    ("serverSocketSndBufSize", 0),
    ("serverSocketRcvBufSize", 0),
    ("writeBufferHighWaterMark", 0),
    ("writeBufferLowWaterMark", 0),
    ("serverSocketBacklog", 1024),
    ("serverPooledByteBufAllocatorEnable", True),
    ("useEpollNativeSelector", False),
    # NettyClientConfig
    ("clientWorkerThreads", 4),
    ("clientCallbackExecutorThreads", lambda cpus: cpus),
    ("clientOnewaySemaphoreValue", 65535),
    ("clientAsyncSemaphoreValue", 65535),
    ("connectTimeoutMillis", 3000),
    ("channelNotActiveInterval", 60000),
    ("clientChannelMaxIdleTimeSeconds", 120),
    ("clientSocketSndBufSize", 0),
    ("clientSocketRcvBufSize", 0),
    ("clientPooledByteBufAllocatorEnable", False),
    ("clientCloseSocketIfTimeout", True),
    ("useTLS", False),
    ("writeBufferHighWaterMark", 0),
    ("writeBufferLowWaterMark", 0),
    # MessageStoreConfig
    ("storePathRootDir", None),
    ("storePathCommitLog", None),
    ("storePathDLedgerCommitLog", None),
    ("readOnlyCommitLogStorePaths", None),
    ("mappedFileSizeCommitLog", 1073741824),
    ("mappedFileSizeConsumeQueue", 6000000),
    ("enableConsumeQueueExt", False),
    ("mappedFileSizeConsumeQueueExt", 50331648),
    ("bitMapLengthConsumeQueueExt", 64),
    ("flushIntervalCommitLog", 500),
    ("commitIntervalCommitLog", 200),
    ("useReentrantLockWhenPutMessage", True),
    ("flushCommitLogTimed", True),
    ("flushIntervalConsumeQueue", 1000),
    ("cleanResourceInterval", 10000),
    ("deleteCommitLogFilesInterval", 100),
    ("deleteConsumeQueueFilesInterval", 100),
    ("destroyMapedFileIntervalForcibly", 120000),
    ("redeleteHangedFileInterval", 120000),
    ("deleteWhen", "04"),
    ("diskMaxUsedSpaceRatio", 75),
    ("fileReservedTime", 72),
    ("putMsgIndexHightWater", 600000),
    ("maxMessageSize", 4194304),
    ("checkCRCOnRecover", True),
    ("flushCommitLogLeastPages", 4),
    ("commitCommitLogLeastPages", 4),
    ("flushLeastPagesWhenWarmMapedFile", 4096),
    ("flushConsumeQueueLeastPages", 2),
    ("flushCommitLogThoroughInterval", 10000),
    ("commitCommitLogThoroughInterval", 200),
    ("flushConsumeQueueThoroughInterval", 60000),
    ("maxTransferBytesOnMessageInMemory", 262144),
    ("maxTransferCountOnMessageInMemory", 32),
    ("maxTransferBytesOnMessageInDisk", 65536),
    ("maxTransferCountOnMessageInDisk", 8),
    ("accessMessageInMemoryMaxRatio", 40),
    ("messageIndexEnable", True),
    ("maxHashSlotNum", 5000000),
    ("maxIndexNum", 20000000),
    ("maxMsgsNumBatch", 64),
    ("messageIndexSafe", False),
    ("haListenPort", 10912),
    ("haSendHeartbeatInterval", 5000),
    ("haHousekeepingInterval", 20000),
    ("haTransferBatchSize", 32768),
    ("haMasterAddress", None),
    ("haSlaveFallbehindMax", 268435456),
    ("brokerRole", "ASYNC_MASTER"),
    ("flushDiskType", "ASYNC_FLUSH"),
    ("syncFlushTimeout", 5000),
    ("slaveTimeout", 3000),
    ("messageDelayLevel", "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"),
    ("flushDelayOffsetInterval", 10000),
    ("cleanFileForciblyEnable", True),
    ("warmMapedFileEnable", False),
    ("offsetCheckInSlave", False),
    ("debugLockEnable", False),
    ("duplicationEnable", False),
    ("diskFallRecorded", True),
    ("osPageCacheBusyTimeOutMills", 1000),
    ("defaultQueryMaxNum", 32),
    ("transientStorePoolEnable", False),
    ("transientStorePoolSize", 5),
    ("fastFailIfNoBufferInStorePool", False),
    ("enableDLegerCommitLog", False),
    ("dLegerGroup", None),
    ("dLegerPeers", None),
    ("dLegerSelfId", None),
    ("preferredLeaderId", None),
    ("isEnableBatchPush", False),
    ("enableScheduleMessageStats", True),
    ("enableLmq", False),
    ("enableMultiDispatch", False),
    ("maxLmqConsumeQueueNum", 20000),
    ("enableScheduleAsyncDeliver", False),
    ("scheduleAsyncDeliverMaxPendingLimit", 2000),
    ("scheduleAsyncDeliverMaxResendNum2Blocked", 3),)

DEFAULTS: dict[str, object] = dict(FIELDS)


def all_configs(values: Mapping[str, object], cpus: int | None = None) -> dict[str, object]:
    """Configuration.getAllConfigsFormatString's properties: every key above, the broker's own
    `values` over the defaults; keys still None are left out."""
    cpus = cpus or os.cpu_count() or 1
    merged = {key: default(cpus) if callable(default) else default for key, default in DEFAULTS.items()}
    merged.update(values)
    return {key: value for key, value in merged.items() if value is not None}


def parse_value(key: str, text: str) -> object:
    """An UPDATE_BROKER_CONFIG value as the field's type; ValueError naming the key otherwise
    (Java drops such a value without a word, and the config stays as it was)."""
    default = DEFAULTS[key]
    if key in ENUM_KEYS:
        raise ValueError(f"{key} cannot be changed at run time (4.9.8 sets no enum field)")
    if isinstance(default, bool):
        return text.strip().lower() == "true"  # Boolean.parseBoolean: anything else is false
    if isinstance(default, int) or callable(default):
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"{key}={text[:40]!r} is not an integer") from None
        if not -2**63 <= value < 2**63:  # a Java long at most
            raise ValueError(f"{key}={value} is out of range")
        return value
    return text
