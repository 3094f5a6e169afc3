/* clockshift.so: moves a process's wall clock by an offset another process sets, for the
 * tests that jump a private redis-server's time past leases, graces and cache TTLs
 * (tests/procs.py, start_shifted_redis). Loaded with LD_PRELOAD.
 *
 * Written here rather than taken from libfaketime: libfaketime cannot start inside a
 * process linked with jemalloc, as Debian's redis-server is (its initialisation recurses
 * through jemalloc's clock_gettime; wolfcw/libfaketime#130, open since 2017).
 * This shim never allocates and never calls dlsym: the real time comes from the
 * clock_gettime system call itself.
 *
 * CLOCKSHIFT_FILE names a file of 8 bytes, the offset in milliseconds (a little-endian
 * int64), mapped shared and read on every call: the tests move the clock by writing
 * the file, and the server sees it at its next reading of the time. Only the wall clock
 * moves (CLOCK_REALTIME and its coarse form, gettimeofday, time); the monotonic clocks
 * are left alone, so timers and timeouts inside the server behave. Without the variable
 * (or without the file) the offset is 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_ms;  /* NULL until mapped */
static int tried;

static int64_t offset(void) {
  if (!__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) {
    const char *path = getenv("CLOCKSHIFT_FILE");
    if (path) {
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        void *map = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (map != MAP_FAILED) offset_ms = (volatile int64_t *)map;
      }
    }
    __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
  }
  return offset_ms ? *offset_ms : 0;
}

static void shift(struct timespec *ts) {
  int64_t ms = offset();
  int64_t ns = (int64_t)ts->tv_nsec + (ms % 1000) * 1000000;
  ts->tv_sec += ms / 1000;
  if (ns >= 1000000000) {
    ns -= 1000000000;
    ts->tv_sec += 1;
  } else if (ns < 0) {
    ns += 1000000000;
    ts->tv_sec -= 1;
  }
  ts->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
  long rc = syscall(SYS_clock_gettime, clock, ts);
  if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) shift(ts);
  return (int)rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  (void)tz;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;  /* (glibc declares tv nonnull) */
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
