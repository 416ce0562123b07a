#define _GNU_SOURCE
#include <pthread.h>
#include "CLinux.h"

int CLinux_eventfd(unsigned int initial, int flags) {
    return eventfd(initial, flags);
}

int CLinux_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}
