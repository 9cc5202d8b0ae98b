"""A RocketMQ 4.9-compatible NameServer on trio: protocol (sans-I/O codec), routes (the five
tables, pure), processor (request handling, pure) and server (the trio edge)."""
