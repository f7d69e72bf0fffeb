// redlock/election.h: leader election on N independent Redis masters
// (campaign, resign, observe).
//
//   redlock::Election election(client.get(), "scheduler");
//   redlock::CampaignOptions campaign;
//   campaign.renew.on_at_risk = [](const redlock::Lease&, const absl::Status& why) {
//     StopTakingNewJobs();                                    // the lease may be lost soon
//   };
//   auto leadership = election.Campaign("host-a:4242", absl::InfiniteDuration(), stop, campaign);
//   if (!leadership.ok()) return leadership.status();        // stopped, or the client went
//   while (!(*leadership)->lost().stop_requested()) RunOneJob((*leadership)->term());
//   // (*leadership)->Resign(), or its destructor, lets the next candidate in at once.
//
//   absl::StatusOr<std::optional<redlock::LeaderInfo>> now = election.Observe();
//   if (now.ok() && *now) printf("%s leads, term %llu\n", (*now)->identity.c_str(), ...);
//
// What it promises, under the assumptions of the mutex (chaos/README.md, "Safety in brief"):
// - At most one leader at a time: leadership is a lock on the resource
//   with the client's quorum, validity and drift, renewed while it lasts.
// - The term is the leader's fencing token, taken with the fencing rounds
//   whatever Options::fencing says: it strictly increases across
//   successive leaders (also when node clocks jump; with counters that
//   survive restarts: appendfsync always). Pass it to whatever the leader
//   acts on, so a deposed leader that still believes it leads (paused past
//   its lease) is refused there.
// - The leader is told: Leadership::at_risk() and RenewOptions::on_at_risk
//   when its renewal fails and the validity runs low, lost() and
//   CampaignOptions::on_lost when the lease is lost (as Renewal does).
// - Candidates wait on release announcements: a leader that resigns (or
//   whose process exits cleanly) is replaced within a round trip; one that
//   dies (SIGKILL, a crash, a host gone) or hangs (SIGSTOP) is replaced
//   when its lease runs out, within about one ttl plus
//   Options::wait_poll_max (the bench's election rows measure it).
// - Observe() tells who leads now: the identity the leader gave to
//   Campaign (stored in its token on the nodes), its term and the time its
//   lease has left.
// Not promised: that a leader paused past its lease stops acting by itself
// (it learns of the loss when it runs again: check lost() and fence your
// writes with term()); fairness among candidates.
//
// Thread-safety: an Election is a thin wrapper; share it. A Leadership may
// be used from any thread.
// REQUIRES: the Client outlives both; it takes the lock family's calls
// (Client::AcquireFamily: made by Client::Create, or forwarding to one).

#ifndef REDLOCK_ELECTION_H_
#define REDLOCK_ELECTION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

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

// How a campaign's leadership is held: its lease's ttl, its renewal, and who to
// tell when it is lost.
struct CampaignOptions {
  // The leader's lease: renewed while it leads, and about how long a dead
  // leader keeps its successor waiting. Default: 10 s.
  absl::Duration ttl = absl::Seconds(10);
  // How the lease is renewed (redlock/renewal.h): the interval, limits, the
  // at-risk threshold and its callback. Default: every ttl/3, no limit.
  RenewOptions renew;
  // Called once, on the client's I/O thread, when leadership is lost
  // (not after Resign). Optional.
  std::function<void(const absl::Status&)> on_lost;
};

// Who leads (Election::Observe).
struct LeaderInfo {
  std::string identity;  // as given to Campaign
  uint64_t term = 0;     // the leader's fencing token (0: not readable on a quorum)
  std::string token;     // its lease's token on the nodes
  absl::Duration ttl_left = absl::ZeroDuration();  // on the quorum-th node
};

// This process leads. Destroying it resigns (errors swallowed).
class Leadership {
 public:
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // The election's resource, as given to Election.
  const std::string& resource() const { return resource_; }
  // This leader's identity, as given to Campaign (what Observe reports).
  const std::string& identity() const { return identity_; }
  // The term: strictly higher than every earlier leader's.
  uint64_t term() const { return lease_.fencing_token(); }
  // The lease as last renewed.
  Lease lease() const;
  // True until lost (or resigned) while the lease has validity left.
  bool leading() const;
  // True from the renewal's at-risk notification until an extension succeeds
  // (as Renewal::at_risk): stop starting work that needs leadership.
  bool at_risk() const;
  // Stopped when leadership is lost (as Renewal::lost()).
  StopToken lost() const;
  // OK while leading or after Resign; why it was lost otherwise.
  absl::Status status() const;
  // Stops renewing and releases the lease: a waiting candidate takes over
  // at once. Idempotent. kUnavailable when fewer than a quorum confirmed
  // (the lease then runs out at its ttl).
  [[nodiscard]] absl::Status Resign();

 private:
  friend class Election;
  Leadership(Client* client, std::string resource, std::string identity, Lease lease,
             std::unique_ptr<Renewal> renewal);

  Client* const client_;
  const std::string resource_;
  const std::string identity_;
  const Lease lease_;
  std::unique_ptr<Renewal> renewal_;
  std::atomic<bool> resigned_{false};
};

// Election: leader election on one resource of a Client's nodes (see the top of
// this file). A thin wrapper: share it.
class Election {
 public:
  // Identities longer than this are refused (they travel in every token).
  static constexpr size_t kMaxIdentity = 256;

  // An election on `resource` (a lock name, as Client takes it). REQUIRES:
  // `client` is not null, outlives the Election, and was made by
  // Client::Create.
  Election(Client* client, std::string resource);

  // One attempt. kAborted: someone else leads.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Leadership>> TryCampaign(
      absl::string_view identity, CampaignOptions options = CampaignOptions());
  // Until this process leads, `wait` passed (kDeadlineExceeded) or `stop`
  // (kCancelled). `wait` may be infinite.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<Leadership>> Campaign(
      absl::string_view identity, absl::Duration wait, const StopToken& stop = StopToken(),
      CampaignOptions options = CampaignOptions());

  // The asynchronous form of Campaign (a zero `wait` is one attempt);
  // `done` runs once, on the client's I/O thread.
  using LeadershipCallback = absl::AnyInvocable<void(absl::StatusOr<std::unique_ptr<Leadership>>)>;
  // Campaign, asynchronously (see LeadershipCallback above).
  void CampaignAsync(absl::string_view identity, absl::Duration wait, const StopToken& stop,
                     CampaignOptions options, LeadershipCallback done);

  // Who leads now: the identity whose token a quorum of nodes holds;
  // nullopt when none does. kUnavailable when fewer than a quorum answered.
  [[nodiscard]] absl::StatusOr<std::optional<LeaderInfo>> Observe();

  // The resource it was created with.
  const std::string& resource() const { return resource_; }

  // The identity carried by a leader's lease token ("" for other tokens).
  static std::string IdentityOf(absl::string_view token);

 private:
  // The request to the Client (Client::AcquireFamily, InspectFamily).
  Client::FamilyRequest Request(absl::string_view identity, std::optional<absl::Duration> wait,
                                const StopToken& stop, const CampaignOptions& options) const;
  // A granted lease becomes a renewed Leadership (non-blocking).
  static absl::StatusOr<std::unique_ptr<Leadership>> Adopt(
      Client* client, std::string resource, std::string identity, const CampaignOptions& options,
      absl::StatusOr<Client::FamilyGrant> granted);
  absl::StatusOr<std::unique_ptr<Leadership>> LeadBlocking(absl::string_view identity,
                                                           std::optional<absl::Duration> wait,
                                                           const StopToken& stop,
                                                           CampaignOptions options);

  Client* const client_;
  const std::string resource_;
};

}  // namespace redlock

#endif  // REDLOCK_ELECTION_H_
