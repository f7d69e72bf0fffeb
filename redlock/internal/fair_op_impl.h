// The fair acquisition's operation (fair_op.h; docs/design.md 5.17): its
// state, shared by the files of its jobs. fair_op.cc decodes the replies,
// builds the operation and hands the loop its hooks; fair_attempts.cc runs
// the stages' rounds (probe, ticket, head check) and the grant;
// fair_place.cc keeps the place alive (the heartbeat), notices its loss and
// leaves the queue at the end.

#ifndef REDLOCK_INTERNAL_FAIR_OP_IMPL_H_
#define REDLOCK_INTERNAL_FAIR_OP_IMPL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "redlock/internal/attempt_loop.h"
#include "redlock/internal/fair_op.h"
#include "redlock/internal/lease_factory.h"
#include "redlock/internal/node_calls.h"
#include "redlock/lease.h"
#include "redlock/observer.h"

namespace redlock::internal {

struct FairNodeState {
  bool granted = false;   // this attempt set the lock key there
  uint64_t counter = 0;   // with fencing, read by the grant
  NodeResult result;      // for the Outcome
  ConnectionId conn = 0;  // where the attempt went (0: not sent)
};

class FairOp : public AttemptLoop<FairOp, FairNodeState, Lease> {
 public:
  // `waiter`: this call's id in the queue (a fresh token).
  FairOp(OpContext* ctx, FairRequest request, std::string waiter, FairCallback done);

  void Start() { AttemptLoop::Start(ReleaseWatches::Wakeup::kOldest); }

 private:
  friend AttemptLoop;

  enum class Stage : int { kProbe, kRegister, kQueued };

  std::string What() const { return absl::StrCat("fair acquire \"", request_.resource, "\""); }
  std::vector<std::string> ScriptKeys() const;

  // ---- The attempts (fair_attempts.cc) ------------------------------------------------

  Command Round1Locked();
  NodeCalls::Judge Round1Judge() const;
  bool Round1Durable() const;
  void OnRound1(int attempt, int node, NodeCalls::Answer a);
  void RecordRound1Locked(int node, Vote v);
  void StartRound2Locked();
  void CommittedLocked() { SucceedLocked(fence_); }
  void SucceedLocked(uint64_t fence);
  absl::Duration RetryDelayLocked(absl::Duration policy) const;

  // ---- The place (fair_place.cc) ------------------------------------------------------

  std::function<void()> NotePlacedLocked();
  void ArmHeartbeatLocked(absl::Duration after);
  void Heartbeat();
  void OnHeartbeat(uint64_t seq, int node, NodeCalls::Answer a);
  bool PlaceLostLocked(absl::Status status);
  void PostAfterUnlock();
  void Finish(bool granted);

  // ---- The loop's hooks (attempt_loop.h) ----------------------------------------------

  int quorum() const { return quorum_; }
  bool FreedByCleanupLocked(int node) const { return nodes_[static_cast<size_t>(node)].granted; }
  void FillRelease(KeysRelease* release) const;
  static void SetConnections(Lease* lease, std::shared_ptr<std::vector<ConnectionId>> conns) {
    LeaseFactory::SetConnections(lease, std::move(conns));
  }
  void FillEvent(const absl::StatusOr<Lease>& result, AcquireEvent* event) const;

  const FairRequest request_;
  const std::string key_;
  const std::vector<std::string> fair_keys_;  // W, its queue, the places' expiries
  const bool fencing_;
  const std::string counter_;  // with fencing
  const std::string waiter_;   // this call's id in the queue
  // Grants an attempt needs (F with fencing), and places a registration or
  // heartbeat needs (the request's quorum: a majority).
  const int quorum_;
  const int place_quorum_;
  const int64_t ttl_ms_;
  const absl::Duration drift_;
  const absl::Duration place_ttl_;
  const absl::Duration place_drift_;
  const absl::Duration period_;  // between heartbeats

  // Under mu_, as the loop's state.
  Stage stage_ = Stage::kProbe;
  // The stage of the attempt in flight (read by its fan-out without mu_).
  std::atomic<Stage> attempt_stage_{Stage::kProbe};
  int probe_reads_ = 0;     // answers to the last probe
  uint64_t probe_max_ = 0;  // the highest ticket they gave
  uint64_t ticket_ = 0;
  bool register_sent_ = false;
  bool established_ = false;  // the place reached a quorum
  // The last registration or heartbeat that reached a quorum confirmed the
  // place: a node that lost it may put it back.
  bool confirmed_ = false;
  Clock::TimePoint place_valid_until_{};
  std::vector<bool> placed_;  // per node: holds the place, as last heard
  std::vector<bool> absent_;  // per node: said the place is not there
  Round round_;
  std::vector<int> round2_nodes_;
  uint64_t fence_ = 0;
  bool finished_ = false;
  // The heartbeat: its timer, and the round in flight.
  Transport::TimerId hb_timer_ = 0;
  uint64_t hb_seq_ = 0;
  Clock::TimePoint hb_start_{};
  int hb_present_ = 0, hb_absent_ = 0, hb_answered_ = 0;
  bool hb_confirmed_ = false;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_FAIR_OP_IMPL_H_
