"""Writes the serialized FileDescriptorProtos of XLA's HLO schema, as compiled into jaxlib
(libjax_common.so embeds each .proto file's descriptor), into DIR/*.proto.pb.

Usage: python extract.py PATH/TO/libjax_common.so DIR
"""
import os
import re
import sys

FILES = [
    "google/protobuf/any.proto",
    "google/protobuf/duration.proto",
    "google/protobuf/timestamp.proto",
    "xla/xla_data.proto",
    "xla/service/metrics.proto",
    "xla/service/hlo.proto",
]


def varint(b, i):
    r, s = 0, 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return r, i


def descriptor_at(data, start):
    """The FileDescriptorProto starting at `start`: fields 1..14 until one that is not."""
    i = start
    while i < len(data):
        try:
            tag, j = varint(data, i)
            field, wire = tag >> 3, tag & 7
            if not 1 <= field <= 14:
                break
            if wire == 2:
                n, j = varint(data, j)
                j += n
            elif wire == 0:
                _, j = varint(data, j)
            else:
                break
        except IndexError:
            break
        if j > len(data):
            break
        i = j
    return data[start:i]


def main():
    data = open(sys.argv[1], "rb").read()
    out = sys.argv[2]
    for name in FILES:
        key = name.encode()
        found = b""
        for m in re.finditer(re.escape(b"\n" + bytes([len(key)]) + key), data):
            d = descriptor_at(data, m.start())
            if len(d) > len(found):
                found = d
        if len(found) < 100:
            sys.exit(f"{name}: no descriptor found")
        path = os.path.join(out, name.replace("/", "_") + ".pb")
        open(path, "wb").write(found)
        print(name, len(found), "bytes")


main()
