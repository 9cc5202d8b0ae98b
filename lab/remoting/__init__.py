"""What brokers and clients share at run time: a node's identity and channel table, the reply handover, the message codec."""
