// The lock family's shapes (family_shapes.h): a reader, a writer, a leader.

#include "redlock/internal/family_shapes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/family_scripts.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/token.h"

namespace redlock::internal {
namespace {

// Between a leader token's random part and its identity (hex).
constexpr char kIdentitySeparator = '.';

class Reader final : public AcquireShape {
 public:
  bool custom_scripts() const override { return true; }
  Command Round1(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, int64_t ttl_ms) const override {
    return ScriptCommand(RwReadAcquireScript(), RwKeys(keys[0], counters),
                         {token, std::to_string(ttl_ms)});
  }
  std::vector<std::string> Keys(const std::vector<std::string>& keys,
                                const std::vector<std::string>& counters) const override {
    return RwKeys(keys[0], counters);
  }
  Command Commit(const std::vector<std::string>& keys, const std::vector<std::string>& counters,
                 const std::string& token, const std::vector<uint64_t>& fences) const override {
    return ScriptCommand(RwReadCommitScript(), {absl::StrCat(keys[0], kReadersSuffix), counters[0]},
                         {token, std::to_string(fences[0])});
  }
  Command Cleanup(const std::vector<std::string>& keys, const std::string& token) const override {
    return ReleaseCommand(LeaseKind::kShared, keys, token, "");
  }
  // Strictly above every writer before it, shared with the readers that
  // overlap it (ReaderFence, algorithm.h); written to its quorum, so that
  // every later writer reads at least that and goes above it.
  absl::StatusOr<uint64_t> Fence(const std::vector<uint64_t>& seen) const override {
    return ReaderFence(seen);
  }
  LeaseKind kind() const override { return LeaseKind::kShared; }
  bool shared_wakeups() const override { return true; }
};

// A leader's token carries its identity, so that any process reading the
// lock key knows who leads; the random part keeps it unguessable. The term
// is the fencing token, whatever Options::fencing says.
class Leader final : public AcquireShape {
 public:
  explicit Leader(std::string identity_hex) : identity_hex_(std::move(identity_hex)) {}
  std::string Token() const override {
    std::string t = NewToken();
    if (!identity_hex_.empty())
      absl::StrAppend(&t, std::string(1, kIdentitySeparator), identity_hex_);
    return t;
  }
  bool force_fencing() const override { return true; }
  // The term counts this resource's elections: its own counter, even when
  // the namespace shares one (Options::FencingCounters::kShared).
  bool own_counters() const override { return true; }

 private:
  const std::string identity_hex_;
};

}  // namespace

std::vector<std::string> RwKeys(const std::string& w, const std::vector<std::string>& counters) {
  std::vector<std::string> k = {w, absl::StrCat(w, kReadersSuffix),
                                absl::StrCat(w, kWaitingSuffix)};
  if (!counters.empty()) k.push_back(counters[0]);
  return k;
}

std::shared_ptr<const AcquireShape> ReadShape() { return std::make_shared<Reader>(); }

std::shared_ptr<const AcquireShape> LeaderShape(std::string identity_hex) {
  return std::make_shared<Leader>(std::move(identity_hex));
}

Command WriteShape::Round1(const std::vector<std::string>& keys,
                           const std::vector<std::string>& counters, const std::string& token,
                           int64_t ttl_ms) const {
  attempts_.fetch_add(1, std::memory_order_relaxed);
  return ScriptCommand(RwWriteAcquireScript(), RwKeys(keys[0], counters),
                       {token, std::to_string(ttl_ms), waiter_, std::to_string(intent_ms_)});
}

std::vector<std::string> WriteShape::Keys(const std::vector<std::string>& keys,
                                          const std::vector<std::string>& counters) const {
  return RwKeys(keys[0], counters);
}

// Odd: above every reader and writer before it (WriterFence, algorithm.h).
absl::StatusOr<uint64_t> WriteShape::Fence(const std::vector<uint64_t>& seen) const {
  return WriterFence(seen);
}

// A waiter attempts again at least every wait_poll_max (and at every
// announcement), so twice that plus two round trips' deadlines.
int64_t IntentMs(const Options& o) {
  return std::max<int64_t>(100,
                           absl::ToInt64Milliseconds(2 * o.wait_poll_max + 2 * o.node_timeout));
}

}  // namespace redlock::internal
