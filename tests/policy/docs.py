#!/usr/bin/env python3
"""The tables in docs/POLICY.md and README.md are generated, never edited by hand:
POLICY.md's key table is `hakmem config list --markdown` (src/policy/keys.def), README's
build-options table is meson_options.txt with each option's runtime switch from the same
list.  Without --update, fails on any difference (the policy-docs test); with it, rewrites
both tables: `python3 tests/policy/docs.py --update build/tools/hakmem .`"""
import re
import subprocess
import sys
from pathlib import Path


def key_table(tool):
    return subprocess.run([tool, "config", "list", "--markdown"], check=True, capture_output=True,
                          text=True).stdout.splitlines()


def meson_defaults(root):
    """Each Meson option's default, from meson_options.txt: {name: value as written}."""
    text = (root / "meson_options.txt").read_text()
    return {m.group(1): m.group(2).strip() for m in
            re.finditer(r"option\('([^']+)',\s*type:\s*'\w+',\s*value:\s*([^,]+),", text)}


def row_defaults(root):
    """Each key's default as keys.def writes it, by its INI name: {'[phases] phase90': 'on'}.
    The columns before the help text hold no comma (keys.def says so; meson.build relies on it)."""
    out = {}
    for row in (root / "src" / "policy" / "keys.def").read_text().split("\nPOLICY_KEY(")[1:]:
        cols = [c.strip().strip('"') for c in row.split(",")]
        out[f"[{cols[3]}] {cols[4]}"] = cols[9]
    return out


def as_default_build(root, keys):
    """The key table as the default build prints it.  A build set up with other Meson options
    (-Dobserve=true, -Dphase93=false) prints its own 'compiled in' column, and 'off' as the
    default of a switch it compiles out; the docs describe the default build wherever the test
    runs, so those two cells are set from meson_options.txt and keys.def."""
    options, defaults = meson_defaults(root), row_defaults(root)
    out = keys[:2]
    for row in keys[2:]:
        cols = row.strip("|").split(" | ")
        ini, meson = cols[0].strip().strip("`"), cols[5].strip()
        if meson in options:
            compiled = options[meson] == "true"
            cols[6] = "yes" if compiled else "no"
            if cols[3].strip() == "on/off":
                cols[4] = f"`{defaults[ini] if compiled else 'off'}`"
        out.append("|" + " | ".join(cols) + "|")
    return out


def options_table(root, keys):
    switch = {}     # Meson option -> the INI key it compiles in (the first, as keys.def orders them)
    for row in keys[2:]:
        cols = [c.strip() for c in row.strip("|").split(" | ")]
        if cols[5] != "-":
            switch.setdefault(cols[5], cols[0])
    text = (root / "meson_options.txt").read_text()
    lines = ["| option | default | effect |", "|---|---|---|"]
    for m in re.finditer(r"option\('([^']+)',\s*type:\s*'(\w+)',\s*value:\s*([^,]+),\s*description:\s*'([^']*)'\)", text):
        name, _, value, desc = m.groups()
        extra = f"; runtime switch {switch[name]}" if name in switch else ""
        lines.append(f"| `{name}` | {value.strip()} | {desc}{extra} |")
    return lines


def replace_table(text, new):
    """The markdown table whose header starts with the same column as `new`'s, replaced by it."""
    lines = text.split("\n")
    first = new[0].split(" | ")[0] + " | "
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[:start] + new + lines[end:])


def main():
    update = "--update" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--update"]
    tool, root = args[0], Path(args[1])
    keys = as_default_build(root, key_table(tool))
    wrong = 0
    for doc, new in ((root / "docs" / "POLICY.md", keys), (root / "README.md", options_table(root, keys))):
        text = doc.read_text()
        try:
            want = replace_table(text, new)
        except StopIteration:
            print(f"{doc}: no table headed {new[0]}")
            return 1
        if want == text:
            print(f"{doc}: table matches ({len(new) - 2} rows)")
        elif update:
            doc.write_text(want)
            print(f"{doc}: table rewritten")
        else:
            print(f"{doc}: table differs from the generated one; run: python3 {sys.argv[0]} --update {tool} {root}")
            wrong = 1
    return wrong


if __name__ == "__main__":
    sys.exit(main())
