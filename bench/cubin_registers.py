#!/usr/bin/env python3
"""Registers, stack frame and SASS size of every cubin in a kvtune cache (no GPU, no CUDA binutils).

    kvtune-tune --shapes FILE --compile-only --arch sm_90 --cache C.sqlite
    bench/cubin_registers.py C.sqlite > registers.tsv

Prints one tab-separated row per kernel: registers, frame bytes (spills), SASS instructions (the
.text section's size / 16), the demangled name. Registers come from the cubin's EIATTR_REGCOUNT
attribute in its .nv.info section (what cuobjdump --dump-resource-usage reports).
"""
import sqlite3
import struct
import subprocess
import sys

EIATTR_REGCOUNT, EIATTR_FRAME_SIZE = 0x2F, 0x11
EIFMT_NVAL, EIFMT_SVAL = 1, 4


def resources(image):
    """(registers, frame bytes, instructions) of a one-kernel cubin (64-bit ELF)."""
    shoff = struct.unpack_from("<Q", image, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    regs = frame = instructions = 0
    for name_at, _type, _flags, _addr, offset, size, _link, _info, _align, _entsize in sections:
        name = image[names + name_at:image.index(b"\0", names + name_at)].decode()
        if name == ".nv.info":
            at, end = offset, offset + size
            while at < end:
                fmt, attr = image[at], image[at + 1]
                if fmt == EIFMT_SVAL:
                    length = struct.unpack_from("<H", image, at + 2)[0]
                    if attr == EIATTR_REGCOUNT:
                        regs = struct.unpack_from("<I", image, at + 8)[0]
                    elif attr == EIATTR_FRAME_SIZE:
                        frame = struct.unpack_from("<I", image, at + 8)[0]
                    at += 4 + length
                else:
                    at += 2 if fmt == EIFMT_NVAL else 4
        elif name.startswith(".text."):
            instructions = size // 16
    return regs, frame, instructions


def main():
    db = sqlite3.connect(sys.argv[1])
    rows = [(name, *resources(bytes(image))) for name, image in db.execute("SELECT lowered_name, image FROM binaries")]
    demangled = subprocess.run(["c++filt"], input="\n".join(r[0] for r in rows), capture_output=True,
                               text=True, check=True).stdout.split("\n")
    print("registers\tframe_bytes\tinstructions\tkernel")
    for (_, regs, frame, instructions), name in zip(rows, demangled):
        print(f"{regs}\t{frame}\t{instructions}\t{name}")


if __name__ == "__main__":
    main()
