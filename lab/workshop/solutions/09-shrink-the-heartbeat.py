"""Reference solution for exercise 9."""

import json
import struct
import zlib

from lab.workshop.interfaces import data_version_to_wire


def chunk(b):
    return struct.pack(">i", len(b)) + b


def encode_compressed_register_body(topic_config_table, data_version, filter_server_list):
    parts = [chunk(json.dumps(data_version_to_wire(data_version)).encode()),
             struct.pack(">i", len(topic_config_table))]
    for tc in topic_config_table.values():
        parts.append(chunk(f"{tc.topic_name} {tc.read_queue_nums} {tc.write_queue_nums} "
                           f"{tc.perm} {tc.topic_filter_type}".encode()))
    parts.append(chunk(json.dumps(filter_server_list).encode()))
    return zlib.compress(b"".join(parts), 9)
