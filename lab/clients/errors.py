"""The client's failures, named as the Java client names them, so event logs read like its logs."""

from __future__ import annotations

from nameserver.client import RemotingError, RemotingTimeoutError
from nameserver.protocol import ResponseCode


class RemotingConnectError(RemotingError):
    """No channel to the address: refused, unreachable or the connect timeout passed."""


class MQClientError(Exception):
    """A client-side failure that is not the broker's answer (no route, no broker address)."""


class NoRouteInfoError(MQClientError):
    """The client has no usable route for a topic and none cached from before."""

    def __init__(self, topic: str, reason: str | None = None):
        self.topic = topic
        super().__init__(f"No route info of this topic: {topic}" + (f" ({reason})" if reason else ""))


class MQBrokerError(Exception):
    """The broker (or NameServer) answered with a response code the call cannot use."""

    def __init__(self, code: int, remark: str | None = None):
        self.code = code
        self.remark = remark
        super().__init__(f"CODE: {code} DESC: {remark}")


# What a client's call can fail with, short of a bug: no channel or no answer, no route or broker
# address, or a broker's (or NameServer's) refusal.
ClientFailure = (RemotingError, MQClientError, MQBrokerError)


def error_name(error: BaseException) -> str | int:
    """What an attempt's `result` says: the Java exception class, or the broker's response code
    (its name when the lab knows it)."""
    if isinstance(error, MQBrokerError):
        try:
            return ResponseCode(error.code).name
        except ValueError:
            return error.code
    if isinstance(error, RemotingConnectError):
        return "RemotingConnectException"
    if isinstance(error, RemotingTimeoutError):
        return "RemotingTimeoutException"
    if isinstance(error, RemotingError):
        return "RemotingSendRequestException"
    return "MQClientException"
