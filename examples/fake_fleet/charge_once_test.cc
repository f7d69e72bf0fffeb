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

std::unique_ptr<FakeFleet> Fleet() {
  redlock::Options options;
  options.fencing = true;  // the ledger checks the tokens
  // The fleet runs in real time: a node timeout a loaded test machine does
  // not reach by accident.
  options.node_timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<FakeFleet>> fleet = FakeFleet::Create(3, options);
  EXPECT_TRUE(fleet.ok()) << fleet.status();
  return fleet.ok() ? *std::move(fleet) : nullptr;
}

TEST(ChargeOnceTest, ManyWorkersChargeOnce) {
  std::unique_ptr<FakeFleet> fleet = Fleet();
  ASSERT_NE(fleet, nullptr);
  Ledger ledger;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    absl::StatusOr<std::unique_ptr<redlock::Client>> client = fleet->NewClient();
    ASSERT_TRUE(client.ok()) << client.status();
    workers.emplace_back([&ledger, client = *std::move(client)] {
      for (int attempt = 0; attempt < 50; ++attempt) {
        absl::Status st = ChargeOnce(*client, ledger, "order-1", 1999);
        if (!absl::IsAborted(st)) {
          EXPECT_TRUE(st.ok()) << st;
          return;
        }
      }
      ADD_FAILURE() << "still aborted after 50 attempts";
    });
  }
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(ledger.charges(), 1);
}

TEST(ChargeOnceTest, LockServiceDownIsUnavailableAndChargesNothing) {
  std::unique_ptr<FakeFleet> fleet = Fleet();
  ASSERT_NE(fleet, nullptr);
  Ledger ledger;
  ASSERT_TRUE(fleet->Stop(0).ok());
  ASSERT_TRUE(fleet->Stop(1).ok());
  absl::Status st = ChargeOnce(fleet->client(), ledger, "order-2", 500);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_FALSE(ledger.Charged("order-2"));

  ASSERT_TRUE(fleet->Start(0).ok());
  ASSERT_TRUE(fleet->Start(1).ok());
  EXPECT_TRUE(ChargeOnce(fleet->client(), ledger, "order-2", 500).ok());
  EXPECT_TRUE(ledger.Charged("order-2"));
}

TEST(ChargeOnceTest, OrderHeldByAnotherWorkerIsAborted) {
  std::unique_ptr<FakeFleet> fleet = Fleet();
  ASSERT_NE(fleet, nullptr);
  Ledger ledger;
  absl::StatusOr<std::unique_ptr<redlock::Client>> other = fleet->NewClient();
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<redlock::Lease> held = (*other)->Acquire("charge/order-3", absl::Seconds(30));
  ASSERT_TRUE(held.ok()) << held.status();
  absl::Status st = ChargeOnce(fleet->client(), ledger, "order-3", 500);
  EXPECT_TRUE(absl::IsAborted(st)) << st;
  EXPECT_FALSE(ledger.Charged("order-3"));
}

TEST(ChargeOnceTest, WorkerWhoseLeaseRanOutCannotChargeAfterTheNextHolder) {
  std::unique_ptr<FakeFleet> fleet = Fleet();
  ASSERT_NE(fleet, nullptr);
  Ledger ledger;
  absl::StatusOr<std::unique_ptr<redlock::Client>> second = fleet->NewClient();
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status second_result;
  // While the first worker talks to the card processor, two nodes' clocks
  // jump past its lease's ttl, and a second worker takes the order over.
  absl::Status first_result = ChargeOnce(fleet->client(), ledger, "order-4", 500, [&] {
    ASSERT_TRUE(fleet->JumpClock(0, absl::Seconds(10)).ok());
    ASSERT_TRUE(fleet->JumpClock(1, absl::Seconds(10)).ok());
    second_result = ChargeOnce(**second, ledger, "order-4", 500);
  });
  EXPECT_TRUE(second_result.ok()) << second_result;
  EXPECT_TRUE(absl::IsFailedPrecondition(first_result)) << first_result;
  EXPECT_EQ(ledger.charges(), 1);
}

}  // namespace
}  // namespace payments
