// The test of "your code" (charge_once.h) against the fake fleet: no Redis,
// and the faults a real deployment meets, each in one line.

#include "charge_once.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "redlock/testing.h"

namespace payments {
namespace {

using redlock::testing::FakeFleet;

// Each test: a fresh fleet of three fake nodes, and the ledger.
class ChargeOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redlock::Options options;
    options.fencing = true;  // the ledger checks the tokens
    // The fleet runs in real time: a node timeout a loaded test machine does
    // not reach by accident.
    options.node_timeout = absl::Milliseconds(500);
    absl::StatusOr<std::unique_ptr<FakeFleet>> fleet = FakeFleet::Create(3, options);
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = *std::move(fleet);
  }

  // Another worker's client of the fleet.
  std::unique_ptr<redlock::Client> NewClient() {
    absl::StatusOr<std::unique_ptr<redlock::Client>> client = fleet_->NewClient();
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::unique_ptr<FakeFleet> fleet_;
  Ledger ledger_;
};

TEST_F(ChargeOnceTest, ManyWorkersChargeOnce) {
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    std::unique_ptr<redlock::Client> client = NewClient();
    ASSERT_NE(client, nullptr);
    workers.emplace_back([this, client = std::move(client)] {
      for (int attempt = 0; attempt < 50; ++attempt) {
        absl::Status st = ChargeOnce(*client, ledger_, "order-1", 1999);
        if (!absl::IsAborted(st)) {
          EXPECT_TRUE(st.ok()) << st;
          return;
        }
      }
      ADD_FAILURE() << "still aborted after 50 attempts";
    });
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(ledger_.charges(), 1);
}

TEST_F(ChargeOnceTest, LockServiceDownIsUnavailableAndChargesNothing) {
  ASSERT_TRUE(fleet_->Stop(0).ok());
  ASSERT_TRUE(fleet_->Stop(1).ok());
  absl::Status st = ChargeOnce(fleet_->client(), ledger_, "order-2", 500);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_FALSE(ledger_.Charged("order-2"));

  ASSERT_TRUE(fleet_->Start(0).ok());
  ASSERT_TRUE(fleet_->Start(1).ok());
  EXPECT_TRUE(ChargeOnce(fleet_->client(), ledger_, "order-2", 500).ok());
  EXPECT_TRUE(ledger_.Charged("order-2"));
}

TEST_F(ChargeOnceTest, OrderHeldByAnotherWorkerIsAborted) {
  std::unique_ptr<redlock::Client> other = NewClient();
  ASSERT_NE(other, nullptr);
  absl::StatusOr<redlock::Lease> held = other->Acquire("charge/order-3", absl::Seconds(30));
  ASSERT_TRUE(held.ok()) << held.status();
  absl::Status st = ChargeOnce(fleet_->client(), ledger_, "order-3", 500);
  EXPECT_TRUE(absl::IsAborted(st)) << st;
  EXPECT_FALSE(ledger_.Charged("order-3"));
}

TEST_F(ChargeOnceTest, WorkerWhoseLeaseRanOutCannotChargeAfterTheNextHolder) {
  std::unique_ptr<redlock::Client> second = NewClient();
  ASSERT_NE(second, nullptr);
  absl::Status second_result;
  // While the first worker talks to the card processor, two nodes' clocks
  // jump past its lease's ttl, and a second worker takes the order over.
  absl::Status first_result = ChargeOnce(fleet_->client(), ledger_, "order-4", 500, [&] {
    ASSERT_TRUE(fleet_->JumpClock(0, absl::Seconds(10)).ok());
    ASSERT_TRUE(fleet_->JumpClock(1, absl::Seconds(10)).ok());
    second_result = ChargeOnce(*second, ledger_, "order-4", 500);
  });
  EXPECT_TRUE(second_result.ok()) << second_result;
  EXPECT_TRUE(absl::IsFailedPrecondition(first_result)) << first_result;
  EXPECT_EQ(ledger_.charges(), 1);
}

}  // namespace
}  // namespace payments
