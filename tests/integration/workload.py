# Allocation-heavy, deterministic Python workload for run-python.sh.
# Everything printed must depend only on the computation, never on addresses,
# hash randomisation or timing.
import collections
import gc
import hashlib
import json
import random
import re
import sys
import zlib

rng = random.Random(12345)


def digest(obj):
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


# 1. Dicts: build, mutate, delete, rebuild (hash-table growth and shrink).
d = {}
for i in range(200000):
    d["key-%d" % i] = i * 3
for i in range(0, 200000, 3):
    del d["key-%d" % i]
for i in range(50000):
    d[(i, str(i))] = [i] * (i % 7)
total = 0
for k, v in d.items():
    total += v if isinstance(v, int) else len(v)
print("dict", len(d), total)

# 2. Lists: append/pop/insert/slice/sort of mixed sizes.
lst = []
for i in range(120000):
    lst.append(rng.randrange(1 << 30))
    if i % 5 == 0:
        lst.pop(rng.randrange(len(lst)))
lst.sort()
chunks = [lst[i:i + 1000] for i in range(0, len(lst), 1000)]
print("list", len(lst), sum(lst) % 1000003, len(chunks), chunks[7][:3])
nested = [[j for j in range(i % 50)] for i in range(20000)]
print("nested", sum(map(len, nested)), sum(sum(x) for x in nested))

# 3. Strings: concatenation, join, split, replace, formatting, bytes.
words = ["".join(chr(97 + rng.randrange(26)) for _ in range(rng.randrange(1, 12)))
         for _ in range(100000)]
text = " ".join(words)
s = ""
for w in words[:20000]:
    s += w.upper()
print("str", len(text), len(s), hashlib.md5(text.encode()).hexdigest())
counts = collections.Counter(text.split())
print("counter", len(counts), counts.most_common(5))
t2 = re.sub(r"([aeiou])([a-z])", r"\2\1", text)
print("regex", len(re.findall(r"\b[a-z]{5}\b", t2)), zlib.crc32(t2.encode()))
big = "x" * (8 << 20)
big = big.replace("x", "yz")
print("bigstr", len(big), big[:4], big[-4:])
del big

# 4. JSON round trip of a nested structure.
doc = {
    "items": [
        {"id": i, "name": "item%05d" % i, "tags": ["t%d" % (i % 13), "u%d" % (i % 7)],
         "score": (i * 7919) % 1000 / 8.0, "attrs": {"a": i % 3 == 0, "b": None}}
        for i in range(20000)
    ],
    "meta": {"version": 3, "title": "h\u00e4kmem \u2603 test"},
}
enc = json.dumps(doc, sort_keys=True)
dec = json.loads(enc)
assert dec == doc
enc2 = json.dumps(dec, indent=1, sort_keys=True, ensure_ascii=False)
print("json", len(enc), len(enc2), digest(dec["items"][-100:]), dec["meta"]["title"])

# 5. Object churn: many small class instances, cycles, collection.
class Node:
    __slots__ = ("val", "next", "kids")

    def __init__(self, val):
        self.val = val
        self.next = None
        self.kids = []


class Fat:
    def __init__(self, i):
        self.i = i
        self.buf = bytearray(i % 4096)
        self.me = self  # cycle, freed only by the GC


# Drop the big structures above so the collections below stay cheap.
del d, lst, chunks, nested, words, text, s, counts, t2, doc, enc, dec, enc2
gc.collect()

acc = 0
for rnd in range(8):
    head = None
    for i in range(20000):
        n = Node(i + rnd)
        n.next = head
        if i % 10 == 0:
            n.kids = [Node(j) for j in range(5)]
        head = n
    fats = [Fat(i * (rnd + 1)) for i in range(2000)]
    while head is not None:
        acc += head.val + len(head.kids)
        head = head.next
    acc += sum(len(f.buf) for f in fats)
    del fats
    if rnd % 2:
        gc.collect()
print("churn", acc)

# 6. bytes/bytearray growth (realloc) and compression.
ba = bytearray()
for i in range(200000):
    ba += i.to_bytes(4, "little")
comp = zlib.compress(bytes(ba), 6)
print("bytes", len(ba), len(comp), zlib.crc32(zlib.decompress(comp)))

# 7. Sets and frozensets (printed sorted: iteration order is not output).
st = set()
for i in range(150000):
    st.add((i * 2654435761) % 1000003)
st2 = frozenset(x for x in st if x % 3)
print("set", len(st), len(st2), sorted(st2)[:5], sum(st2) % 999983)

# 8. Big ints and decimal-ish arithmetic.
f = 1
for i in range(1, 1200):
    f *= i
print("bigint", len(str(f)), str(f)[:20], f % 1000000007)

print("done", sys.version_info[0])
