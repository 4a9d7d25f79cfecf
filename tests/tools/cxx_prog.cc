// Built against an installed hakmem with g++ (check-install.sh), through hakmem.pc and with
// libhakmem.a: every form of operator new and delete must come from hakmem (whose
// hak_malloc_usable_size reports a block it did not hand out), and fail as C++ requires.
#include <hakmem.h>
#include <cstdint>
#include <cstdio>
#include <new>
#include <vector>

static int failures;
static void check(bool ok, const char *what)
{
    if (!ok) {
        std::printf("FAIL: %s\n", what);
        failures++;
    }
}

static bool ours(void *p, std::size_t n)
{
    return p != nullptr && hak_malloc_usable_size(p) >= n;
}

struct alignas(4096) Page {
    unsigned char b[4096];
};

static int handler_calls;
static void handler()
{
    handler_calls++;
    std::set_new_handler(nullptr);      // the next failure throws
}

int main()
{
    int *one = new int(7);
    check(ours(one, sizeof *one) && *one == 7, "new int");
    delete one;                                         // sized delete (C++14)
    char *arr = new char[1000];
    check(ours(arr, 1000), "new[]");
    delete[] arr;
    char *nt = new (std::nothrow) char[64];
    check(ours(nt, 64), "new (nothrow)[]");
    delete[] nt;
    Page *pg = new Page;
    check(ours(pg, sizeof *pg) && reinterpret_cast<std::uintptr_t>(pg) % 4096 == 0, "aligned new");
    delete pg;
    Page *pgs = new Page[3];
    check(ours(pgs, 3 * sizeof *pgs) && reinterpret_cast<std::uintptr_t>(pgs) % 4096 == 0, "aligned new[]");
    delete[] pgs;
    Page *pnt = new (std::nothrow) Page;
    check(ours(pnt, sizeof *pnt) && reinterpret_cast<std::uintptr_t>(pnt) % 4096 == 0, "aligned new (nothrow)");
    delete pnt;
    std::vector<int> v;
    for (int i = 0; i < 100000; i++)
        v.push_back(i);
    check(ours(v.data(), v.size() * sizeof(int)), "std::vector's storage");

    const std::size_t huge = SIZE_MAX / 4;
    bool threw = false;
    try {
        char *p = new char[huge];
        delete[] p;
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw, "new of an impossible size throws std::bad_alloc");
    check(new (std::nothrow) char[huge] == nullptr, "nothrow new of an impossible size is null");
    threw = false;
    std::set_new_handler(handler);
    try {
        char *p = new char[huge];
        delete[] p;
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw && handler_calls == 1, "the new_handler is called, then std::bad_alloc");
    if (failures == 0)
        std::printf("cxx ok\n");
    return failures != 0;
}
