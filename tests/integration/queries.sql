-- Run by run-sqlite.sh through /usr/bin/sqlite3, with and without hakmem.
-- All content is computed, so every result is deterministic.
.headers on
.mode list
PRAGMA cache_size = -4000;
PRAGMA synchronous = OFF;
PRAGMA journal_mode = MEMORY;
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL, payload BLOB);
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 100000)
INSERT INTO t(id, grp, name, val, payload)
SELECT n,
       (n * 7919) % 97,
       printf('name-%05d-%s', (n * 104729) % 100003, substr('abcdefghijklmnopqrstuvwxyz', 1 + n % 26, 1 + n % 7)),
       ((n * 2654435761) % 1000003) / 1000.0,
       zeroblob(n % 300)
FROM seq;
CREATE INDEX t_grp ON t(grp, val);
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(grp), round(sum(val), 3), sum(length(payload)) FROM t;
SELECT grp, count(*) AS n, round(avg(val), 4) AS avg_val, min(name), max(name)
  FROM t GROUP BY grp ORDER BY n DESC, grp LIMIT 12;
SELECT substr(name, -3) AS suffix, count(*) FROM t GROUP BY suffix ORDER BY 2 DESC, 1 LIMIT 10;
SELECT id, name, val FROM t WHERE grp = 42 ORDER BY val DESC, id LIMIT 10;
SELECT id, name FROM t WHERE name BETWEEN 'name-50000' AND 'name-50100' ORDER BY name, id;
SELECT a.grp, count(*), round(sum(a.val - b.val), 3) FROM t a JOIN t b ON b.id = a.id - 1
  WHERE a.grp < 5 GROUP BY a.grp ORDER BY a.grp;
SELECT group_concat(id, ',') FROM (SELECT id FROM t WHERE id % 9973 = 0 ORDER BY id);
SELECT length(group_concat(name, ';')) FROM t;
SELECT grp, total FROM (SELECT grp, sum(id) AS total, rank() OVER (ORDER BY sum(id) DESC) AS r
  FROM t GROUP BY grp) WHERE r <= 5 ORDER BY r, grp;
UPDATE t SET name = upper(name) || '!', payload = zeroblob(id % 1000) WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*), sum(length(name)), sum(length(payload)) FROM t;
SELECT DISTINCT substr(name, 1, 6) FROM t ORDER BY 1;
VACUUM;
PRAGMA integrity_check;
SELECT count(*) FROM t WHERE grp = 13;
