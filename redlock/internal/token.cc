#include "redlock/internal/token.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

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

bool SystemRandom(unsigned char* buf, size_t n) {
  return FillFromGetrandom(buf, n) || FillFromUrandom(buf, n);
}

std::string NewToken() {
  unsigned char raw[kTokenBytes];
  if (!SystemRandom(raw, sizeof(raw))) {
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

}  // namespace redlock::internal
