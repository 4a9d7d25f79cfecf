#!/usr/bin/env bash
# hakmem as a user installs and links it: `meson install --destdir` into a scratch tree, then a
# program built through hakmem.pc (found by PKG_CONFIG_PATH alone: its paths are relative to
# it) and one linked with libhakmem.a and the libraries `pkg-config --static` names; the same
# for a C++ program, whose operator new and delete must be hakmem's either way.
# Usage: check-install.sh BUILD_DIR C_PROGRAM_SOURCE CXX_PROGRAM_SOURCE
set -u
build=$1 src=$2 cxx_src=$3
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
# C++: Debian's linker runs --as-needed, so a library that defined no operator new would be
# dropped from the link (no NEEDED entry) and the program would run on glibc.
command -v g++ > /dev/null || fail "g++ not installed (scripts/deps.sh test installs it)"
printf 'int main() { int *p = new int(1); int r = *p - 1; delete p; return r; }\n' > "$tmp/plain.cc"
g++ -o "$tmp/plain" "$tmp/plain.cc" $cflags $libs 2> "$tmp/err" || fail "g++ plain.cc through hakmem.pc: $(cat "$tmp/err")"
readelf -d "$tmp/plain" | grep -q 'NEEDED.*libhakmem\.so' \
  || fail "a C++ program that calls nothing of hakmem's but new and delete, through hakmem.pc: no NEEDED libhakmem.so"
g++ -o "$tmp/cxx-shared" "$cxx_src" $cflags $libs 2> "$tmp/err" || fail "g++ through hakmem.pc: $(cat "$tmp/err")"
readelf -d "$tmp/cxx-shared" | grep -q 'NEEDED.*libhakmem\.so' || fail "g++ through hakmem.pc: no NEEDED libhakmem.so"
out=$(LD_LIBRARY_PATH=$libdir "$tmp/cxx-shared" 2>&1) && [ "$out" = "cxx ok" ] || fail "the C++ program through hakmem.pc: $out"
g++ -o "$tmp/cxx-static" "$cxx_src" $cflags "$libdir/libhakmem.a" $static 2> "$tmp/err" \
  || fail "g++ with libhakmem.a: $(cat "$tmp/err")"
nm "$tmp/cxx-static" | grep -q ' T _Znwm$' || fail "g++ with libhakmem.a: operator new is not hakmem's"
out=$("$tmp/cxx-static" 2>&1) && [ "$out" = "cxx ok" ] || fail "the C++ program with libhakmem.a: $out"
echo "install: hakmem.pc and libhakmem.a link working C and C++ programs ($cflags $libs; archive + $static)"
