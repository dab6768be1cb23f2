"""A GGUF file's metadata, read from its header alone: `architecture` reads the keys in order
up to `general.architecture`, where `gguf.GGUFReader` parses every key first (Gemma's
262k-token vocabulary: ten seconds). The budget tool asks it which MLP layout a .gguf has
before any weights load."""

from __future__ import annotations

import struct
from pathlib import Path

#: GGUF metadata value types (the format's numbering) → struct codes of the fixed-size ones;
#: 8 is a string, 9 an array.
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q",
                 11: "q", 12: "d"}


def architecture(path: str | Path) -> str:
    """A GGUF file's `general.architecture` ("llama", "gemma3", …), read from its header
    alone: the metadata keys are read in order up to that one, where `gguf.GGUFReader` parses
    every key first. "?" where the file has none."""

    def read(f, fmt):
        fmt = "<" + fmt
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

    def string(f):
        return f.read(read(f, "Q")).decode("utf-8", errors="replace")

    def skip(f, kind):
        if kind in _GGUF_SCALARS:
            f.seek(struct.calcsize("<" + _GGUF_SCALARS[kind]), 1)
        elif kind == 8:
            f.seek(read(f, "Q"), 1)
        elif kind == 9:
            inner, n = read(f, "I"), read(f, "Q")
            for _ in range(n):
                skip(f, inner)
        else:
            raise ValueError(f"{path}: unknown GGUF value type {kind}")

    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version = read(f, "I")
        count = "Q" if version >= 2 else "I"
        read(f, count)  # tensors
        for _ in range(read(f, count)):
            key, kind = string(f), read(f, "I")
            if key == "general.architecture" and kind == 8:
                return string(f)
            skip(f, kind)
    return "?"
