// malloc-counter: an LD_PRELOAD library that counts heap allocations.
//
// Used by the benchmark to measure allocations per frame in steady state:
// run the same capture twice with different lengths and divide the difference
// in allocations by the difference in frames (start-up and teardown cancel out).
//
//   LD_PRELOAD=malloc-counter.so MALLOC_COUNTER_OUT=/tmp/n camagent capture ...
//     -> /tmp/n holds "allocations N" when the process exits.
//   MALLOC_COUNTER_THREAD=camagent-rtc counts only the allocations made on
//     threads of that name (one path of a process with several: a
//     subscriber's receive thread, not its once-a-second stats printing).
//     Several names, comma-separated (at most 4), count each on its own:
//     the file then also holds a line "thread NAME N" per name. A name is
//     cut to 15 characters, as the kernel cuts a thread's.
//   MALLOC_COUNTER_TRACE_AFTER=3 MALLOC_COUNTER_TRACE_MAX=20 additionally
//     prints the return addresses of the first 20 allocations made after 3 s
//     (symbolize with llvm-symbolizer) to find who allocates in steady state.
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

enum { MAX_THREAD_NAMES = 4 };
static atomic_ulong allocations;
static char thread_names[MAX_THREAD_NAMES][17];
static int thread_name_count;
static atomic_ulong thread_allocations[MAX_THREAD_NAMES];
static double trace_after = -1;
static long trace_left;
static double started;
static __thread int in_trace;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((constructor)) static void counter_start(void) {
    started = now_seconds();
    const char *after = getenv("MALLOC_COUNTER_TRACE_AFTER");
    const char *max = getenv("MALLOC_COUNTER_TRACE_MAX");
    if (after) trace_after = atof(after);
    const char *thread = getenv("MALLOC_COUNTER_THREAD");
    while (thread && *thread && thread_name_count < MAX_THREAD_NAMES) {
        size_t length = strcspn(thread, ",");
        // The kernel keeps 15 characters of a thread's name: compare what it keeps.
        memcpy(thread_names[thread_name_count], thread, length < 15 ? length : 15);
        thread_name_count++;
        thread += length;
        if (*thread == ',') thread++;
    }
    trace_left = max ? atol(max) : 20;
}

__attribute__((destructor)) static void counter_stop(void) {
    const char *path = getenv("MALLOC_COUNTER_OUT");
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : 2;
    if (fd < 0) return;
    char line[64];
    int n = snprintf(line, sizeof line, "allocations %lu\n", atomic_load(&allocations));
    if (write(fd, line, n) < 0) { /* nothing to do at exit */ }
    for (int i = 0; i < thread_name_count; i++) {
        n = snprintf(line, sizeof line, "thread %s %lu\n", thread_names[i], atomic_load(&thread_allocations[i]));
        if (write(fd, line, n) < 0) { /* nothing to do at exit */ }
    }
    if (fd != 2) close(fd);
}

// Whether this thread's allocations count: all (-1), those of one of the
// named threads (its index), or not (-2). The name is read each time (prctl
// does not allocate): a thread names itself after it starts.
static int counted_as(void) {
    if (thread_name_count == 0) return -1;
    char name[17] = {0};
    if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) return -2;
    for (int i = 0; i < thread_name_count; i++) {
        if (strcmp(name, thread_names[i]) == 0) return i;
    }
    return -2;
}

static int counts_here(void) { return counted_as() != -2; }

static void count_one(void) {
    int as = counted_as();
    if (as == -2) return;
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    if (as >= 0) atomic_fetch_add_explicit(&thread_allocations[as], 1, memory_order_relaxed);
}

// Print the caller chain of one allocation; backtrace() may itself allocate
// the first time, hence the per-thread guard.
static void maybe_trace(void) {
    if (trace_after < 0 || in_trace || trace_left <= 0 || !counts_here()) return;
    if (now_seconds() - started < trace_after) return;
    in_trace = 1;
    if (__atomic_fetch_sub(&trace_left, 1, __ATOMIC_RELAXED) > 0) {
        void *frames[16];
        int depth = backtrace(frames, 16);
        char line[64];
        int n = snprintf(line, sizeof line, "malloc-counter: allocation after %.1f s\n", trace_after);
        if (write(2, line, n) < 0) { }
        backtrace_symbols_fd(frames, depth, 2);
    }
    in_trace = 0;
}

void *malloc(size_t size) {
    count_one();
    maybe_trace();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_one();
    maybe_trace();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_one();
    maybe_trace();
    return __libc_realloc(pointer, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    count_one();
    maybe_trace();
    void *pointer = __libc_memalign(alignment, size);
    if (!pointer) return 12; // ENOMEM
    *out = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_one();
    maybe_trace();
    return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
    count_one();
    maybe_trace();
    return __libc_memalign(alignment, size);
}
