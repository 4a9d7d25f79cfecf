#!/usr/bin/env python3
"""Writes hakmem(1) from docs/hakmem.1.in: the version, and the SETTINGS keys as
`hakmem config list --man` prints them from src/policy/keys.def."""
import subprocess
import sys

template, tool, version, out = sys.argv[1:]
keys = subprocess.run([tool, "config", "list", "--man"], check=True, capture_output=True, text=True).stdout
with open(template, encoding="utf-8") as f:
    text = f.read()
text = text.replace("@VERSION@", version).replace("@KEYS@\n", keys)
with open(out, "w", encoding="utf-8") as f:
    f.write(text)
