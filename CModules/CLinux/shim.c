#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include "CLinux.h"

int CLinux_eventfd(unsigned int initial, int flags) {
    return eventfd(initial, flags);
}

int CLinux_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

int CLinux_affinity_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}
