#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_api (tests/fuzz/corpus/api/*.bin) in its input format.

Each op is: opcode byte, slot byte, then the op's arguments (see fuzz_api.c).  Run from
anywhere: python3 tests/fuzz/gen-api-seeds.py [OUTDIR]."""
import os
import random
import sys

(MALLOC, CALLOC, REALLOC, FREE, POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN, USABLE, VALLOC,
 REALLOCARRAY, IMPOSSIBLE, CHECK_ALL) = range(12)

EDGE = [0, 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 127, 128, 129, 255, 256, 257,
        511, 512, 513, 1023, 1024, 1025, 1279, 1280, 1281, 1536, 1792, 2047, 2048, 2049, 3072,
        4095, 4096, 4097, 8192, 16383, 16384, 65535, 65536, 65537, 131072, 196608,
        262143, 262144, 262145, 266240, 524288, 1048575, 1048576, 1048577, 2097152, 4194304]


def size(n):
    """The shortest encoding of get_size() that yields n (or close to it)."""
    if n in EDGE:
        return bytes([208, EDGE.index(n)])
    if n < 256:
        return bytes([0, n])
    if n <= 1024:
        return bytes([96, n & 255, n >> 8])
    if n <= 1024 + 65535 * 4:
        v = (n - 1024) // 4
        return bytes([160, v & 255, v >> 8])
    v = (n - (256 << 10)) % (4 << 20)
    return bytes([240, v & 255, (v >> 8) & 255, v >> 16])


def op(code, slot, *args):
    return bytes([code, slot]) + b''.join(a if isinstance(a, bytes) else bytes([a]) for a in args)


def seeds():
    s = {}
    s['malloc-free'] = b''.join(
        [op(MALLOC, i, size(n)) for i, n in enumerate([0, 1, 8, 16, 24, 100, 200, 500, 1000, 1024])] +
        [op(FREE, i) for i in (1, 3, 5, 7, 9)] +
        [op(MALLOC, i, size(n)) for i, n in enumerate([40, 300, 2000, 70000, 262144])] +
        [op(FREE, 40), op(CHECK_ALL, 0)])
    s['calloc'] = b''.join(
        [op(CALLOC, i, nb, size(n)) for i, (nb, n) in enumerate(
            [(1, 16), (4, 100), (16, 4096), (0, 10), (3, 300000), (8, 1 << 20), (255, 24), (2, 0)])] +
        [op(FREE, 2), op(CALLOC, 2, 16, size(4096)), op(CHECK_ALL, 0)])
    s['realloc-grow-shrink'] = b''.join(
        [op(MALLOC, 0, size(10))] +
        [op(REALLOC, 0, size(n)) for n in [20, 100, 1024, 1025, 5000, 100000, 262144, 262145,
                                           1 << 20, 3 << 20, 2 << 20, 300000, 1000, 8, 0]] +
        [op(REALLOC, 1, size(50)), op(REALLOC, 1, size(40)), op(REALLOC, 1, size(0))])
    s['posix-memalign'] = b''.join(
        [op(POSIX_MEMALIGN, i, a, size(n)) for i, (a, n) in enumerate(
            [(0, 1), (1, 16), (2, 100), (3, 64), (5, 1000), (9, 10), (12, 5000), (13, 300000),
             (16, 100), (18, 1 << 20), (0xE0, 10), (0xE3, 10), (0xE8, 10), (0xEA, 10), (0xEB, 1)])])
    s['aligned-alloc'] = b''.join(
        [op(ALIGNED_ALLOC, i, a, size(n)) for i, (a, n) in enumerate(
            [(0, 1), (3, 3), (4, 16), (6, 64), (10, 1024), (12, 4096), (16, 70000), (17, 1),
             (21, 300000), (0xF0, 10), (0xF5, 100)])])
    s['memalign'] = b''.join(
        [op(MEMALIGN, i, a & 255, a >> 8, size(n)) for i, (a, n) in enumerate(
            [(0, 5), (1, 5), (3, 40), (24, 100), (48, 1000), (100, 10), (1000, 3000), (4096, 4096),
             (4097, 50000), (4999, 1 << 20)])])
    s['usable-slack'] = b''.join(
        [op(MALLOC, 0, size(100)), op(USABLE, 0), op(REALLOC, 0, size(120)), op(USABLE, 0),
         op(MALLOC, 1, size(270000)), op(USABLE, 1), op(REALLOC, 1, size(600000)), op(USABLE, 1),
         op(USABLE, 2), op(MALLOC, 3, size(1025)), op(USABLE, 3), op(CHECK_ALL, 0)])
    s['valloc-pvalloc'] = b''.join(
        [op(VALLOC, i, pv, size(n)) for i, (pv, n) in enumerate(
            [(0, 0), (0, 1), (0, 4096), (0, 5000), (1, 0), (1, 1), (1, 4097), (1, 300000)])])
    s['reallocarray'] = b''.join(
        [op(REALLOCARRAY, 0, 1, size(64)), op(REALLOCARRAY, 0, 4, size(4096)),
         op(REALLOCARRAY, 0, 8, size(1 << 20)), op(REALLOCARRAY, 0, 255, size(10)),
         op(REALLOCARRAY, 0, 2, size(100)), op(REALLOCARRAY, 0, 0, size(100)),
         op(REALLOCARRAY, 1, 3, size(30))])
    s['impossible'] = b''.join(
        [op(MALLOC, 0, size(100)), op(MALLOC, 1, size(500000))] +
        [op(IMPOSSIBLE, slot, h, which, extra) for slot in (0, 1, 2) for which in range(9)
         for h, extra in ((which, 1), ((which * 3 + 5) % 10, 0))])
    s['large-cache'] = b''.join(
        [op(MALLOC, i, size((300 + 50 * i) << 10)) for i in range(8)] +
        [op(FREE, i) for i in range(8)] +
        [op(CALLOC, i, 1, size((310 + 50 * i) << 10)) for i in range(8)] +
        [op(REALLOC, i, size((600 + 100 * i) << 10)) for i in range(8)] +
        [op(FREE, i) for i in range(0, 8, 2)] +
        [op(ALIGNED_ALLOC, 0, 16, size(270000)), op(CALLOC, 2, 1, size(280000)), op(CHECK_ALL, 0)])
    s['edge-sizes'] = b''.join(
        [op(MALLOC, i, bytes([208, i])) for i in range(len(EDGE) - 4)] + [op(CHECK_ALL, 0)] +
        [op(REALLOC, i, bytes([208, (i * 7) % len(EDGE)])) for i in range(len(EDGE) - 4)])
    rnd = random.Random(1234)
    mixed = []
    for _ in range(400):
        code = rnd.choice([MALLOC, MALLOC, FREE, REALLOC, CALLOC, USABLE, MEMALIGN])
        slot = rnd.randrange(64)
        n = rnd.choice([rnd.randrange(256), rnd.randrange(1025), rnd.randrange(1024, 262144)])
        if code in (MALLOC, REALLOC):
            mixed.append(op(code, slot, size(n)))
        elif code == CALLOC:
            mixed.append(op(code, slot, rnd.randrange(8), size(n)))
        elif code == MEMALIGN:
            mixed.append(op(code, slot, rnd.randrange(256), 0, size(n)))
        else:
            mixed.append(op(code, slot))
    s['mixed-64-slots'] = b''.join(mixed) + op(CHECK_ALL, 0)
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus', 'api')
    os.makedirs(out, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(out, name + '.bin'), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
