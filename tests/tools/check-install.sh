#!/usr/bin/env bash
# hakmem as a user installs and links it: `meson install --destdir` into a scratch tree, then a
# program built through hakmem.pc (found by PKG_CONFIG_PATH alone: its paths are relative to
# it) and one linked with libhakmem.a and the libraries `pkg-config --static` names.
# Usage: check-install.sh BUILD_DIR PROGRAM_SOURCE
set -u
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet > "$tmp/install.log" 2>&1 \
  || fail "meson install --destdir: $(tail -5 "$tmp/install.log")"
pc=$(find "$tmp/root" -name hakmem.pc | head -1)
[ -n "$pc" ] || fail "no hakmem.pc installed"
export PKG_CONFIG_PATH=${pc%/*}
cflags=$(pkg-config --cflags hakmem) && libs=$(pkg-config --libs hakmem) || fail "pkg-config hakmem"
inc=$(pkg-config --variable=includedir hakmem)
[ -f "$inc/hakmem.h" ] || fail "pkg-config --cflags names $cflags, which holds no hakmem.h"
libdir=$(pkg-config --variable=libdir hakmem)
cc -o "$tmp/shared" "$src" $cflags $libs 2> "$tmp/err" || fail "cc through hakmem.pc: $(cat "$tmp/err")"
out=$(LD_LIBRARY_PATH=$libdir "$tmp/shared" 2>&1) && [ "$out" = "hakmem $(pkg-config --modversion hakmem) usable ok" ] \
  || fail "the program linked through hakmem.pc: $out"
# The archive needs what hakmem.pc lists as private: -liniparser -lpthread.
static=$(pkg-config --static --libs-only-l hakmem | sed 's/-lhakmem//')
cc -o "$tmp/static" "$src" $cflags "$libdir/libhakmem.a" $static 2> "$tmp/err" \
  || fail "cc with libhakmem.a $static: $(cat "$tmp/err")"
out=$("$tmp/static" 2>&1) && [ "$out" = "hakmem $(pkg-config --modversion hakmem) usable ok" ] \
  || fail "the program linked with libhakmem.a: $out"
nm "$tmp/static" | grep -q ' T hak_malloc$' || fail "libhakmem.a's hak_malloc not in the static program"
echo "install: hakmem.pc and libhakmem.a link a working program ($cflags $libs; archive + $static)"
