/*
 * clock_probe: prints what the (possibly shimmed) clocks say, next to the real
 * clocks read with raw system calls, which no LD_PRELOAD library can shift.
 *
 *   clock_probe                       one line
 *   clock_probe <count> <interval_ms> <count> lines, <interval_ms> apart
 *
 * Each line: "realtime=<ns> real_realtime=<ns> realtime_coarse=<ns>
 * tai=<ns> real_tai=<ns> monotonic=<ns> monotonic_coarse=<ns> boottime=<ns>
 * real_monotonic=<ns> real_boottime=<ns> monotonic_raw=<ns>
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

static void PrintLine(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  int64_t real_realtime = Raw(CLOCK_REALTIME);
  int64_t realtime = Libc(CLOCK_REALTIME);
  int64_t realtime_coarse = Libc(CLOCK_REALTIME_COARSE);
  int64_t real_tai = Raw(CLOCK_TAI);
  int64_t tai = Libc(CLOCK_TAI);
  int64_t real_monotonic = Raw(CLOCK_MONOTONIC);
  int64_t monotonic = Libc(CLOCK_MONOTONIC);
  int64_t monotonic_coarse = Libc(CLOCK_MONOTONIC_COARSE);
  int64_t real_boottime = Raw(CLOCK_BOOTTIME);
  int64_t boottime = Libc(CLOCK_BOOTTIME);
  int64_t real_monotonic_raw = Raw(CLOCK_MONOTONIC_RAW);
  int64_t monotonic_raw = Libc(CLOCK_MONOTONIC_RAW);
  time_t now = time(NULL);
  printf(
      "realtime=%lld real_realtime=%lld realtime_coarse=%lld tai=%lld "
      "real_tai=%lld monotonic=%lld monotonic_coarse=%lld boottime=%lld "
      "real_monotonic=%lld real_boottime=%lld monotonic_raw=%lld "
      "real_monotonic_raw=%lld gettimeofday_us=%lld time=%lld\n",
      (long long)realtime, (long long)real_realtime, (long long)realtime_coarse, (long long)tai,
      (long long)real_tai, (long long)monotonic, (long long)monotonic_coarse, (long long)boottime,
      (long long)real_monotonic, (long long)real_boottime, (long long)monotonic_raw,
      (long long)real_monotonic_raw, (long long)tv.tv_sec * 1000000LL + tv.tv_usec, (long long)now);
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
