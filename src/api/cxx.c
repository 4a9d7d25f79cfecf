/* C++'s operator new and delete, every form (sized, aligned, nothrow, array), in the library:
 * linking hakmem into a C++ program then means using it, as with mimalloc's and tcmalloc's.
 * Written in C under their mangled names, so the library needs no libstdc++ of its own. */
#include <stddef.h>
#include <stdlib.h>
#include "../../include/hakmem.h"
#include "../common/common.h"

#if HAK_OVERRIDE

/* libstdc++'s, weak: every program that can call these has them (a C program never does). */
typedef void (*cxx_handler)(void);
extern cxx_handler _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* Out of memory: the new_handler is called until it frees enough or there is none; then
 * std::bad_alloc is thrown (through these frames, which have unwind tables but nothing to
 * clean up), or nothrow's NULL.  A handler that throws from a nothrow new ends the program
 * (that operator is noexcept), where libstdc++'s would have caught it. */
static HAK_COLD void *cxx_new_slow(size_t n, size_t align, int nothrow)
{
    for (;;) {
        void *p = align ? hak_memalign(align, n) : hak_malloc(n);
        if (p != NULL)
            return p;
        cxx_handler h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
        if (h == NULL) {
            if (nothrow)
                return NULL;
            if (_ZSt17__throw_bad_allocv)
                _ZSt17__throw_bad_allocv();
            abort();                    /* no libstdc++ in the process: nothing could catch it */
        }
        h();
    }
}

static inline void *cxx_new(size_t n)
{
    void *p = hak_malloc(n);
    return likely(p != NULL) ? p : cxx_new_slow(n, 0, 0);
}

static inline void *cxx_new_nothrow(size_t n)
{
    void *p = hak_malloc(n);
    return likely(p != NULL) ? p : cxx_new_slow(n, 0, 1);
}

/* std::align_val_t is a power of two at least __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16). */
static inline void *cxx_new_aligned(size_t n, size_t align, int nothrow)
{
    void *p = hak_memalign(align, n);
    return likely(p != NULL) ? p : cxx_new_slow(n, align, nothrow);
}

#define CXX HAK_EXPORT
struct cxx_nothrow;                     /* const std::nothrow_t &: never read */

CXX void *_Znwm(size_t n) { return cxx_new(n); }
CXX void *_Znam(size_t n) { return cxx_new(n); }
CXX void *_ZnwmRKSt9nothrow_t(size_t n, const struct cxx_nothrow *t) { (void)t; return cxx_new_nothrow(n); }
CXX void *_ZnamRKSt9nothrow_t(size_t n, const struct cxx_nothrow *t) { (void)t; return cxx_new_nothrow(n); }
CXX void *_ZnwmSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a, 0); }
CXX void *_ZnamSt11align_val_t(size_t n, size_t a) { return cxx_new_aligned(n, a, 0); }
CXX void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const struct cxx_nothrow *t)
{
    (void)t;
    return cxx_new_aligned(n, a, 1);
}
CXX void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const struct cxx_nothrow *t)
{
    (void)t;
    return cxx_new_aligned(n, a, 1);
}

CXX void _ZdlPv(void *p) { hak_free(p); }
CXX void _ZdaPv(void *p) { hak_free(p); }
CXX void _ZdlPvm(void *p, size_t n) { hak_free_sized(p, n); }
CXX void _ZdaPvm(void *p, size_t n) { hak_free_sized(p, n); }
CXX void _ZdlPvRKSt9nothrow_t(void *p, const struct cxx_nothrow *t) { (void)t; hak_free(p); }
CXX void _ZdaPvRKSt9nothrow_t(void *p, const struct cxx_nothrow *t) { (void)t; hak_free(p); }
CXX void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; hak_free(p); }
CXX void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; hak_free(p); }
CXX void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { hak_free_aligned_sized(p, a, n); }
CXX void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { hak_free_aligned_sized(p, a, n); }
CXX void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const struct cxx_nothrow *t)
{
    (void)a;
    (void)t;
    hak_free(p);
}
CXX void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const struct cxx_nothrow *t)
{
    (void)a;
    (void)t;
    hak_free(p);
}

#endif
