#!/bin/bash
# Integration: the sqlite3 shell under hakmem versus without: 100k generated rows,
# indexes, aggregates, window functions, updates, VACUUM; outputs byte-identical.
# Usage: run-sqlite.sh /path/to/libhakmem.so
# shellcheck source=common.sh disable=SC2317  # scenario functions are called indirectly
. "$(dirname "$0")/common.sh" "$@"

need_prog sqlite3 /usr/bin/sqlite3 sqlite3
SQLITE=$PROG
say "using $SQLITE ($("$SQLITE" -version 2>/dev/null | cut -d' ' -f1))"

check_preloaded "$SQLITE" :memory: 'SELECT 1;'

MEM_SQL="
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 200000)
SELECT n % 1000 AS k, count(*), sum(n), max(length(printf('%0*d', n % 500, n)))
  FROM s GROUP BY k ORDER BY sum(n) DESC, k LIMIT 8;
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 30000)
SELECT length(json_group_array(json_object('n', n, 's', hex(n * n), 'a', json_array(n, n / 2)))),
       sum(json_extract(json_object('v', n), '\$.v'))
  FROM s;
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 100000)
SELECT n, printf('%08x', n * 2654435761 % 4294967296) AS h
  FROM s ORDER BY h, n LIMIT 5 OFFSET 50000;
"

scenario() {
    step_in "$HERE/queries.sql" queries "$SQLITE" -batch test.db
    step reopen "$SQLITE" -batch test.db \
        'SELECT grp, count(*), round(sum(val), 3) FROM t WHERE name LIKE '"'"'NAME-1%'"'"' GROUP BY grp ORDER BY grp LIMIT 10;'
    step sha3sum "$SQLITE" -batch test.db .sha3sum
    step dump-schema "$SQLITE" -batch test.db .schema
    step memory "$SQLITE" -batch :memory: "$MEM_SQL"
    step error "$SQLITE" -batch test.db 'SELECT * FROM no_such_table;'
}
run_scenario scenario
compare_stderr error
finish
