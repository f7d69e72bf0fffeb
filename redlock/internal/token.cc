#include "redlock/internal/token.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>

namespace redlock::internal {
namespace {

bool FillFromGetrandom(unsigned char* buf, size_t n) {
  size_t got = 0;
  for (int tries = 0; got < n && tries < 100; ++tries) {
    ssize_t r = getrandom(buf + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      return false;
    }
  }
  return got == n;
}

bool FillFromUrandom(unsigned char* buf, size_t n) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  for (int tries = 0; got < n && tries < 100; ++tries) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0 || errno != EINTR) {
      break;
    }
  }
  close(fd);
  return got == n;
}

}  // namespace

std::string NewToken() {
  unsigned char raw[kTokenBytes];
  if (!FillFromGetrandom(raw, sizeof(raw)) && !FillFromUrandom(raw, sizeof(raw))) {
    std::fputs("redlock: no source of randomness (getrandom and /dev/urandom failed)\n", stderr);
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * kTokenBytes, '0');
  for (int i = 0; i < kTokenBytes; ++i) {
    out[2 * i] = kHex[raw[i] >> 4];
    out[2 * i + 1] = kHex[raw[i] & 0xf];
  }
  return out;
}

namespace {

std::mt19937_64& ThreadRng() {
  thread_local std::mt19937_64 rng = [] {
    uint64_t seed = 0;
    unsigned char raw[sizeof(seed)];
    if (!FillFromGetrandom(raw, sizeof(raw)) && !FillFromUrandom(raw, sizeof(raw))) {
      seed = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&seed)) ^ 0x9e3779b97f4a7c15ull;
    } else {
      for (unsigned char b : raw) seed = (seed << 8) | b;
    }
    return std::mt19937_64(seed);
  }();
  return rng;
}

}  // namespace

double UniformReal(double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(ThreadRng());
}

int64_t UniformInt(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(ThreadRng());
}

}  // namespace redlock::internal
