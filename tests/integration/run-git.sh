#!/bin/bash
# Integration: git under hakmem versus without.  Names and dates are fixed, so
# every object id is deterministic and the outputs must be byte-identical.
# Usage: run-git.sh /path/to/libhakmem.so
# shellcheck source=common.sh disable=SC2317  # scenario functions are called indirectly
. "$(dirname "$0")/common.sh" "$@"

need_prog git /usr/bin/git git
GIT=$PROG
say "using $GIT ($("$GIT" --version 2>/dev/null))"

# No user/system configuration, fixed identities, no pager, no colour.
# shellcheck disable=SC2046  # one word per variable name is intended
unset $(env | sed -n 's/^\(GIT_[A-Za-z_]*\)=.*/\1/p')
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_PAGER=cat PAGER=cat
export GIT_AUTHOR_NAME='A U Thor' GIT_AUTHOR_EMAIL='author@example.com'
export GIT_COMMITTER_NAME='C O Mitter' GIT_COMMITTER_EMAIL='committer@example.com'

check_preloaded "$GIT" --version

# Deterministic content, written identically before the ref and the hak run
# (these helpers themselves run without hakmem).
gen_files() {
    mkdir -p src docs
    seq 1 3000 | awk '{ printf "line %d: %s\n", $1, ($1 * 7919) % 104729 }' > src/data.txt
    printf '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n' > src/main.c
    printf '# Title\n\nSome documentation.\n' > docs/README.md
    printf 'binary\0\1\2\3\377' > blob.bin
}
edit_files() {
    awk 'NR % 97 == 0 { print "changed " NR; next } { print }' src/data.txt > src/data.tmp
    seq 1 50 | awk '{ print "appended", $1 }' >> src/data.tmp
    mv src/data.tmp src/data.txt
    printf '#include <stdio.h>\nint main(void) { puts("hello, world"); return 1; }\n' > src/main.c
    rm docs/README.md
    printf 'new file\n' > docs/NEWS
}

scenario() {
    local g=("$GIT" -c init.defaultBranch=main -c core.autocrlf=false -c gc.auto=0)
    step init "${g[@]}" init -q repo
    (cd "$WORK/repo" && gen_files)
    step add "${g[@]}" -C repo add -A
    step commit1 env GIT_AUTHOR_DATE='2005-04-07T22:13:13 +0200' \
        GIT_COMMITTER_DATE='2005-04-07T22:13:13 +0200' \
        "${g[@]}" -C repo commit -q -m 'first commit'
    (cd "$WORK/repo" && edit_files)
    step status "${g[@]}" -C repo status --porcelain
    step diff-worktree "${g[@]}" -C repo diff
    step add2 "${g[@]}" -C repo add -A
    step commit2 env GIT_AUTHOR_DATE='2006-01-02T03:04:05 -0700' \
        GIT_COMMITTER_DATE='2006-01-02T03:04:05 -0700' \
        "${g[@]}" -C repo commit -q -m 'second commit' -m 'With a body.'
    step log "${g[@]}" -C repo log --format='%H %s'
    step log-full "${g[@]}" -C repo log --stat --format=fuller
    step cat-tree "${g[@]}" -C repo cat-file -p 'HEAD^{tree}'
    step cat-commit "${g[@]}" -C repo cat-file -p HEAD
    step diff "${g[@]}" -C repo diff HEAD~1 HEAD
    step diff-stat "${g[@]}" -C repo diff --stat --numstat HEAD~1 HEAD
    step diff-patience "${g[@]}" -C repo diff --patience -U1 HEAD~1 HEAD -- src
    step ls-files "${g[@]}" -C repo ls-files -s
    step rev-list "${g[@]}" -C repo rev-list --objects --all
    step blame "${g[@]}" -C repo blame -s src/main.c
    step repack "${g[@]}" -C repo repack -adq
    step fsck "${g[@]}" -C repo fsck --full --strict
    step count "${g[@]}" -C repo count-objects -v
    step verify-pack sh -c 'cd repo && "$@" verify-pack -v .git/objects/pack/*.idx' sh "${g[@]}"
}
run_scenario scenario
finish
