#!/usr/bin/env python3
"""Holds src/ to its layers: a file includes only its own folder's headers or the contract
header of a lower folder, and no object file calls a function defined in a higher folder."""
import os
import re
import subprocess
import sys

# The layer order, bottom-up: the one place it is written (docs/ARCHITECTURE.md explains it).
LAYERS = ["common", "os", "class", "policy", "stats", "prof", "route", "region", "arena", "large",
          "slots", "span", "cold", "api"]
# What a higher folder may include of each one: its contract header.
CONTRACT = {name: f"{name}/{name}.h" for name in LAYERS}
RANK = {name: i for i, name in enumerate(LAYERS)}


def folder_of(path, src):
    rel = os.path.relpath(path, src)
    if rel.startswith(os.pardir) or os.sep not in rel:
        return None         # outside src/ (the public header) or at its top (config.h)
    return rel.split(os.sep)[0]


def check_includes(src):
    errors = []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".c", ".h", ".def")):
                continue
            path = os.path.join(root, f)
            mine = folder_of(path, src)
            if mine is None:
                continue
            if mine not in RANK:
                errors.append(f"{os.path.relpath(path, src)}: folder '{mine}' is not in LAYERS")
                continue
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = os.path.normpath(os.path.join(root, m.group(1)))
                theirs = folder_of(target, src)
                where = f"{os.path.relpath(path, src)}:{n}"
                if theirs is None or theirs == mine:
                    continue        # config.h, the public header, or its own folder
                if theirs not in RANK:
                    errors.append(f"{where}: includes {m.group(1)} of unknown folder '{theirs}'")
                elif RANK[theirs] > RANK[mine]:
                    errors.append(f"{where}: {mine}/ (layer {RANK[mine]}) includes {m.group(1)} "
                                  f"of the higher {theirs}/ (layer {RANK[theirs]})")
                elif os.path.relpath(target, src) != CONTRACT[theirs]:
                    errors.append(f"{where}: includes {m.group(1)}; outside {theirs}/ only "
                                  f"{CONTRACT[theirs]} may be included")
    return errors


def check_calls(archive):
    """Every undefined symbol of an object resolved to the folder that defines it."""
    out = subprocess.run(["nm", "-A", "--no-sort", archive], capture_output=True, text=True,
                         check=True).stdout
    defined, used = {}, []
    for line in out.splitlines():
        m = re.match(r"(.*?):\s*([0-9a-f]*)\s+([A-Za-z])\s+(\S+)$", line)
        if not m:
            continue
        member, _, kind, sym = m.groups()
        fm = re.search(r"src_([a-z]+)_[^/]*\.o$", member)
        if not fm:
            continue
        folder = fm.group(1)
        if kind == "U":
            used.append((folder, os.path.basename(member), sym))
        elif kind.isupper():
            defined[sym] = folder
    errors = []
    if not defined:
        errors.append(f"{archive}: no symbols of src/ objects found (is it the core archive?)")
    for folder, obj, sym in used:
        theirs = defined.get(sym)
        if theirs is None or theirs == folder:
            continue
        if folder not in RANK or theirs not in RANK:
            errors.append(f"{obj}: folder not in LAYERS ({folder} -> {theirs})")
        elif RANK[theirs] > RANK[folder]:
            errors.append(f"{obj}: {folder}/ calls {sym}, defined in the higher {theirs}/")
    return errors


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check-layers.py SRC_DIR CORE_ARCHIVE")
    src, archive = sys.argv[1], sys.argv[2]
    errors = check_includes(src) + check_calls(archive)
    for e in errors:
        print("layers: " + e)
    print(f"layers: {len(LAYERS)} folders, {len(errors)} problem(s)")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
