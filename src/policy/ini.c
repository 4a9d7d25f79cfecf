/* The INI layer of the policy, read with iniparser.  A first pass over the text finds what
 * iniparser does not say: line numbers, repeated keys, unknown names, binary or oversized files.
 * Each problem is one line, `FILE:LINE: error: message` (or `warning:`), as compilers write them. */
#define _GNU_SOURCE                         /* memfd_create */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <iniparser.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "policy.h"

#define INI_MAX_BYTES   (1u << 20)
#define INI_MAX_ENTRIES 1024

struct entry {
    char section[32];
    char key[48];
    uint32_t line;
    int known;
    enum policy_key_id id;
    unsigned cls;
};

#define INI_MAX_REPORTS 20       /* a file of garbage gets 20 lines and a count, not 200,000 */

struct ini_ctx {
    const char *path;
    policy_report_fn report;
    void *rctx;
    int errors;
    int lines;
};

static void say(struct ini_ctx *c, int is_error, uint32_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void say(struct ini_ctx *c, int is_error, uint32_t line, const char *fmt, ...)
{
    char msg[512], out[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->errors += is_error;
    if (++c->lines > INI_MAX_REPORTS)
        return;
    for (char *m = msg; *m; m++)        /* text from the file must not forge a line */
        if ((unsigned char)*m < 32 || *m == 127)
            *m = '?';
    const char *kind = is_error ? "error" : "warning";
    if (line)
        snprintf(out, sizeof out, "%s:%u: %s: %s", c->path, line, kind, msg);
    else
        snprintf(out, sizeof out, "%s: %s: %s", c->path, kind, msg);
    c->report(c->rctx, is_error, out);
}

static void say_dropped(struct ini_ctx *c)
{
    if (c->lines > INI_MAX_REPORTS) {
        char out[600];
        snprintf(out, sizeof out, "%s: error: %d more problem(s) not shown", c->path, c->lines - INI_MAX_REPORTS);
        c->report(c->rctx, 1, out);
    }
}

/* iniparser prints its own complaints; collect the first one instead. */
static pthread_mutex_t ini_mutex = PTHREAD_MUTEX_INITIALIZER;
static char ini_error[256];

static int ini_error_cb(const char *fmt, ...)
{
    if (ini_error[0])
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ini_error, sizeof ini_error, fmt, ap);
    va_end(ap);
    for (char *s = ini_error; *s; s++)
        if (*s == '\n')
            *s = ' ';
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

static char *read_file(struct ini_ctx *c, size_t *len)
{
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say(c, 1, 0, "cannot open: %s; policy unchanged", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        say(c, 1, 0, "not a regular file; policy unchanged");
        close(fd);
        return NULL;
    }
    if (st.st_size > INI_MAX_BYTES) {
        say(c, 1, 0, "file too large (%lld bytes, at most %u); policy unchanged",
            (long long)st.st_size, INI_MAX_BYTES);
        close(fd);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    while (buf && n < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (buf == NULL || n != (size_t)st.st_size) {
        say(c, 1, 0, "cannot read: %s; policy unchanged", buf ? strerror(errno) : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

#define UTF8_BOM "\xef\xbb\xbf"

/* Editors on some systems start a UTF-8 file with a byte order mark; it is no setting. */
static size_t bom_len(const char *text, size_t len)
{
    return len >= 3 && !memcmp(text, UTF8_BOM, 3) ? 3 : 0;
}

/* First pass: returns the number of file-level errors (syntax, binary); fills entries.
 * The first such error ends it: the file is not loaded, so later lines are not judged. */
static int scan(struct ini_ctx *c, char *text, size_t len, struct entry *ent, unsigned *nent)
{
    size_t skip = bom_len(text, len);
    text += skip;
    len -= skip;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == 0 || (ch < 32 && ch != '\t' && ch != '\n' && ch != '\r')) {
            say(c, 1, 0, "binary file (byte 0x%02x at offset %zu); policy unchanged", ch, i);
            return 1;
        }
    }
    char section[32] = "";
    int section_known = 1;
    uint32_t lineno = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        char *s = trim(line);
        if (*s == 0 || *s == ';' || *s == '#')
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            char *rest = e ? trim(e + 1) : NULL;
            if (e == NULL || (*rest && *rest != ';' && *rest != '#')) {
                say(c, 1, lineno, "syntax error: expected [section]; file not loaded, policy unchanged");
                return 1;
            }
            *e = 0;
            snprintf(section, sizeof section, "%s", trim(s + 1));
            section_known = policy_section_known(section);
            if (!section_known) {
                const char *near = policy_suggest_section(section);
                say(c, 1, lineno, "unknown section [%s]%s%s%s; its keys are ignored", section,
                    near ? ", did you mean [" : "", near ? near : "", near ? "]" : "");
            }
            continue;
        }
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            say(c, 1, lineno, "syntax error: expected key = value; file not loaded, policy unchanged");
            return 1;
        }
        *eq = 0;
        char *key = trim(s);
        if (*key == 0) {
            say(c, 1, lineno, "syntax error: missing key before '='; file not loaded, policy unchanged");
            return 1;
        }
        if (section[0] == 0) {
            say(c, 1, lineno, "%s is outside any [section]; ignored", key);
            continue;
        }
        if (!section_known)
            continue;
        if (*nent == INI_MAX_ENTRIES) {
            say(c, 1, lineno, "too many settings (at most %u); the rest are ignored", INI_MAX_ENTRIES);
            break;
        }
        struct entry *e = &ent[*nent];
        snprintf(e->section, sizeof e->section, "%s", section);
        snprintf(e->key, sizeof e->key, "%s", key);
        e->line = lineno;
        e->known = policy_find(section, key, &e->id, &e->cls);
        if (!e->known) {
            char sug[64];
            const char *near = policy_suggest(section, key, sug, sizeof sug);
            say(c, 1, lineno, "unknown key %s in [%s]%s%s; ignored", key, section,
                near ? ", did you mean " : "", near ? near : "");
            continue;
        }
        for (unsigned j = 0; j < *nent; j++) {
            if (ent[j].known && ent[j].id == e->id && ent[j].cls == e->cls) {
                /* As git config, systemd and glibc's tunables: the last one wins. */
                say(c, 0, lineno, "[%s] %s is set again (first on line %u); the last value is used",
                    section, key, ent[j].line);
                ent[j].known = 0;
            }
        }
        (*nent)++;
    }
    return 0;
}

int policy_apply_ini(struct policy *p, const char *path, policy_report_fn report, void *rctx)
{
    struct ini_ctx c = { .path = path, .report = report, .rctx = rctx };
    size_t len = 0;
    char *text = read_file(&c, &len);
    if (text == NULL)
        return c.errors;
    struct entry *ent = calloc(INI_MAX_ENTRIES, sizeof *ent);
    unsigned nent = 0;
    if (ent == NULL) {
        say(&c, 1, 0, "out of memory; policy unchanged");
        free(text);
        return c.errors;
    }
    /* iniparser takes a BOM for part of the first line: it reads a copy without it. */
    int copy = -1;
    char load_path[64];
    size_t skip = bom_len(text, len);
    if (skip) {
        copy = memfd_create("hakmem-ini", MFD_CLOEXEC);
        if (copy < 0 || write(copy, text + skip, len - skip) != (ssize_t)(len - skip)) {
            say(&c, 1, 0, "cannot copy the file past its byte order mark: %s; policy unchanged", strerror(errno));
            if (copy >= 0)
                close(copy);
            free(text);
            free(ent);
            return c.errors;
        }
        snprintf(load_path, sizeof load_path, "/proc/self/fd/%d", copy);
    }
    int fatal = scan(&c, text, len, ent, &nent);
    free(text);
    if (fatal) {
        if (copy >= 0)
            close(copy);
        say_dropped(&c);
        free(ent);
        return c.errors;
    }
    pthread_mutex_lock(&ini_mutex);
    ini_error[0] = 0;
    iniparser_set_error_callback(ini_error_cb);
    dictionary *d = iniparser_load(copy >= 0 ? load_path : path);
    iniparser_set_error_callback(NULL);
    if (copy >= 0)
        close(copy);
    if (d == NULL) {
        say(&c, 1, 0, "%s; policy unchanged", ini_error[0] ? ini_error : "iniparser could not load it");
        pthread_mutex_unlock(&ini_mutex);
        say_dropped(&c);
        free(ent);
        return c.errors;
    }
    pthread_mutex_unlock(&ini_mutex);

    struct policy q = *p;
    int settings = 0;
    for (unsigned i = 0; i < nent; i++) {
        if (!ent[i].known)
            continue;
        char full[96];
        snprintf(full, sizeof full, "%s:%s", ent[i].section, ent[i].key);
        const char *v = iniparser_getstring(d, full, NULL);
        if (v == NULL)
            continue;
        const char *warn = NULL;
        const char *err = policy_set(&q, ent[i].id, ent[i].cls, v, SRC_INI, ent[i].line, &warn);
        settings++;
        if (err) {
            char def[64];
            policy_format(p, ent[i].id, ent[i].cls, def, sizeof def);
            say(&c, 1, ent[i].line, "[%s] %s = %s: %s; %s kept", ent[i].section, ent[i].key, v, err, def);
        } else if (warn) {
            say(&c, 0, ent[i].line, "[%s] %s: %s", ent[i].section, ent[i].key, warn);
        }
    }
    iniparser_freedict(d);
    free(ent);
    if (settings == 0 && c.errors == 0)
        say(&c, 0, 0, "no settings in the file; defaults in force");
    say_dropped(&c);
    /* Absolute, so a report names the file wherever the program has gone since. */
    char abs[PATH_MAX];
    snprintf(q.file, sizeof q.file, "%.*s", (int)sizeof q.file - 1, realpath(path, abs) ? abs : path);
    policy_finalize(&q);
    *p = q;
    return c.errors;
}
