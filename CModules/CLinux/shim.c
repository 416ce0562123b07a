#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
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

int CLinux_receive_datagrams(int fd, void *buffers, size_t size, unsigned int count,
                             struct sockaddr_storage *senders, size_t *lengths) {
    if (count > 64) count = 64;
    struct mmsghdr messages[64];
    struct iovec vectors[64];
    memset(messages, 0, sizeof(struct mmsghdr) * count);
    for (unsigned int i = 0; i < count; i++) {
        vectors[i].iov_base = (char *)buffers + i * size;
        vectors[i].iov_len = size;
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_name = &senders[i];
        messages[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
    }
    int received = recvmmsg(fd, messages, count, MSG_DONTWAIT, NULL);
    for (int i = 0; i < received; i++) lengths[i] = messages[i].msg_len;
    return received;
}
