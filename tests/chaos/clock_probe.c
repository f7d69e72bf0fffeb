/*
 * clock_probe: prints what the (possibly shimmed) clocks say, next to the real
 * clocks read with raw system calls, which no LD_PRELOAD library can shift.
 *
 *   clock_probe                       one line
 *   clock_probe <count> <interval_ms> <count> lines, <interval_ms> apart
 *
 * Each line: "realtime=<ns> real_realtime=<ns> realtime_coarse=<ns>
 * tai=<ns> real_tai=<ns> monotonic=<ns> real_monotonic=<ns>
 * monotonic_coarse=<ns> boottime=<ns> real_boottime=<ns> monotonic_raw=<ns>
 * real_monotonic_raw=<ns> gettimeofday_us=<us> time=<s>". Exit 2 on bad usage.
 */

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t Nanos(const struct timespec* ts) {
  return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static int64_t Libc(clockid_t id) {
  struct timespec ts;
  if (clock_gettime(id, &ts) != 0) return -1;
  return Nanos(&ts);
}

static int64_t Raw(clockid_t id) {
  struct timespec ts;
  if (syscall(SYS_clock_gettime, id, &ts) != 0) return -1;
  return Nanos(&ts);
}

/* The clocks a line shows, in the order they are read: each through libc
 * (which a shim may shift) as `name`, and where `real` is set, just before,
 * with the raw system call as `real`. */
static const struct {
  const char* name;
  clockid_t id;
  const char* real;
} kClocks[] = {
    {"realtime", CLOCK_REALTIME, "real_realtime"},
    {"realtime_coarse", CLOCK_REALTIME_COARSE, NULL},
    {"tai", CLOCK_TAI, "real_tai"},
    {"monotonic", CLOCK_MONOTONIC, "real_monotonic"},
    {"monotonic_coarse", CLOCK_MONOTONIC_COARSE, NULL},
    {"boottime", CLOCK_BOOTTIME, "real_boottime"},
    {"monotonic_raw", CLOCK_MONOTONIC_RAW, "real_monotonic_raw"},
};
#define NUM_CLOCKS (sizeof(kClocks) / sizeof(kClocks[0]))

static void PrintLine(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  int64_t real[NUM_CLOCKS] = {0};
  int64_t libc[NUM_CLOCKS] = {0};
  for (size_t i = 0; i < NUM_CLOCKS; ++i) {
    if (kClocks[i].real != NULL) real[i] = Raw(kClocks[i].id);
    libc[i] = Libc(kClocks[i].id);
  }
  time_t now = time(NULL);
  for (size_t i = 0; i < NUM_CLOCKS; ++i) {
    printf("%s=%lld ", kClocks[i].name, (long long)libc[i]);
    if (kClocks[i].real != NULL) printf("%s=%lld ", kClocks[i].real, (long long)real[i]);
  }
  printf("gettimeofday_us=%lld time=%lld\n", (long long)tv.tv_sec * 1000000LL + tv.tv_usec,
         (long long)now);
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc == 1) {
    PrintLine();
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: clock_probe [<count> <interval_ms>]\n");
    return 2;
  }
  long count = strtol(argv[1], NULL, 10);
  long interval_ms = strtol(argv[2], NULL, 10);
  if (count < 1 || count > 100000 || interval_ms < 0 || interval_ms > 60000) {
    fprintf(stderr, "clock_probe: count in [1, 100000], interval_ms in [0, 60000]\n");
    return 2;
  }
  for (long i = 0; i < count; ++i) {
    if (i > 0 && interval_ms > 0) {
      struct timespec pause = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
      /* Relative sleep on CLOCK_MONOTONIC through the kernel: not shifted. */
      nanosleep(&pause, NULL);
    }
    PrintLine();
  }
  return 0;
}
