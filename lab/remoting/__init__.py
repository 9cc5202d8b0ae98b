"""What brokers and clients share at run time: a node's identity and channel table, flows (one async def run by a task or by its replies' callbacks), the message codec."""
