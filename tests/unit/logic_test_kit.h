// The fixture the logic tests (tests/unit/*_logic_test.cc) share: a
// ClientImpl over fake nodes (tests/unit/fake_transport.h) and a fake clock,
// and the slot an asynchronous result lands in.

#ifndef REDLOCK_TESTS_UNIT_LOGIC_TEST_KIT_H_
#define REDLOCK_TESTS_UNIT_LOGIC_TEST_KIT_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "redlock/internal/client_impl.h"
#include "redlock/options.h"
#include "tests/unit/fake_transport.h"

namespace redlock::testkit {

// Where an asynchronous call's result lands: empty until its callback ran.
template <typename T>
using Slot = std::shared_ptr<std::optional<absl::StatusOr<T>>>;

template <typename T>
Slot<T> NewSlot() {
  return std::make_shared<std::optional<absl::StatusOr<T>>>();
}

// The callback that puts its result into `slot`.
template <typename T>
auto FillSlot(Slot<T> slot) {
  return [slot = std::move(slot)](absl::StatusOr<T> result) { slot->emplace(std::move(result)); };
}

// `o` with `nodes` fake endpoints, fake0 .. fake<nodes - 1> on port 6379, as
// its nodes.
inline Options WithFakeNodes(Options o, int nodes) {
  o.nodes.clear();
  for (int i = 0; i < nodes; ++i) {
    Endpoint ep;
    ep.host = "fake" + std::to_string(i);
    ep.port = 6379;
    o.nodes.push_back(ep);
  }
  return o;
}

class FakeNodesTest : public ::testing::Test {
 protected:
  // A new client of `o` over a new fake transport of as many nodes as `o`
  // lists (the previous client, if any, is gone first).
  void MakeClient(const Options& o) {
    client_.reset();
    transport_ = new FakeTransport(static_cast<int>(o.nodes.size()), &clock_);
    client_ = std::make_unique<internal::ClientImpl>(
        o, std::unique_ptr<internal::Transport>(transport_), &clock_);
  }

  // Starts an async single attempt and returns the slot its result lands in.
  Slot<Lease> TryAcquire(const std::string& resource = "r",
                         absl::Duration ttl = absl::Seconds(10)) {
    Slot<Lease> out = NewSlot<Lease>();
    client_->TryAcquireAsync(resource, ttl, FillSlot(out));
    return out;
  }

  // Releases `lease`, lets every node answer, and returns the release's
  // status (an error while it is undecided).
  absl::Status ReleaseAndAnswer(const Lease& lease) {
    absl::Status released = absl::UnknownError("release undecided");
    client_->ReleaseAsync(lease, [&](absl::Status s) { released = s; });
    transport_->AnswerEverything();
    return released;
  }

  bool HasKey(int node, const std::string& key) {
    return transport_->node(node).keys.count(key) > 0;
  }

  FakeClock clock_;
  FakeTransport* transport_ = nullptr;  // owned by client_
  std::unique_ptr<internal::ClientImpl> client_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTS_UNIT_LOGIC_TEST_KIT_H_
