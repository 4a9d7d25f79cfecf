#!/usr/bin/env bash
# The `hakmem` command as users of everyday tools expect it (issue 28, items 1-4): help and
# version, exit statuses, one message format, and a policy check that judges its FILE alone.
# Usage: check-tool.sh TOOL LIBHAKMEM SRCDIR VERSION
source "$(dirname "$0")/checks.sh" "$@"
# Runs the tool: stdout in $tmp/out, stderr in $tmp/err, status in $rc.
t() { "$tool" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }
# Every line the tool writes on stderr has the one format.
format_ok() {
  if grep -vE '^hakmem: ([^ ]+:[0-9]+: |[^ ]+: )?(error|warning): ' "$tmp/err" | grep -q .; then
    fail "$1: a message not as 'hakmem: [FILE:LINE: ]error: message':"; sed 's/^/    /' "$tmp/err"
  fi
}

# --- item 4: version, help, unknown commands, exit statuses, usage, list alignment
for v in --version -V; do
  t $v
  [ $rc -eq 0 ] && grep -qx "hakmem $version" "$tmp/out" || fail "hakmem $v: rc $rc, '$(cat "$tmp/out")'"
done
readelf -d "$lib" | grep -q "SONAME.*\[libhakmem.so.${version%%.*}\]" || fail "soname is not libhakmem.so.${version%%.*}"
for cmd in "" config "config check" "config show" "config list" run measure ab compare help version; do
  t $cmd --help
  [ $rc -eq 0 ] && [ -s "$tmp/out" ] || fail "hakmem $cmd --help: rc $rc"
done
t help run
[ $rc -eq 0 ] && grep -q 'hakmem run' "$tmp/out" || fail "hakmem help run: rc $rc"
t frobnicate
[ $rc -eq 2 ] && grep -q "unknown command 'frobnicate'" "$tmp/err" || fail "hakmem frobnicate: rc $rc, '$(cat "$tmp/err")'"
format_ok frobnicate
t config frob
[ $rc -eq 2 ] && grep -q "unknown subcommand 'frob'" "$tmp/err" || fail "hakmem config frob: rc $rc"
format_ok "config frob"
t --help
for opt in '--timeout' '--allocators' '--bench-args' '--no-pgo' '--pgo-build-dir' '--csv' '--config=FILE' '--version' \
           '--metric' '--allow-output-diff' '--suite' '--apps' '--scale' '--port' 'measure [--fd N]'; do
  grep -q -- "$opt" "$tmp/out" || fail "usage lacks $opt"
done
printf 'echo hi\n' >"$tmp/noexec"; chmod -x "$tmp/noexec"
t run -- "$tmp/noexec"
[ $rc -eq 126 ] || fail "run of a non-executable file: rc $rc (126 expected)"
format_ok "run noexec"
t run -- "$tmp/no-such-program"
[ $rc -eq 127 ] || fail "run of a missing program: rc $rc (127 expected)"
format_ok "run missing"
t run --bogus -- true
[ $rc -eq 2 ] || fail "run --bogus: rc $rc"
format_ok "run --bogus"
t config list
col=$(head -1 "$tmp/out" | awk '{ print index($0, "VARIABLE") }')
bad=$(awk -v c="$col" 'NR > 1 && substr($0, c, 7) != "HAKMEM_" { print NR": "$0 }' "$tmp/out" | head -3)
[ -z "$bad" ] || fail "config list columns not aligned at $col: $bad"
t config list --man
grep -q '^\.TP' "$tmp/out" && grep -q 'HAKMEM_STATS' "$tmp/out" || fail "config list --man"

# --- item 1: run passes an absolute config path; a child that changes directory keeps it
cd "$src"
t run --config=config/lean.ini -- sh -c 'cd / && exec env'
[ $rc -eq 0 ] || fail "run --config=FILE: rc $rc"
grep -qx "HAKMEM_CONFIG=$src/config/lean.ini" "$tmp/out" || fail "run passed $(grep HAKMEM_CONFIG= "$tmp/out")"
t run --config config/lean.ini -- sh -c 'cd / && sh -c true'
[ $rc -eq 0 ] && ! [ -s "$tmp/err" ] || fail "run --config FILE with cd: rc $rc, '$(cat "$tmp/err")'"
HAKMEM_CONFIG=config/lean.ini t run -- sh -c 'cd / && exec env'
grep -qx "HAKMEM_CONFIG=$src/config/lean.ini" "$tmp/out" || fail "run left HAKMEM_CONFIG relative"
t run --config config/no-such.ini -- true
[ $rc -eq 1 ] || fail "run --config MISSING: rc $rc"
format_ok "run --config MISSING"
HAKMEM_CONFIG=config/no-such.ini t run -- sh -c 'cd / && exec env'
grep -qx "HAKMEM_CONFIG=$src/config/no-such.ini" "$tmp/out" || fail "an inherited missing HAKMEM_CONFIG: $(grep HAKMEM_CONFIG= "$tmp/out")"
# One rule for a file given with --config that the library could not load: a folder, a binary
# file, one with an error refuse to run the program as a missing one does (the library, given
# the same file, says the same line and runs on the defaults).
printf '[slots]\ncapacity = lots\n' > "$tmp/bad.ini"
for f in "$tmp" "$(type -P true)" "$tmp/bad.ini"; do
  t run --config "$f" -- sh -c 'echo ran'
  [ $rc -eq 1 ] && ! grep -q ran "$tmp/out" && grep -q "^hakmem: $f.*error" "$tmp/err" \
    || fail "run --config $f: rc $rc, out '$(cat "$tmp/out")', err '$(cat "$tmp/err")'"
  (preload_export "$lib"; HAKMEM_CONFIG=$f exec sh -c 'echo ran') > "$tmp/out" 2> "$tmp/err"
  grep -q ran "$tmp/out" && grep -q "^hakmem: $f.*error" "$tmp/err" \
    || fail "the library given $f: out '$(cat "$tmp/out")', err '$(cat "$tmp/err")'"
done
cd "$tmp"

# --- item 2: the tool applies no HAKMEM_* to itself; `config check FILE` judges FILE alone
printf '[slots]\ncapacity = 8\n' >good.ini
printf '[slots]\ncapacity = lots\n' >bad.ini
HAKMEM_SLOTZ=1 t config show
[ "$(grep -c HAKMEM_SLOTZ "$tmp/err")" -eq 1 ] || fail "config show: HAKMEM_SLOTZ reported $(grep -c HAKMEM_SLOTZ "$tmp/err") times"
format_ok "config show"
HAKMEM_CONFIG=bad.ini t config check good.ini
[ $rc -eq 0 ] && ! grep -q bad.ini "$tmp/err" || fail "config check good.ini under HAKMEM_CONFIG=bad.ini: rc $rc, '$(cat "$tmp/err")'"
HAKMEM_SLOTZ=1 HAKMEM_SLOTS_CAPACITY=3 t config check good.ini
[ $rc -eq 0 ] && ! [ -s "$tmp/err" ] || fail "config check good.ini under HAKMEM_SLOTZ=1: rc $rc, '$(cat "$tmp/err")'"
grep -q '^slots.capacity *= 8 ' "$tmp/out" || fail "config check applied the environment: $(grep capacity "$tmp/out")"
t config check bad.ini
[ $rc -eq 1 ] && grep -q '^hakmem: bad.ini:2: error: ' "$tmp/err" || fail "config check bad.ini: rc $rc, '$(cat "$tmp/err")'"
format_ok "config check bad.ini"

# --- item 3: a key set twice, a byte order mark, nothing after "file not loaded", Phase 90
printf '[slots]\ncapacity = 8\ncapacity = 9\n' >twice.ini
t config check twice.ini
[ $rc -eq 0 ] && grep -q '^slots.capacity *= 9 ' "$tmp/out" && grep -q 'twice.ini:3: warning: ' "$tmp/err" \
  || fail "key set twice: rc $rc, '$(cat "$tmp/err")'"
printf '\xef\xbb\xbf[slots]\ncapacity = 7\n' >bom.ini
t config check bom.ini
[ $rc -eq 0 ] && grep -q '^slots.capacity *= 7 ' "$tmp/out" || fail "UTF-8 BOM: rc $rc, '$(cat "$tmp/err")'"
printf '[slots]\nthis is not ini\n[broken\nnor = this\n[zzz]\n' >syntax.ini
t config check syntax.ini
[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'file not loaded' "$tmp/err" \
  || fail "errors after 'file not loaded': $(cat "$tmp/err")"
t config list
cp "$tmp/out" "$tmp/out_list"
list90=$(awk 'NR == 1 { c = index($0, "DEFAULT") } $1 == "[phases]" && $2 == "phase90" { split(substr($0, c), f, " "); print f[1] }' "$tmp/out")
t config show
show90=$(awk '$1 == "phases.phase90" { print $3 }' "$tmp/out")
doc90=$(awk -F'|' '/^\| INI \|/ { for (i = 1; i <= NF; i++) if ($i ~ /^ *default *$/) c = i }
                 index($0, "`[phases] phase90`") { gsub(/[ `]/, "", $c); print $c }' "$src/docs/POLICY.md")
# Compiled out (the default build, which POLICY.md describes) it is off in all three; a
# -Dphase90=true build runs it on, as its row says.
in90=$(awk 'NR == 1 { c = index($0, "COMPILED") } $1 == "[phases]" && $2 == "phase90" { split(substr($0, c), f, " "); print f[1] }' "$tmp/out_list" 2>/dev/null)
if [ "$in90" = yes ]; then
  [ "$list90" = on ] && [ "$show90" = on ] && [ "$doc90" = off ] \
    || fail "Phase 90 compiled in: list '$list90', show '$show90' (want on), POLICY.md '$doc90' (the default build's off)"
else
  [ "$list90" = off ] && [ "$show90" = off ] && [ "$doc90" = off ] \
    || fail "Phase 90's default: list '$list90', show '$show90', POLICY.md '$doc90'"
fi

# --- item 6: every setting through secure_getenv
if grep -rnE '(^|[^_a-z])getenv\(' "$src/src" | grep -q .; then
  fail "plain getenv in src/: $(grep -rnE '(^|[^_a-z])getenv\(' "$src/src")"
fi

# --- item 5: callgrind-counts.sh finds the peers in the multiarch folder
if grep -n 'x86_64-linux-gnu' "$src/scripts/callgrind-counts.sh" | grep -v '^[0-9]*: *#' | grep -q .; then
  fail "scripts/callgrind-counts.sh hard-codes /usr/lib/x86_64-linux-gnu"
fi

checks_done "hakmem tool"
