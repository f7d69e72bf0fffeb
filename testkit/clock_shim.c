/*
 * libredlock_clock_shim.so: an LD_PRELOAD library that shifts a process's
 * clocks by an offset read from a control file on every call.
 *
 * Why our own: Debian's libfaketime deadlocks Debian's redis-server at start-up
 * (its dlsym() calls malloc() while jemalloc is initialising). This shim calls
 * neither malloc nor dlsym nor stdio: only raw system calls through syscall(2)
 * and compiler atomics. It is async-signal-safe, thread-safe and fork-safe.
 *
 * Interposed: clock_gettime, __clock_gettime, gettimeofday, time, timespec_get.
 * (redis-server 7.0 imports clock_gettime, gettimeofday and time; mstime() and
 * expiry use gettimeofday, the event loop uses clock_gettime(CLOCK_MONOTONIC).)
 *   - CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM, CLOCK_TAI,
 *     gettimeofday, time and timespec_get get the realtime offset;
 *   - CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME and
 *     CLOCK_BOOTTIME_ALARM get the monotonic offset, only when the record's
 *     monotonic flag is 'M';
 *   - CLOCK_MONOTONIC_RAW (the harness stamps histories with it), the CPU-time
 *     clocks and anything else pass through unchanged.
 * Real time always comes from syscall(SYS_clock_gettime) (no vDSO), so a call
 * costs one pread and one or two clock system calls (about a microsecond).
 * A shifted time that would be negative is clamped to 0.
 *
 * Environment: REDLOCK_CLOCK_SHIM_FILE = path of the control file. Unset, a
 * missing, unreadable, short or garbled file all mean "offset 0". The file is
 * opened lazily (O_RDONLY|O_CLOEXEC) by the first call that needs it and kept
 * open; every call preads it at offset 0, so a writer must update it IN PLACE
 * (pwrite at offset 0, never rename a new file over it: a process that already
 * holds the descriptor would keep reading the old inode). If the process closes
 * our descriptor behind our back (close-all-fds loops), the next garbled read
 * notices that the descriptor no longer refers to the file and reopens it.
 *
 * Control record (testkit/clock_control.h writes it), exactly 114 ASCII bytes:
 *
 *   offset len  field
 *   0      8    "RLCLOCK1"       magic and format version
 *   8      1    ' '
 *   9      1    mode             'F' fixed offset, 'S' strobe
 *   10     1    ' '
 *   11     1    monotonic flag   'M' shift the monotonic clocks, '-' do not
 *   12     1    ' '
 *   13     20   realtime offset A, nanoseconds, sign + 19 digits ("+0000003600000000000")
 *   33     1    ' '
 *   34     20   realtime offset B, nanoseconds (strobe only; ignored in 'F')
 *   54     1    ' '
 *   55     20   monotonic offset, nanoseconds (used only with flag 'M')
 *   75     1    ' '
 *   76     20   strobe period, nanoseconds, "+" + 19 digits (> 0 in 'S'; ignored in 'F')
 *   96     1    ' '
 *   97     16   FNV-1a 64-bit hash of bytes [0, 97), lowercase hex
 *   113    1    '\n'
 *
 * Every offset and the period must lie within [-10^18, 10^18] ns (~31 years),
 * which keeps the arithmetic free of overflow. A reader that sees a torn record
 * (a writer's pwrite in progress) fails the checksum and re-reads, up to
 * kMaxReadAttempts times, before falling back to offset 0.
 *
 * Strobe: the realtime offset is A while floor(real CLOCK_MONOTONIC / period)
 * is even and B while it is odd; every process sharing the file flips together.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

enum {
  kRecordLen = 114,
  kHashedLen = 97,
  kMaxReadAttempts = 16,
};

static const int64_t kNanosPerSecond = 1000000000LL;
static const int64_t kMaxMagnitude = 1000000000000000000LL; /* 10^18 ns */

/* State of the cached descriptor: >= 0 an open fd, kFdNone none yet, kFdBusy
 * another thread (or an interrupted caller) is opening it. */
enum { kFdNone = -1, kFdBusy = -2 };
static int g_fd = kFdNone;
static uint64_t g_dev; /* identity of the file behind g_fd */
static uint64_t g_ino;

extern char** environ;

typedef struct {
  int valid;
  int strobe;
  int shift_monotonic;
  int64_t realtime_a;
  int64_t realtime_b;
  int64_t monotonic;
  int64_t period;
} Record;

static int RealClock(clockid_t id, struct timespec* ts) {
  return (int)syscall(SYS_clock_gettime, id, ts);
}

/* getenv() without locale or locks; environ is set before any constructor. */
static const char* ControlPath(void) {
  static const char kName[] = "REDLOCK_CLOCK_SHIM_FILE=";
  char** env = environ;
  if (env == NULL) return NULL;
  for (; *env != NULL; ++env) {
    const char* e = *env;
    size_t i = 0;
    while (kName[i] != '\0' && e[i] == kName[i]) ++i;
    if (kName[i] == '\0') return e[i] != '\0' ? e + i : NULL;
  }
  return NULL;
}

static int OpenControl(const char* path) {
  return (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
}

static void CloseFd(int fd) { syscall(SYS_close, fd); }

static int StatFd(int fd, struct stat* st) { return (int)syscall(SYS_fstat, fd, st); }

static uint64_t Fnv1a(const char* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

/* Parses "+ddddddddddddddddddd" / "-ddd...". Returns 0 on success. */
static int ParseSigned20(const char* p, int64_t* out) {
  if (p[0] != '+' && p[0] != '-') return -1;
  uint64_t v = 0;
  for (int i = 1; i < 20; ++i) {
    if (p[i] < '0' || p[i] > '9') return -1;
    v = v * 10 + (uint64_t)(p[i] - '0'); /* 19 digits fit in uint64_t */
  }
  if (v > (uint64_t)kMaxMagnitude) return -1;
  *out = p[0] == '-' ? -(int64_t)v : (int64_t)v;
  return 0;
}

static int ParseHex16(const char* p, uint64_t* out) {
  uint64_t v = 0;
  for (int i = 0; i < 16; ++i) {
    char c = p[i];
    uint64_t d;
    if (c >= '0' && c <= '9') {
      d = (uint64_t)(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = (uint64_t)(c - 'a' + 10);
    } else {
      return -1;
    }
    v = (v << 4) | d;
  }
  *out = v;
  return 0;
}

static int ParseRecord(const char* b, Record* r) {
  static const char kMagic[] = "RLCLOCK1";
  for (int i = 0; i < 8; ++i) {
    if (b[i] != kMagic[i]) return -1;
  }
  if (b[8] != ' ' || b[10] != ' ' || b[12] != ' ' || b[33] != ' ' || b[54] != ' ' || b[75] != ' ' ||
      b[96] != ' ' || b[113] != '\n') {
    return -1;
  }
  uint64_t want;
  if (ParseHex16(b + 97, &want) != 0 || want != Fnv1a(b, kHashedLen)) return -1;
  if (b[9] != 'F' && b[9] != 'S') return -1;
  if (b[11] != 'M' && b[11] != '-') return -1;
  r->strobe = b[9] == 'S';
  r->shift_monotonic = b[11] == 'M';
  if (ParseSigned20(b + 13, &r->realtime_a) != 0 || ParseSigned20(b + 34, &r->realtime_b) != 0 ||
      ParseSigned20(b + 55, &r->monotonic) != 0 || ParseSigned20(b + 76, &r->period) != 0) {
    return -1;
  }
  if (r->strobe && r->period <= 0) return -1;
  r->valid = 1;
  return 0;
}

/* Returns the shared descriptor, or a private one (*owned = 1) the caller must
 * close, or -1 when the file cannot be opened. */
static int AcquireFd(const char* path, int* owned) {
  *owned = 0;
  int fd = __atomic_load_n(&g_fd, __ATOMIC_ACQUIRE);
  if (fd >= 0) return fd;
  int expected = kFdNone;
  if (fd == kFdNone && __atomic_compare_exchange_n(&g_fd, &expected, kFdBusy, 0, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_ACQUIRE)) {
    fd = OpenControl(path);
    struct stat st;
    if (fd >= 0 && StatFd(fd, &st) == 0) {
      __atomic_store_n(&g_dev, (uint64_t)st.st_dev, __ATOMIC_RELAXED);
      __atomic_store_n(&g_ino, (uint64_t)st.st_ino, __ATOMIC_RELAXED);
      __atomic_store_n(&g_fd, fd, __ATOMIC_RELEASE);
      return fd;
    }
    if (fd >= 0) CloseFd(fd);
    __atomic_store_n(&g_fd, kFdNone, __ATOMIC_RELEASE);
    return -1;
  }
  /* Someone else is opening (possibly a caller we interrupted from a signal
   * handler, or a thread that was mid-open when this process forked): use a
   * private descriptor for this one call rather than wait. */
  fd = OpenControl(path);
  if (fd >= 0) *owned = 1;
  return fd;
}

/* True when fd still refers to the file we opened. */
static int FdIsOurs(int fd) {
  struct stat st;
  if (StatFd(fd, &st) != 0) return 0;
  return (uint64_t)st.st_dev == __atomic_load_n(&g_dev, __ATOMIC_RELAXED) &&
         (uint64_t)st.st_ino == __atomic_load_n(&g_ino, __ATOMIC_RELAXED);
}

static void LoadRecord(Record* r) {
  r->valid = 0;
  const char* path = ControlPath();
  if (path == NULL) return;
  for (int reopen = 0; reopen < 2; ++reopen) {
    int owned;
    int fd = AcquireFd(path, &owned);
    if (fd < 0) return;
    char buf[kRecordLen];
    for (int attempt = 0; attempt < kMaxReadAttempts; ++attempt) {
      long n = syscall(SYS_pread64, fd, buf, (size_t)kRecordLen, (off_t)0);
      if (n == kRecordLen && ParseRecord(buf, r) == 0) break;
      if (n < 0 && errno != EINTR) break;
    }
    if (owned) {
      CloseFd(fd);
      return;
    }
    if (r->valid || FdIsOurs(fd)) return;
    /* The descriptor was closed (or reused) by the process: forget it without
     * closing it (it is not ours any more) and open the file again. */
    int expected = fd;
    __atomic_compare_exchange_n(&g_fd, &expected, kFdNone, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
}

static int64_t ToNanos(const struct timespec* ts) {
  return (int64_t)ts->tv_sec * kNanosPerSecond + (int64_t)ts->tv_nsec;
}

static void FromNanos(int64_t ns, struct timespec* ts) {
  if (ns < 0) ns = 0;
  ts->tv_sec = (time_t)(ns / kNanosPerSecond);
  ts->tv_nsec = (long)(ns % kNanosPerSecond);
}

static int64_t RealtimeOffset(const Record* r) {
  if (!r->valid) return 0;
  if (!r->strobe) return r->realtime_a;
  struct timespec mono;
  if (RealClock(CLOCK_MONOTONIC, &mono) != 0) return r->realtime_a;
  return ((ToNanos(&mono) / r->period) & 1) ? r->realtime_b : r->realtime_a;
}

static int IsRealtimeClock(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_REALTIME_ALARM ||
         id == CLOCK_TAI;
}

static int IsMonotonicClock(clockid_t id) {
  return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_BOOTTIME ||
         id == CLOCK_BOOTTIME_ALARM;
}

/* Shifted realtime in nanoseconds; returns -1 (errno set) on failure. */
static int ShiftedRealtime(int64_t* out) {
  struct timespec ts;
  if (RealClock(CLOCK_REALTIME, &ts) != 0) return -1;
  int saved = errno;
  Record r;
  LoadRecord(&r);
  errno = saved;
  int64_t ns = ToNanos(&ts) + RealtimeOffset(&r);
  *out = ns < 0 ? 0 : ns;
  return 0;
}

SHIM_EXPORT int clock_gettime(clockid_t id, struct timespec* ts) {
  int realtime = IsRealtimeClock(id);
  int monotonic = IsMonotonicClock(id);
  if (RealClock(id, ts) != 0) return -1;
  if (!realtime && !monotonic) return 0;
  int saved = errno;
  Record r;
  LoadRecord(&r);
  errno = saved;
  int64_t offset = 0;
  if (realtime) {
    offset = RealtimeOffset(&r);
  } else if (r.valid && r.shift_monotonic) {
    offset = r.monotonic;
  }
  if (offset != 0) FromNanos(ToNanos(ts) + offset, ts);
  return 0;
}

SHIM_EXPORT int __clock_gettime(clockid_t id, struct timespec* ts) { return clock_gettime(id, ts); }

SHIM_EXPORT int gettimeofday(struct timeval* restrict tv_arg, void* restrict tz) {
  /* glibc declares the timeval nonnull, but callers do pass NULL (the kernel
   * accepts it): launder the pointer so the compiler keeps the check. */
  struct timeval* tv = tv_arg;
  __asm__("" : "+r"(tv));
  if (tz != NULL && syscall(SYS_gettimeofday, NULL, tz) != 0) return -1;
  if (tv == NULL) return 0;
  int64_t ns;
  if (ShiftedRealtime(&ns) != 0) return -1;
  tv->tv_sec = (time_t)(ns / kNanosPerSecond);
  tv->tv_usec = (suseconds_t)((ns % kNanosPerSecond) / 1000);
  return 0;
}

SHIM_EXPORT time_t time(time_t* out) {
  int64_t ns;
  if (ShiftedRealtime(&ns) != 0) return (time_t)-1;
  time_t t = (time_t)(ns / kNanosPerSecond);
  if (out != NULL) *out = t;
  return t;
}

SHIM_EXPORT int timespec_get(struct timespec* ts, int base) {
  if (base != TIME_UTC) return 0;
  int64_t ns;
  if (ShiftedRealtime(&ns) != 0) return 0;
  FromNanos(ns, ts);
  return base;
}
