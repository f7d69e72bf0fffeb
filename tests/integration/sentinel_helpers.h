// What the tests of replicated nodes and of Sentinel discovery share
// (replication_test.cc, sentinel_tls_test.cc): a master with one replica,
// watched by a Sentinel, that fails over to the replica.

#ifndef REDLOCK_TESTS_INTEGRATION_SENTINEL_HELPERS_H_
#define REDLOCK_TESTS_INTEGRATION_SENTINEL_HELPERS_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "redlock/client.h"
#include "testkit/gtest_fleet.h"
#include "testkit/replication.h"

namespace redlock {

// The string a command answered, or "" (an error, nil, another type).
inline std::string Get(const absl::StatusOr<testkit::RedisValue>& v) {
  return v.ok() && v->type == testkit::RedisValue::Type::kString ? v->str : "";
}

// The value of `s`, or T{} with a failure of the current test naming its
// status.
template <typename T>
T ValueOrFail(absl::StatusOr<T> s) {
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : T{};
}

// TryAcquire("r"), retried (bounded) while the client reconnects to the new
// master.
inline absl::StatusOr<Lease> AcquireWithin(Client& client, absl::Duration budget) {
  absl::StatusOr<Lease> r = absl::UnknownError("not tried");
  const absl::Time end = absl::Now() + budget;
  for (int i = 0; i < 1000 && absl::Now() < end; ++i) {
    r = client.TryAcquire("r", absl::Seconds(10));
    if (r.ok() || !absl::IsUnavailable(r.status())) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return r;
}

// Acquires "r" (AcquireWithin 10 s) and releases it. Fatal failures: call it
// within ASSERT_NO_FATAL_FAILURE.
inline void AcquireAndRelease(Client& client) {
  absl::StatusOr<Lease> lease = AcquireWithin(client, absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  REDLOCK_ASSERT_OK(client.Release(*lease));
}

// Waits until `sentinel` names replica 0 of `replicas` as master "n0" in
// place of `old_master`. Fatal failures: call it within
// ASSERT_NO_FATAL_FAILURE.
inline void AwaitFailoverToTheReplica(testkit::Sentinel& sentinel, const std::string& old_master,
                                      testkit::Replicas& replicas) {
  absl::StatusOr<std::string> now = sentinel.AwaitFailover("n0", old_master, absl::Seconds(30));
  ASSERT_TRUE(now.ok()) << now.status();
  ASSERT_EQ(*now, replicas.address(0, 0));
}

// Waits until `sentinel` names a new master "n0" in place of `old_master`:
// `client` acquires "r" within 10 s, on that master. Fatal failures: call it
// within ASSERT_NO_FATAL_FAILURE.
inline void ExpectTheClientToFollowTheFailover(testkit::Sentinel& sentinel,
                                               const std::string& old_master, Client& client) {
  absl::StatusOr<std::string> now = sentinel.AwaitFailover("n0", old_master, absl::Seconds(30));
  ASSERT_TRUE(now.ok()) << now.status();
  absl::StatusOr<Lease> lease = AcquireWithin(client, absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(client.Health()[0].address, *now);
}

// After a failover to replica 0 of `replicas`: `client` acquires "r" within
// `budget`, and its `key` is on the new master. Fatal failures: call it
// within ASSERT_NO_FATAL_FAILURE.
inline void ExpectTheLockOnTheNewMaster(Client& client, testkit::Replicas& replicas,
                                        const std::string& key,
                                        absl::Duration budget = absl::Seconds(10)) {
  absl::StatusOr<Lease> lease = AcquireWithin(client, budget);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(Get(replicas.fleet().Command(0, {"GET", key})), lease->token())
      << "the lock is on the new master";
}

}  // namespace redlock

#endif  // REDLOCK_TESTS_INTEGRATION_SENTINEL_HELPERS_H_
