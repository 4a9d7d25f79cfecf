/* Compiled by gcc in run-gcc.sh (with and without hakmem), then run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

struct point { double x, y; };

struct entry {
    char *key;
    int count;
    struct entry *next;
};

struct table {
    struct entry **buckets;
    size_t nbuckets, size;
};

static uint32_t rng_state = 2463534242u;
static uint32_t xorshift(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static void table_grow(struct table *t)
{
    size_t n = t->nbuckets ? t->nbuckets * 2 : 16;
    struct entry **b = calloc(n, sizeof *b);
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct entry *e = t->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            size_t j = hash(e->key) & (n - 1);
            e->next = b[j];
            b[j] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

static void table_add(struct table *t, const char *key)
{
    if (t->size >= t->nbuckets)
        table_grow(t);
    size_t j = hash(key) & (t->nbuckets - 1);
    for (struct entry *e = t->buckets[j]; e; e = e->next)
        if (strcmp(e->key, key) == 0) {
            e->count++;
            return;
        }
    struct entry *e = malloc(sizeof *e);
    e->key = strdup(key);
    e->count = 1;
    e->next = t->buckets[j];
    t->buckets[j] = e;
    t->size++;
}

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;
    if (x->count != y->count)
        return y->count - x->count;
    return strcmp(x->key, y->key);
}

int main(void)
{
    /* Geometry with structs and doubles. */
    struct point *pts = NULL;
    size_t npts = 0;
    for (int i = 0; i < 10000; i++) {
        pts = realloc(pts, (npts + 1) * sizeof *pts);
        pts[npts++] = (struct point){ (xorshift() % 20001) / 100.0 - 100.0,
                                      (xorshift() % 20001) / 100.0 - 100.0 };
    }
    struct point c = { 0, 0 };
    for (size_t i = 0; i < npts; i++) {
        c.x += pts[i].x;
        c.y += pts[i].y;
    }
    printf("centroid %.4f %.4f of %zu points\n", c.x / npts, c.y / npts, npts);
    free(pts);

    /* Word counting with a hash table of heap strings. */
    struct table t = { 0 };
    char word[16];
    for (int i = 0; i < 200000; i++) {
        int len = 1 + xorshift() % 4;
        for (int k = 0; k < len; k++)
            word[k] = 'a' + xorshift() % 6;
        word[len] = 0;
        table_add(&t, word);
    }
    struct entry **all = malloc(t.size * sizeof *all);
    size_t n = 0;
    for (size_t i = 0; i < t.nbuckets; i++)
        for (struct entry *e = t.buckets[i]; e; e = e->next)
            all[n++] = e;
    qsort(all, n, sizeof *all, cmp_entry);
    printf("%zu distinct words, %zu buckets\n", n, t.nbuckets);
    for (size_t i = 0; i < 10; i++)
        printf("  %-6s %d\n", all[i]->key, all[i]->count);
    long sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += (long)all[i]->count * (long)strlen(all[i]->key);
        free(all[i]->key);
        free(all[i]);
    }
    free(all);
    free(t.buckets);
    printf("weighted %ld\n", sum);

    /* Many buffers of assorted sizes, filled and checked. */
    enum { N = 4096 };
    unsigned char *bufs[N];
    size_t sizes[N];
    unsigned long check = 0;
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < N; i++) {
            sizes[i] = 1 + xorshift() % (i % 64 == 0 ? 200000 : 2000);
            bufs[i] = malloc(sizes[i]);
            memset(bufs[i], (i + round) & 0xff, sizes[i]);
        }
        for (int i = 0; i < N; i++) {
            check += bufs[i][sizes[i] - 1] + sizes[i];
            free(bufs[i]);
        }
    }
    printf("buffers %lu\n", check);
    return 7;
}
