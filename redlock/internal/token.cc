#include "redlock/internal/token.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "redlock/internal/random_source.h"

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

namespace {

// Tokens per getrandom(2): one system call per acquisition was 3 % of the
// client's time under load. The bytes are the kernel's either way; the
// buffer is per thread (no lock) and refilled in a child after fork(), which
// would otherwise hand out the same tokens as its parent.
constexpr size_t kTokensPerFill = 128;

// Which process a buffer was filled in: bumped in the child of every fork()
// (pthread_atfork). Reading it is a load, where asking getpid(2) for every
// token was a system call each (1.8 % of the client's CPU with 64 async
// chains at N=5, bench/README.md).
std::atomic<uint64_t> fork_generation{1};
void OnForkChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

uint64_t ProcessGeneration() {
  static const bool registered = pthread_atfork(nullptr, nullptr, &OnForkChild) == 0;
  // Without the handler (pthread_atfork out of memory), the pid, asked each
  // time: a child has another.
  if (!registered) return static_cast<uint64_t>(getpid()) << 32;
  return fork_generation.load(std::memory_order_relaxed);
}

struct TokenBytes {
  unsigned char bytes[kTokensPerFill * kTokenBytes];
  size_t next = sizeof(bytes);  // empty
  uint64_t generation = 0;
};

const unsigned char* NextTokenBytes() {
  thread_local TokenBytes buf;
  const uint64_t generation = ProcessGeneration();
  if (buf.next + kTokenBytes > sizeof(buf.bytes) || buf.generation != generation) {
    if (!SystemRandom(buf.bytes, sizeof(buf.bytes))) {
      std::fputs("redlock: no source of randomness (getrandom and /dev/urandom failed)\n", stderr);
      std::abort();
    }
    buf.next = 0;
    buf.generation = generation;
  }
  const unsigned char* raw = buf.bytes + buf.next;
  buf.next += kTokenBytes;
  return raw;
}

}  // namespace

std::string NewToken() {
  unsigned char drawn[kTokenBytes];
  const unsigned char* raw;
  if (RandomSource* test = TestRandomSource()) {
    // A test's seeded source (random_source.h): one draw per token, so that
    // the same seed gives the same tokens in the same order.
    test->Fill(drawn, sizeof(drawn));
    raw = drawn;
  } else {
    raw = NextTokenBytes();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * kTokenBytes, '0');
  for (int i = 0; i < kTokenBytes; ++i) {
    out[2 * i] = kHex[raw[i] >> 4];
    out[2 * i + 1] = kHex[raw[i] & 0xf];
  }
  // Used once: nothing of a token stays behind in the buffer.
  std::memset(const_cast<unsigned char*>(raw), 0, kTokenBytes);
  return out;
}

}  // namespace redlock::internal
