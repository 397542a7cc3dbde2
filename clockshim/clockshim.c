/*
 * dlbench clock shim: LD_PRELOAD it into a server to move that server's wall clock.
 *
 * The offset, in milliseconds, is read from the file named by DLBENCH_CLOCK_FILE (re-read
 * at most every 50 ms); CLOCK_REALTIME, gettimeofday() and time() are shifted by it, the
 * monotonic clocks are not (a wall-clock jump, as NTP or an operator would make).
 *
 * Why not libfaketime: Debian bookworm's libfaketime 0.9.10 recurses into clock_gettime()
 * during start-up under jemalloc-linked programs such as redis-server and aborts (fixed
 * upstream in 0.9.11). This shim calls the kernel directly (no dlsym, no allocation), so
 * it is safe to run before the allocator is initialised.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t offset_ns;
static int64_t next_check_ns;

static long raw_clock_gettime(clockid_t c, struct timespec *ts) {
    return syscall(SYS_clock_gettime, c, ts);
}

static void refresh(void) {
    struct timespec m;
    if (raw_clock_gettime(CLOCK_MONOTONIC, &m) != 0) return;
    int64_t now = (int64_t)m.tv_sec * 1000000000LL + m.tv_nsec;
    if (now < __atomic_load_n(&next_check_ns, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&next_check_ns, now + 50000000LL, __ATOMIC_RELAXED);
    const char *path = getenv("DLBENCH_CLOCK_FILE");
    if (!path) return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[32];
    long n = syscall(SYS_read, fd, buf, sizeof(buf) - 1);
    syscall(SYS_close, fd);
    if (n <= 0) return;
    buf[n] = 0;
    int64_t v = 0, sign = 1;
    const char *p = buf;
    while (*p == ' ' || *p == '+') p++;
    if (*p == '-') { sign = -1; p++; }
    while (*p >= '0' && *p <= '9') { v = v * 10 + (*p - '0'); p++; }
    __atomic_store_n(&offset_ns, sign * v * 1000000LL, __ATOMIC_RELAXED);
}

static void shift(struct timespec *ts) {
    refresh();
    int64_t t = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + __atomic_load_n(&offset_ns, __ATOMIC_RELAXED);
    ts->tv_sec = t / 1000000000LL;
    ts->tv_nsec = t % 1000000000LL;
    if (ts->tv_nsec < 0) { ts->tv_nsec += 1000000000LL; ts->tv_sec -= 1; }
}

int clock_gettime(clockid_t c, struct timespec *ts) {
    long r = raw_clock_gettime(c, ts);
    if (r == 0 && (c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE)) shift(ts);
    return (int)r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    if (tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
