// multilock/multi_lock.h: several resources locked all-or-nothing, and the
// all-nodes mode in which every node must agree.
//
// Usage:
//
//   auto client = redlock::Client::Create(options);
//   redlock::MultiLock multi((*client).get(), redlock::MultiLock::Mode::kAllNodes);
//   absl::StatusOr<redlock::MultiLease> lease =
//       multi.Acquire({"account/17", "account/4"}, absl::Seconds(5));
//   if (!lease.ok()) return lease.status();
//   Transfer(17, 4);  // both accounts are ours until lease->valid_until()
//   (void)multi.Release(*lease);
//
// All or nothing: on each node one Lua script sets every key only if none of
// them exists, so a node never holds part of a set; an attempt that does not
// get the required nodes removes what it set everywhere. Resources are
// deduplicated and sorted, so two MultiLocks over overlapping sets, listed in
// any order, can neither deadlock nor both hold (they contend on the same
// keys in the same order, and a node grants all or none).
//
// Keys are the same as Client's ("<key_prefix><resource>", value = token), so
// a MultiLock over {a, b} excludes a plain Client lock on b and the reverse.
//
// Modes:
//   kQuorum    a majority of nodes (Options::quorum) must grant the whole set.
//              Tolerates a minority of nodes down, like Client.
//   kAllNodes  every node must grant (quorum = N). A single stopped or dead
//              node makes acquisition fail, fast (about node_timeout, and at
//              once when the client already knows the node is down), with a
//              message naming the node; nothing is left on the others.
//              In exchange, a lock survives the loss or amnesia of N-1 nodes
//              instead of a minority (see docs/guide/multilock.md).
//
// Validity is computed as for Client (docs/design.md 5.3). With
// Options::fencing every resource of a lease gets its own fencing token. Retries and waits
// follow the client's own policy (Options::max_attempts, retry_delay,
// release_notifications, wait_poll_max).
//
// Thread-safety: a MultiLock is a thin, stateless wrapper; share it freely.
// REQUIRES: the Client outlives the MultiLock.
//
// Bad input (empty list, empty or over-long names, more than kMaxResources
// distinct resources, ttl too small) is kInvalidArgument, and nothing is sent.

#ifndef REDLOCK_MULTILOCK_MULTI_LOCK_H_
#define REDLOCK_MULTILOCK_MULTI_LOCK_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/client.h"
#include "redlock/lease.h"
#include "redlock/renewal.h"
#include "redlock/stop_token.h"

namespace redlock {

// A held set of locks, one Lease per resource, sharing one token and one
// validity. A copy names the same locks.
class MultiLease {
 public:
  MultiLease() = default;
  // The leases of one acquisition, one per resource in canonical order, all
  // with the same token (what MultiLock's calls build). A default-constructed
  // MultiLease holds nothing.
  explicit MultiLease(std::vector<Lease> leases) : leases_(std::move(leases)) {}

  // The resources in canonical (sorted, deduplicated) order.
  std::vector<std::string> resources() const;
  // Every resource's lease, in canonical order.
  const std::vector<Lease>& leases() const { return leases_; }
  // The token every resource of this acquisition holds ("" when empty).
  const std::string& token() const;
  // Fencing token of `resource` (0 without fencing or if not part of it):
  // each resource has its own counter.
  uint64_t fencing_token(absl::string_view resource) const;

  // Until when every resource is held: the validity of the acquisition (or of
  // the latest extension), shared by all its leases. A default TimePoint when
  // empty.
  Lease::TimePoint valid_until() const;
  // valid_until() minus now, or zero once it has passed (or when empty).
  absl::Duration TimeLeft() const;
  // How many nodes granted the acquisition (0 when empty).
  int nodes_granted() const;
  // True when it holds leases (a default-constructed MultiLease does not).
  bool has_value() const { return !leases_.empty(); }
  // has_value().
  explicit operator bool() const { return has_value(); }

 private:
  std::vector<Lease> leases_;
};

// MultiLock: several resources locked all-or-nothing through one Client, with a
// quorum of nodes (kQuorum) or every node (kAllNodes) required; see the top of
// this file. Stateless: share it freely.
class MultiLock {
 public:
  // kQuorum: the client's quorum of nodes must grant every resource, as Client
  // does for one. kAllNodes: every node must grant (see the top of this file).
  enum class Mode { kQuorum, kAllNodes };

  // At most this many distinct resources per acquisition. Each node runs one
  // script over all keys, and a Lua script blocks its node while it runs: 256
  // keys keep that well under a millisecond, and keep the command sent to
  // every node small. Lock more by partitioning into coarser resources.
  static constexpr size_t kMaxResources = 256;

  // A MultiLock over `client`'s nodes. REQUIRES: `client` is not null and
  // outlives the MultiLock.
  explicit MultiLock(Client* client, Mode mode = Mode::kQuorum) : client_(client), mode_(mode) {}

  // One attempt.
  [[nodiscard]] absl::StatusOr<MultiLease> TryAcquire(std::vector<std::string> resources,
                                                      absl::Duration ttl);
  // Up to Options::max_attempts attempts (retry_delay +/- retry_jitter apart).
  // In kAllNodes mode it gives up at once, without retrying, when a node did
  // not answer (it is down: every node must grant).
  [[nodiscard]] absl::StatusOr<MultiLease> Acquire(std::vector<std::string> resources,
                                                   absl::Duration ttl);
  // Keeps trying until it holds every resource or `wait` has passed
  // (kDeadlineExceeded naming the last attempt's error); `wait` may be
  // infinite. Woken by release announcements, like Client::Acquire; `stop`
  // cancels it (kCancelled at once, nothing left on the nodes).
  [[nodiscard]] absl::StatusOr<MultiLease> Acquire(std::vector<std::string> resources,
                                                   absl::Duration ttl, absl::Duration wait,
                                                   const StopToken& stop = StopToken());
  // The asynchronous form of the above; `done` runs on the client's I/O
  // thread, exactly once.
  void AcquireAsync(std::vector<std::string> resources, absl::Duration ttl, absl::Duration wait,
                    const StopToken& stop,
                    absl::AnyInvocable<void(absl::StatusOr<MultiLease>)> done);
  // Extends every resource; succeeds only if the required nodes still hold
  // every key (kFailedPrecondition otherwise). Never re-creates a key.
  [[nodiscard]] absl::StatusOr<MultiLease> Extend(const MultiLease& lease, absl::Duration ttl);
  // Releases every resource. Idempotent.
  [[nodiscard]] absl::Status Release(const MultiLease& lease);
  // Keeps every resource of `lease` alive, as Client::AutoRenew does for one
  // lease (an extension needs every key on the required nodes); at-risk and
  // lost signals as there (redlock/renewal.h).
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Renewal>> AutoRenew(
      const MultiLease& lease, RenewOptions options,
      absl::AnyInvocable<void(absl::Status)> on_lost);

  // The canonical form of a resource list: sorted, duplicates removed, each
  // checked. kInvalidArgument for bad input.
  static absl::StatusOr<std::vector<std::string>> Canonical(std::vector<std::string> resources);

  // The mode it was created with.
  Mode mode() const { return mode_; }

 private:
  int RequiredNodes() const;
  Client::SetRequest Request(std::vector<std::string> canonical, absl::Duration ttl) const;

  Client* const client_;
  const Mode mode_;
};

}  // namespace redlock

#endif  // REDLOCK_MULTILOCK_MULTI_LOCK_H_
