// CLinux: Linux-only libc calls that Swift's Glibc module does not export
// (as swift-nio's CNIOLinux does): eventfd, naming a thread, the CPUs
// this process may run on, and recvmmsg, which glibc declares only under
// _GNU_SOURCE (CPU_COUNT is a macro). No logic lives here.
#ifndef CLINUX_H
#define CLINUX_H

#include <sys/eventfd.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/socket.h>

static const int CLinux_EFD_NONBLOCK = EFD_NONBLOCK;
static const int CLinux_EFD_CLOEXEC = EFD_CLOEXEC;

int CLinux_eventfd(unsigned int initial, int flags);
// Names the calling thread (shown by top -H and gdb); at most 15 characters.
int CLinux_set_thread_name(const char *name);
// How many CPUs this process may run on (sched_getaffinity + CPU_COUNT); -1 on error.
int CLinux_affinity_cpu_count(void);

// Receives up to `count` (at most 64) pending datagrams in one recvmmsg call,
// without waiting: datagram i into buffers + i * size (truncated to size),
// its length into lengths[i], its sender into senders[i]. Returns how many
// came, or -1 with errno (EAGAIN: none pending).
int CLinux_receive_datagrams(int fd, void *buffers, size_t size, unsigned int count,
                             struct sockaddr_storage *senders, size_t *lengths);

#endif
