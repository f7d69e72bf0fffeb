#include "redlock/internal/client_impl.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/algorithm.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/node_identity.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/scripts.h"
#include "redlock/internal/status_macros.h"
#include "redlock/internal/token.h"

namespace redlock::internal {
namespace {

using Vote = Round::Vote;
using Outcome = Round::Outcome;

absl::Duration Since(Clock::TimePoint now, Clock::TimePoint start) {
  return absl::FromChrono(now - start);
}

// The vote of a node whose reply did not arrive.
Vote VoteForTransportError(const absl::Status& s) {
  return absl::IsCancelled(s) ? Vote::kCancelled : Vote::kUnavailable;
}

std::vector<std::string> FenceKeys(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(absl::StrCat(k, kFenceSuffix));
  return out;
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---------------------------------------------------------------------------
// Acquire: attempts of one round (two with fencing) over all nodes.

class AcquireOp : public std::enable_shared_from_this<AcquireOp> {
 public:
  AcquireOp(ClientImpl* client, std::vector<std::string> resources, absl::Duration ttl, int quorum,
            RetryPolicy policy, Client::LeasesCallback done)
      : client_(client),
        resources_(std::move(resources)),
        ttl_(ttl),
        ttl_ms_(absl::ToInt64Milliseconds(ttl)),
        quorum_(quorum),
        policy_(std::move(policy)),
        done_(std::move(done)),
        what_(absl::StrCat("acquire ", DescribeResources(resources_))),
        round_(client->transport().size(), quorum) {
    for (const auto& r : resources_) keys_.push_back(client_->Key(r));
    fencing_ = client_->options().fencing;
    const Options& o = client_->options();
    drift_ = DriftAllowance(absl::Milliseconds(ttl_ms_), o.clock_drift_factor, o.clock_drift_floor);
    pause_ = std::max(o.retry_delay / 4, absl::Milliseconds(1));
    if (policy_.deadline.has_value() && o.release_notifications) {
      // Before the first attempt, so a release that lands between a failed
      // attempt and the wait is not missed.
      watch_ = client_->MakeWatch(resources_, /*for_user=*/false);
    }
  }

  // Runs the first attempt's fan-out on the calling thread.
  void Start() { StartAttempt(); }

 private:
  struct NodeState {
    bool granted = false;
    std::vector<uint64_t> counters;  // fencing round 1
  };

  Transport& transport() { return client_->transport(); }
  int n() { return transport().size(); }

  void StartAttempt() {
    Command command;
    int attempt;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (transport().stopping()) {
        SetResultLocked(absl::CancelledError(absl::StrCat(what_, ": the client is shutting down")));
        lock.unlock();
        Deliver();
        return;
      }
      attempt = ++attempt_;
      token_ = NewToken();
      start_ = client_->clock().Now();
      phase_ = Phase::kRound1;
      failed_ = false;
      round_ = Round(n(), quorum_);
      nodes_.assign(static_cast<size_t>(n()), NodeState{});
      sent_ = 0;
      fanout_active_ = true;
      if (fencing_) {
        command = ScriptCommand(FenceAcquireScript(), Concat(keys_, FenceKeys(keys_)),
                                {token_, std::to_string(ttl_ms_)});
      } else if (keys_.size() == 1) {
        // The classic single-key form, identical to every other Redlock client.
        command.payload =
            EncodeCommand({"SET", keys_[0], token_, "NX", "PX", std::to_string(ttl_ms_)});
        command.expect = kExpectStatus | kExpectNil;
      } else {
        command = ScriptCommand(AcquireSetScript(), keys_, {token_, std::to_string(ttl_ms_)});
      }
      command.op = "acquire";
    }
    // The fan-out runs without mu_, so replies are counted while later nodes
    // are still being sent to. If the attempt fails meanwhile, the decider
    // releases the nodes sent so far (sent_) and this loop releases each
    // node whose send was in progress, and sends no more: a release never
    // overtakes its SET on a node's ordered connection.
    auto self = shared_from_this();
    for (int i = 0; i < n(); ++i) {
      transport().Send(i, command, [self, attempt, i](absl::StatusOr<Reply> r) {
        self->OnRound1(attempt, i, std::move(r));
      });
      std::lock_guard<std::mutex> lock(mu_);
      sent_ = i + 1;
      if (failed_) {
        SendRelease(i);
        break;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      fanout_active_ = false;
    }
    Deliver();
  }

  void OnRound1(int attempt, int node, absl::StatusOr<Reply> r) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (attempt != attempt_ || phase_ != Phase::kRound1) return;  // decided already
      const std::string& name = transport().NodeName(node);
      Vote vote;
      std::string detail;
      Classify(r, node, &vote, &detail);
      Outcome outcome = round_.Record(name, vote, detail);
      if (outcome == Outcome::kSucceeded) {
        if (fencing_) {
          StartRound2Locked();
        } else {
          SucceedLocked(round_.yes(), {});
        }
      } else if (outcome == Outcome::kFailed) {
        FailAttemptLocked(
            round_.Failure(what_, "granted", "held by another client", absl::StatusCode::kAborted));
      }
    }
    Deliver();
  }

  void Classify(const absl::StatusOr<Reply>& r, int node, Vote* vote, std::string* detail) {
    if (!r.ok()) {
      *vote = VoteForTransportError(r.status());
      *detail = std::string(r.status().message());
      return;
    }
    const Reply& reply = *r;
    if (reply.is_error()) {
      *vote = VoteForErrorReply(reply.str);
      *detail = reply.str;
      return;
    }
    if (fencing_) {
      if (reply.type == Reply::Type::kArray && !reply.elements.empty() &&
          reply.elements[0].type == Reply::Type::kInteger) {
        if (reply.elements[0].integer < 0) {
          *vote = Vote::kRefused;
          return;
        }
        if (reply.elements[0].integer == 1 && reply.elements.size() == keys_.size() + 1) {
          std::vector<uint64_t> counters;
          for (size_t j = 1; j < reply.elements.size(); ++j) {
            absl::StatusOr<uint64_t> c = ParseCounter(reply.elements[j].str);
            if (!c.ok()) {
              // The key was set; it is released with the attempt or lease.
              *vote = Vote::kInternal;
              *detail = std::string(c.status().message());
              return;
            }
            counters.push_back(*c);
          }
          nodes_[static_cast<size_t>(node)].granted = true;
          nodes_[static_cast<size_t>(node)].counters = std::move(counters);
          *vote = Vote::kYes;
          return;
        }
      }
    } else if (keys_.size() == 1) {
      if (reply.IsStatus("OK")) {
        nodes_[static_cast<size_t>(node)].granted = true;
        *vote = Vote::kYes;
        return;
      }
      if (reply.is_nil()) {
        *vote = Vote::kRefused;
        return;
      }
    } else if (reply.type == Reply::Type::kInteger) {
      if (reply.integer == 1) {
        nodes_[static_cast<size_t>(node)].granted = true;
        *vote = Vote::kYes;
        return;
      }
      if (reply.integer < 0) {
        *vote = Vote::kRefused;
        return;
      }
    }
    *vote = Vote::kInternal;
    *detail = absl::StrCat("unexpected reply ", reply.Describe());
  }

  // Fencing round 2 (DESIGN.md 4.5): T = 1 + max of the counters read from
  // exactly the nodes counted so far; only they take part.
  void StartRound2Locked() {
    round2_nodes_.clear();
    fences_.clear();  // an earlier attempt's round 2 may have filled it
    std::vector<std::string> fences;
    for (size_t j = 0; j < keys_.size(); ++j) {
      std::vector<uint64_t> seen;
      for (int i = 0; i < n(); ++i) {
        if (nodes_[static_cast<size_t>(i)].granted)
          seen.push_back(nodes_[static_cast<size_t>(i)].counters[j]);
      }
      absl::StatusOr<uint64_t> t = NextFence(seen);
      if (!t.ok()) {
        FailAttemptLocked(
            absl::Status(t.status().code(), absl::StrCat(what_, ": ", t.status().message())));
        return;
      }
      fences_.push_back(*t);
      fences.push_back(std::to_string(*t));
    }
    for (int i = 0; i < n(); ++i) {
      if (nodes_[static_cast<size_t>(i)].granted) round2_nodes_.push_back(i);
    }
    phase_ = Phase::kRound2;
    round_ = Round(static_cast<int>(round2_nodes_.size()), quorum_);
    std::vector<std::string> args;
    args.push_back(token_);
    for (auto& f : fences) args.push_back(std::move(f));
    Command command = ScriptCommand(FenceCommitScript(), Concat(keys_, FenceKeys(keys_)), args);
    command.op = "fence-commit";
    for (int i : round2_nodes_) {
      transport().Send(i, command,
                       [self = shared_from_this(), a = attempt_, i](absl::StatusOr<Reply> r) {
                         self->OnRound2(a, i, std::move(r));
                       });
    }
  }

  void OnRound2(int attempt, int node, absl::StatusOr<Reply> r) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (attempt != attempt_ || phase_ != Phase::kRound2) return;
      Vote vote;
      std::string detail;
      if (!r.ok()) {
        vote = VoteForTransportError(r.status());
        detail = std::string(r.status().message());
      } else if (r->is_error()) {
        vote = VoteForErrorReply(r->str);
        detail = r->str;
      } else if (r->type == Reply::Type::kInteger && r->integer == 1) {
        vote = Vote::kYes;
      } else if (r->type == Reply::Type::kInteger && r->integer == 0) {
        vote = Vote::kRefused;
      } else {
        vote = Vote::kInternal;
        detail = absl::StrCat("unexpected reply ", r->Describe());
      }
      Outcome outcome = round_.Record(transport().NodeName(node), vote, detail);
      if (outcome == Outcome::kSucceeded) {
        SucceedLocked(round_.yes(), fences_);
      } else if (outcome == Outcome::kFailed) {
        FailAttemptLocked(round_.Failure(absl::StrCat(what_, " (fencing round)"), "confirmed",
                                         "lost the key before confirming",
                                         absl::StatusCode::kAborted));
      }
    }
    Deliver();
  }

  void SucceedLocked(int granted, const std::vector<uint64_t>& fences) {
    Clock::TimePoint now = client_->clock().Now();
    absl::Duration elapsed = Since(now, start_);
    absl::Duration validity = Validity(absl::Milliseconds(ttl_ms_), elapsed, drift_);
    if (validity <= absl::ZeroDuration()) {
      FailAttemptLocked(absl::DeadlineExceededError(absl::StrCat(
          what_, ": ", round_.Summary(fencing_ ? "confirmed" : "granted", ""),
          " but no validity was left: the attempt took ", absl::FormatDuration(elapsed), " of the ",
          ttl_ms_, "ms ttl (drift allowance ", absl::FormatDuration(drift_), ")")));
      return;
    }
    phase_ = Phase::kDone;
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    std::vector<Lease> leases;
    leases.reserve(resources_.size());
    for (size_t j = 0; j < resources_.size(); ++j) {
      leases.emplace_back(resources_[j], token_, absl::Milliseconds(ttl_ms_), start_, valid_until,
                          granted, fences.empty() ? 0 : fences[j]);
    }
    SetResultLocked(std::move(leases));
  }

  // Removes what this attempt may have set on node i. Cleanup class: it goes
  // out even to a node marked down, behind a SET that may still be waiting
  // on the same ordered connection.
  void SendRelease(int i) {
    Command release = ScriptCommand(ReleaseScript(), keys_, {token_, ""});
    release.cleanup = true;
    release.since = start_;
    release.op = "release";
    transport().Send(i, std::move(release), [](absl::StatusOr<Reply>) {});
  }

  void FailAttemptLocked(absl::Status status) {
    phase_ = Phase::kDone;
    failed_ = true;
    // Every node the SET went to: those that granted, and those that may
    // still execute a SET that timed out. Nodes not sent to yet are handled
    // by the fan-out loop (StartAttempt).
    for (int i = 0; i < sent_; ++i) SendRelease(i);
    if (absl::IsCancelled(status) || transport().stopping()) {
      SetResultLocked(std::move(status));
      return;
    }
    Clock::TimePoint now = client_->clock().Now();
    absl::Duration delay = client_->RetryDelay();
    if (policy_.deadline.has_value()) {
      absl::Duration left = absl::FromChrono(*policy_.deadline - now);
      if (left <= absl::ZeroDuration()) {
        SetResultLocked(absl::DeadlineExceededError(absl::StrCat(
            what_, ": not held after waiting ", absl::FormatDuration(policy_.wait), " (", attempt_,
            attempt_ == 1 ? " attempt" : " attempts", "); last attempt: ", status.message())));
        return;
      }
      // Growing, jittered polling pauses (capped at wait_poll_max), cut short
      // by a release announcement when notifications are on.
      delay = std::min(pause_ * UniformReal(0.5, 1.5), left);
      pause_ = std::min(pause_ * 2, client_->options().wait_poll_max);
      if (watch_ != nullptr) {
        watch_->WaitAsync(delay,
                          [self = shared_from_this()](absl::Status) { self->StartAttempt(); });
        return;
      }
    } else if (attempt_ >= policy_.max_attempts) {
      if (attempt_ > 1) {
        status = absl::Status(status.code(),
                              absl::StrCat(status.message(), " (after ", attempt_, " attempts)"));
      }
      SetResultLocked(std::move(status));
      return;
    }
    transport().RunAfter(delay, [self = shared_from_this()] { self->StartAttempt(); });
  }

  void SetResultLocked(absl::StatusOr<std::vector<Lease>> result) {
    phase_ = Phase::kDone;
    result_.emplace(std::move(result));
  }

  // Runs the user's callback once, outside mu_, and only after the fan-out
  // loop is done (a callback that releases the lease must not overtake a SET).
  void Deliver() {
    Client::LeasesCallback done;
    std::optional<absl::StatusOr<std::vector<Lease>>> result;
    std::unique_ptr<ReleaseWatch> watch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!result_.has_value() || !done_ || fanout_active_) return;
      done = std::move(done_);
      result = std::move(result_);
      result_.reset();
      watch = std::move(watch_);
    }
    watch.reset();  // unsubscribes
    done(*std::move(result));
  }

  enum class Phase { kRound1, kRound2, kDone };

  ClientImpl* const client_;
  const std::vector<std::string> resources_;
  std::vector<std::string> keys_;
  const absl::Duration ttl_;
  const int64_t ttl_ms_;
  const int quorum_;
  const RetryPolicy policy_;
  Client::LeasesCallback done_;
  const std::string what_;
  bool fencing_ = false;
  absl::Duration drift_;
  absl::Duration pause_;
  std::unique_ptr<ReleaseWatch> watch_;

  std::mutex mu_;
  int attempt_ = 0;
  std::string token_;
  Clock::TimePoint start_;
  Phase phase_ = Phase::kDone;
  bool failed_ = false;         // the current attempt failed
  int sent_ = 0;                // nodes [0, sent_) have this attempt's SET
  bool fanout_active_ = false;  // StartAttempt is still sending
  Round round_;
  std::vector<NodeState> nodes_;
  std::vector<int> round2_nodes_;
  std::vector<uint64_t> fences_;
  std::optional<absl::StatusOr<std::vector<Lease>>> result_;
};

// ---------------------------------------------------------------------------
// Release and extend: one round of a compare-and-act script.

class KeysOp : public std::enable_shared_from_this<KeysOp> {
 public:
  enum class Kind { kRelease, kExtend };

  KeysOp(ClientImpl* client, Kind kind, std::vector<Lease> leases, int64_t ttl_ms, int quorum,
         absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>)> done)
      : client_(client),
        kind_(kind),
        leases_(std::move(leases)),
        ttl_ms_(ttl_ms),
        done_(std::move(done)),
        round_(client->transport().size(), quorum) {
    std::vector<std::string> resources;
    for (const Lease& l : leases_) {
      resources.push_back(l.resource());
      keys_.push_back(client_->Key(l.resource()));
    }
    what_ = absl::StrCat(kind_ == Kind::kRelease ? "release " : "extend ",
                         DescribeResources(resources));
  }

  void Start() {
    std::unique_lock<std::mutex> lock(mu_);
    start_ = client_->clock().Now();
    const std::string& token = leases_[0].token();
    Command command;
    if (kind_ == Kind::kRelease) {
      command = ScriptCommand(ReleaseScript(), keys_, {token, std::string(kReleaseChannelPrefix)});
      command.cleanup = true;
      command.since = leases_[0].acquired_at();
      command.op = "release";
    } else {
      command = ScriptCommand(ExtendScript(), keys_, {token, std::to_string(ttl_ms_)});
      command.op = "extend";
    }
    Transport& t = client_->transport();
    for (int i = 0; i < t.size(); ++i) {
      Command c = i + 1 < t.size() ? command : std::move(command);
      t.Send(i, std::move(c), [self = shared_from_this(), i](absl::StatusOr<Reply> r) {
        self->OnReply(i, std::move(r));
      });
    }
  }

 private:
  void OnReply(int node, absl::StatusOr<Reply> r) {
    absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>)> done;
    std::optional<absl::StatusOr<std::vector<Lease>>> result;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!done_) return;  // decided already
      Vote vote;
      std::string detail;
      if (!r.ok()) {
        vote = VoteForTransportError(r.status());
        detail = std::string(r.status().message());
      } else if (r->is_error()) {
        vote = VoteForErrorReply(r->str);
        detail = r->str;
      } else if (r->type != Reply::Type::kInteger) {
        vote = Vote::kInternal;
        detail = absl::StrCat("unexpected reply ", r->Describe());
      } else if (kind_ == Kind::kRelease) {
        vote = Vote::kYes;  // deleted, or already gone: either way not held by us
      } else {
        vote = r->integer == 1 ? Vote::kYes : Vote::kRefused;
      }
      Outcome outcome = round_.Record(client_->transport().NodeName(node), vote, detail);
      if (outcome == Outcome::kPending) return;
      if (kind_ == Kind::kRelease) {
        if (outcome == Outcome::kSucceeded) {
          result.emplace(std::vector<Lease>{});
        } else {
          result.emplace(round_.Failure(what_, "confirmed", "", absl::StatusCode::kUnavailable));
        }
      } else if (outcome == Outcome::kFailed) {
        result.emplace(round_.Failure(what_, "still held the lease", "lease lost",
                                      absl::StatusCode::kFailedPrecondition));
      } else {
        result.emplace(Extended());
      }
      done = std::move(done_);
    }
    done(*std::move(result));
  }

  absl::StatusOr<std::vector<Lease>> Extended() {
    const Options& o = client_->options();
    Clock::TimePoint now = client_->clock().Now();
    absl::Duration ttl = absl::Milliseconds(ttl_ms_);
    absl::Duration drift = DriftAllowance(ttl, o.clock_drift_factor, o.clock_drift_floor);
    absl::Duration elapsed = Since(now, start_);
    absl::Duration validity = Validity(ttl, elapsed, drift);
    if (validity <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          what_, ": ", round_.Summary("still held the lease", "lease lost"),
          " but no validity was left: the extend took ", absl::FormatDuration(elapsed)));
    }
    Clock::TimePoint valid_until = now + absl::ToChronoNanoseconds(validity);
    std::vector<Lease> out;
    for (const Lease& l : leases_) {
      out.emplace_back(l.resource(), l.token(), ttl, start_, valid_until, round_.yes(),
                       l.fencing_token());
    }
    return out;
  }

  ClientImpl* const client_;
  const Kind kind_;
  const std::vector<Lease> leases_;
  std::vector<std::string> keys_;
  const int64_t ttl_ms_;
  std::string what_;

  std::mutex mu_;
  absl::AnyInvocable<void(absl::StatusOr<std::vector<Lease>>)> done_;
  Clock::TimePoint start_;
  Round round_;
};

// Checks a set of leases for ExtendSet/ReleaseSet.
absl::Status CheckLeases(const std::vector<Lease>& leases, absl::string_view what) {
  if (leases.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no leases"));
  std::set<std::string> seen;
  for (const Lease& l : leases) {
    if (!l.has_value()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty lease"));
    if (l.token() != leases[0].token()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": leases of different acquisitions"));
    }
    if (!seen.insert(l.resource()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": resource \"", l.resource(), "\" twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------

ClientImpl::ClientImpl(Options options, std::unique_ptr<Transport> transport, const Clock* clock,
                       Engine* engine)
    : options_(std::move(options)),
      quorum_(EffectiveQuorum(options_)),
      transport_(std::move(transport)),
      clock_(clock),
      engine_(engine) {
  transport_->SetMessageHandler([this](int, const std::string& channel, const std::string& token) {
    OnReleaseMessage(channel, token);
  });
}

std::string ClientImpl::Key(absl::string_view resource) const {
  return absl::StrCat(options_.key_prefix, resource);
}

absl::Duration ClientImpl::RetryDelay() {
  absl::Duration jitter = options_.retry_jitter;
  absl::Duration d = options_.retry_delay;
  if (jitter > absl::ZeroDuration()) {
    int64_t j = absl::ToInt64Nanoseconds(jitter);
    d += absl::Nanoseconds(UniformInt(-j, j));
  }
  return std::max(d, absl::ZeroDuration());
}

absl::Status ClientImpl::CheckQuorum(int quorum) const {
  int n = transport_->size();
  if (quorum == 0 || quorum == quorum_) return absl::OkStatus();
  if (quorum < 0 || quorum > n || (quorum <= n / 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("quorum ", quorum, " is not a majority of the ", n, " nodes"));
  }
  return absl::OkStatus();
}

template <typename T, typename StartFn>
T ClientImpl::Block(StartFn start) {
  if (transport_->InTransportThread()) {
    return absl::FailedPreconditionError(
        "a blocking redlock call was made from a callback of the same client; use the *Async "
        "form there");
  }
  auto waiter = std::make_shared<Waiter<T>>();
  start([waiter](T value) { waiter->Set(std::move(value)); });
  transport_->AwaitSync(waiter);
  return waiter->Take();
}

template <typename T>
absl::AnyInvocable<void(T)> ClientImpl::ToUser(absl::AnyInvocable<void(T)> done) {
  Transport* t = transport_.get();
  return [t, done = std::move(done)](T value) mutable {
    t->DeliverToUser(
        [done = std::move(done), value = std::move(value)]() mutable { done(std::move(value)); });
  };
}

void ClientImpl::StartAcquire(std::vector<std::string> resources, absl::Duration ttl, int quorum,
                              RetryPolicy policy, LeasesCallback done) {
  auto op =
      std::make_shared<AcquireOp>(this, std::move(resources), ttl, quorum == 0 ? quorum_ : quorum,
                                  std::move(policy), std::move(done));
  op->Start();
}

namespace {

// Adapts a set callback to the single-lease callback.
Client::LeasesCallback Single(Client::LeaseCallback done) {
  return [done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable {
    if (!r.ok()) {
      done(r.status());
    } else {
      done(std::move((*r)[0]));
    }
  };
}

}  // namespace

void ClientImpl::AcquireInternal(absl::string_view resource, absl::Duration ttl,
                                 std::optional<absl::Duration> wait, LeaseCallback done) {
  absl::Status st = CheckResource(resource, options_);
  absl::StatusOr<int64_t> ms = CheckTtl(ttl, options_);
  if (st.ok() && ms.ok() && wait.has_value() &&
      (*wait < absl::ZeroDuration() || *wait == absl::InfiniteDuration())) {
    st = absl::InvalidArgumentError("wait must be >= 0 and finite");
  }
  if (!st.ok() || !ms.ok()) {
    done(!st.ok() ? st : ms.status());
    return;
  }
  RetryPolicy policy;
  if (!wait.has_value()) {
    policy.max_attempts = options_.max_attempts;
  } else if (*wait == absl::ZeroDuration()) {
    policy.max_attempts = 1;
  } else {
    policy.deadline = clock_->Now() + absl::ToChronoNanoseconds(*wait);
    policy.wait = *wait;
  }
  StartAcquire({std::string(resource)}, absl::Milliseconds(*ms), 0, std::move(policy),
               Single(std::move(done)));
}

void ClientImpl::AcquireSetInternal(std::vector<std::string> resources, absl::Duration ttl,
                                    int quorum, LeasesCallback done) {
  absl::Status st =
      resources.empty() ? absl::InvalidArgumentError("no resources") : CheckQuorum(quorum);
  std::set<absl::string_view> seen;
  for (const auto& r : resources) {
    if (!st.ok()) break;
    st = CheckResource(r, options_);
    if (st.ok() && !seen.insert(r).second) {
      st = absl::InvalidArgumentError(absl::StrCat("resource \"", r, "\" is listed twice"));
    }
  }
  absl::StatusOr<int64_t> ms = CheckTtl(ttl, options_);
  if (!st.ok() || !ms.ok()) {
    done(!st.ok() ? st : ms.status());
    return;
  }
  StartAcquire(std::move(resources), absl::Milliseconds(*ms), quorum, RetryPolicy(),
               std::move(done));
}

void ClientImpl::ExtendSetInternal(std::vector<Lease> leases, absl::Duration ttl, int quorum,
                                   LeasesCallback done) {
  absl::Status st = CheckLeases(leases, "extend");
  if (st.ok()) st = CheckQuorum(quorum);
  absl::StatusOr<int64_t> ms = CheckTtl(ttl, options_);
  if (!st.ok() || !ms.ok()) {
    done(!st.ok() ? st : ms.status());
    return;
  }
  auto op = std::make_shared<KeysOp>(this, KeysOp::Kind::kExtend, std::move(leases), *ms,
                                     quorum == 0 ? quorum_ : quorum, std::move(done));
  op->Start();
}

void ClientImpl::ReleaseSetInternal(std::vector<Lease> leases, int quorum, StatusCallback done) {
  absl::Status st = CheckLeases(leases, "release");
  if (st.ok()) st = CheckQuorum(quorum);
  if (!st.ok()) {
    done(st);
    return;
  }
  StopRenewals(leases[0].token());
  auto op = std::make_shared<KeysOp>(
      this, KeysOp::Kind::kRelease, std::move(leases), 0, quorum == 0 ? quorum_ : quorum,
      [done = std::move(done)](absl::StatusOr<std::vector<Lease>> r) mutable { done(r.status()); });
  op->Start();
}

// Public asynchronous forms: user callbacks run on the I/O thread.

void ClientImpl::TryAcquireAsync(absl::string_view resource, absl::Duration ttl,
                                 LeaseCallback done) {
  AcquireInternal(resource, ttl, absl::ZeroDuration(), ToUser(std::move(done)));
}

void ClientImpl::AcquireAsync(absl::string_view resource, absl::Duration ttl, LeaseCallback done) {
  AcquireInternal(resource, ttl, std::nullopt, ToUser(std::move(done)));
}

void ClientImpl::AcquireAsync(absl::string_view resource, absl::Duration ttl, absl::Duration wait,
                              LeaseCallback done) {
  AcquireInternal(resource, ttl, wait, ToUser(std::move(done)));
}

void ClientImpl::ExtendAsync(const Lease& lease, absl::Duration ttl, LeaseCallback done) {
  ExtendSetInternal({lease}, ttl, 0, Single(ToUser(std::move(done))));
}

void ClientImpl::ReleaseAsync(const Lease& lease, StatusCallback done) {
  ReleaseSetInternal({lease}, 0, ToUser(std::move(done)));
}

void ClientImpl::TryAcquireSetAsync(std::vector<std::string> resources, absl::Duration ttl,
                                    int quorum, LeasesCallback done) {
  AcquireSetInternal(std::move(resources), ttl, quorum, ToUser(std::move(done)));
}

void ClientImpl::ExtendSetAsync(std::vector<Lease> leases, absl::Duration ttl, int quorum,
                                LeasesCallback done) {
  ExtendSetInternal(std::move(leases), ttl, quorum, ToUser(std::move(done)));
}

void ClientImpl::ReleaseSetAsync(std::vector<Lease> leases, int quorum, StatusCallback done) {
  ReleaseSetInternal(std::move(leases), quorum, ToUser(std::move(done)));
}

// Public blocking forms.

absl::StatusOr<Lease> ClientImpl::TryAcquire(absl::string_view resource, absl::Duration ttl) {
  return Block<absl::StatusOr<Lease>>([&](LeaseCallback cb) {
    AcquireInternal(resource, ttl, absl::ZeroDuration(), std::move(cb));
  });
}

absl::StatusOr<Lease> ClientImpl::Acquire(absl::string_view resource, absl::Duration ttl) {
  return Block<absl::StatusOr<Lease>>(
      [&](LeaseCallback cb) { AcquireInternal(resource, ttl, std::nullopt, std::move(cb)); });
}

absl::StatusOr<Lease> ClientImpl::Acquire(absl::string_view resource, absl::Duration ttl,
                                          absl::Duration wait) {
  return Block<absl::StatusOr<Lease>>(
      [&](LeaseCallback cb) { AcquireInternal(resource, ttl, wait, std::move(cb)); });
}

absl::StatusOr<Lease> ClientImpl::Extend(const Lease& lease, absl::Duration ttl) {
  return Block<absl::StatusOr<Lease>>(
      [&](LeaseCallback cb) { ExtendSetInternal({lease}, ttl, 0, Single(std::move(cb))); });
}

absl::Status ClientImpl::Release(const Lease& lease) {
  return Block<absl::Status>(
      [&](StatusCallback cb) { ReleaseSetInternal({lease}, 0, std::move(cb)); });
}

absl::StatusOr<std::vector<Lease>> ClientImpl::TryAcquireSet(std::vector<std::string> resources,
                                                             absl::Duration ttl, int quorum) {
  return Block<absl::StatusOr<std::vector<Lease>>>([&](LeasesCallback cb) {
    AcquireSetInternal(std::move(resources), ttl, quorum, std::move(cb));
  });
}

absl::StatusOr<std::vector<Lease>> ClientImpl::ExtendSet(std::vector<Lease> leases,
                                                         absl::Duration ttl, int quorum) {
  return Block<absl::StatusOr<std::vector<Lease>>>(
      [&](LeasesCallback cb) { ExtendSetInternal(std::move(leases), ttl, quorum, std::move(cb)); });
}

absl::Status ClientImpl::ReleaseSet(std::vector<Lease> leases, int quorum) {
  return Block<absl::Status>(
      [&](StatusCallback cb) { ReleaseSetInternal(std::move(leases), quorum, std::move(cb)); });
}

// ---------------------------------------------------------------------------
// Release watches.

struct ClientImpl::WatchState {
  ClientImpl* client = nullptr;
  std::vector<std::string> channels;
  std::mutex mu;
  bool pending = false;  // announced while nobody waited
  absl::AnyInvocable<void(absl::Status)> done;
  Transport::TimerId timer = 0;
  uint64_t seq = 0;

  // Completes the current wait with OK, or remembers the announcement.
  void Notify() {
    absl::AnyInvocable<void(absl::Status)> fire;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!done) {
        pending = true;
        return;
      }
      fire = std::move(done);
      done = nullptr;
      client->transport().Cancel(timer);
    }
    fire(absl::OkStatus());
  }
};

namespace {

class WatchImpl final : public ReleaseWatch {
 public:
  WatchImpl(std::shared_ptr<ClientImpl::WatchState> state, bool for_user)
      : state_(std::move(state)), for_user_(for_user) {}
  ~WatchImpl() override {
    state_->client->UnregisterWatch(state_.get());
    absl::AnyInvocable<void(absl::Status)> fire;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      fire = std::move(state_->done);
      state_->done = nullptr;
      if (fire) state_->client->transport().Cancel(state_->timer);
    }
    if (fire) fire(absl::CancelledError("the release watch was destroyed"));
  }

  void WaitAsync(absl::Duration max_wait, absl::AnyInvocable<void(absl::Status)> done) override {
    Transport& t = state_->client->transport();
    if (for_user_) {
      done = [&t, done = std::move(done)](absl::Status st) mutable {
        t.DeliverToUser([done = std::move(done), st]() mutable { done(st); });
      };
    }
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->pending) {
      state_->pending = false;
      // Never inline: the caller may hold its own locks.
      t.RunAfter(absl::ZeroDuration(),
                 [done = std::move(done)]() mutable { done(absl::OkStatus()); });
      return;
    }
    uint64_t seq = ++state_->seq;
    state_->done = std::move(done);
    std::weak_ptr<ClientImpl::WatchState> weak = state_;
    state_->timer = t.RunAfter(max_wait, [weak, seq] {
      auto s = weak.lock();
      if (s == nullptr) return;
      absl::AnyInvocable<void(absl::Status)> fire;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        if (s->seq != seq || !s->done) return;
        fire = std::move(s->done);
        s->done = nullptr;
      }
      fire(absl::DeadlineExceededError("no release announced"));
    });
  }

 private:
  std::shared_ptr<ClientImpl::WatchState> state_;
  const bool for_user_;
};

}  // namespace

std::unique_ptr<ReleaseWatch> ClientImpl::WatchReleases(std::vector<std::string> resources) {
  return MakeWatch(std::move(resources), /*for_user=*/true);
}

std::unique_ptr<ReleaseWatch> ClientImpl::MakeWatch(std::vector<std::string> resources,
                                                    bool for_user) {
  auto state = std::make_shared<WatchState>();
  state->client = this;
  for (const auto& r : resources)
    state->channels.push_back(absl::StrCat(kReleaseChannelPrefix, Key(r)));
  RegisterWatch(state);
  return std::make_unique<WatchImpl>(std::move(state), for_user);
}

void ClientImpl::RegisterWatch(const std::shared_ptr<WatchState>& w) {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    for (const auto& c : w->channels) watchers_[c].push_back(w);
  }
  transport_->Subscribe(w->channels);
}

void ClientImpl::UnregisterWatch(WatchState* w) {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    for (const auto& c : w->channels) {
      auto it = watchers_.find(c);
      if (it == watchers_.end()) continue;
      it->second.remove_if([w](const std::weak_ptr<WatchState>& p) {
        auto s = p.lock();
        return s == nullptr || s.get() == w;
      });
      if (it->second.empty()) {
        watchers_.erase(it);
        last_release_.erase(c);
      }
    }
  }
  transport_->Unsubscribe(w->channels);
}

void ClientImpl::OnReleaseMessage(const std::string& channel, const std::string& token) {
  // One release is announced by every node that held the key: act on the
  // first announcement only, and wake only the oldest watcher of this
  // client. Others of this client would contend with it for the same lock;
  // they wait for the next release (or poll). So each release costs at most
  // one attempt per client, however many threads wait.
  std::shared_ptr<WatchState> oldest;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    auto it = watchers_.find(channel);
    if (it == watchers_.end()) return;
    std::string& last = last_release_[channel];
    if (last == token) return;
    last = token;
    for (const auto& weak : it->second) {
      if ((oldest = weak.lock()) != nullptr) break;
    }
  }
  if (oldest != nullptr) oldest->Notify();
}

// ---------------------------------------------------------------------------
// Auto-renewal.

struct ClientImpl::RenewState : std::enable_shared_from_this<RenewState> {
  std::mutex mu;
  ClientImpl* client = nullptr;  // null once the client is gone
  Lease lease;
  absl::Duration ttl;
  absl::Duration period;
  int max_renewals = 0;
  bool active = true;
  absl::Status status;
  int renewals = 0;
  absl::AnyInvocable<void(absl::Status)> on_lost;
  Transport::TimerId timer = 0;

  void ScheduleLocked(absl::Duration delay) {
    std::weak_ptr<RenewState> weak = weak_from_this();
    timer = client->transport().RunAfter(std::max(delay, absl::ZeroDuration()), [weak] {
      if (auto self = weak.lock()) self->Tick();
    });
  }

  absl::Duration UntilNextLocked() const {
    return absl::FromChrono(lease.acquired_at() - client->clock().Now()) + period;
  }

  void Tick() {
    Lease current;
    ClientImpl* c;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!active || client == nullptr) return;
      current = lease;
      // Read under mu: Detach() clears it. The client itself outlives this
      // call (its destructor waits for the thread running the timers).
      c = client;
    }
    std::weak_ptr<RenewState> weak = weak_from_this();
    c->ExtendSetInternal({current}, ttl, 0, [weak](absl::StatusOr<std::vector<Lease>> r) {
      auto self = weak.lock();
      if (self == nullptr) return;
      if (r.ok()) {
        self->OnExtended(std::move((*r)[0]));
      } else {
        self->OnExtended(r.status());
      }
    });
  }

  void OnExtended(absl::StatusOr<Lease> r) {
    absl::Status lost;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!active || client == nullptr) return;
      if (r.ok()) {
        lease = *std::move(r);
        ++renewals;
        if (max_renewals > 0 && renewals >= max_renewals) {
          // No more extensions: report the loss when the validity runs out.
          std::weak_ptr<RenewState> weak = weak_from_this();
          int limit = max_renewals;
          timer =
              client->transport().RunAfter(lease.TimeLeft(client->clock().Now()), [weak, limit] {
                if (auto self = weak.lock()) {
                  self->Lose(absl::DeadlineExceededError(
                      absl::StrCat("auto-renew: the limit of ", limit,
                                   " renewals was reached and the lease ran out")));
                }
              });
          return;
        }
        ScheduleLocked(UntilNextLocked());
        return;
      }
      if (absl::IsCancelled(r.status())) {
        active = false;  // the client is shutting down
        return;
      }
      absl::Duration left = lease.TimeLeft(client->clock().Now());
      if (absl::IsFailedPrecondition(r.status())) {
        lost = r.status();
      } else if (left <= absl::Milliseconds(1)) {
        lost = absl::DeadlineExceededError(absl::StrCat(
            "auto-renew: the lease ran out before an extension succeeded; last error: ",
            r.status().message()));
      } else {
        // Transient (a node or the network): retry well before it runs out.
        ScheduleLocked(std::min(period / 4, left / 2));
        return;
      }
    }
    Lose(lost);
  }

  void Lose(absl::Status why) {
    absl::AnyInvocable<void(absl::Status)> fire;
    Transport* t = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!active || client == nullptr) return;
      active = false;
      status = why;
      fire = std::move(on_lost);
      t = &client->transport();
    }
    if (fire) t->DeliverToUser([fire = std::move(fire), why]() mutable { fire(why); });
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(mu);
    active = false;
    if (client != nullptr) client->transport().Cancel(timer);
  }

  void Detach() {
    std::lock_guard<std::mutex> lock(mu);
    active = false;
    client = nullptr;
  }
};

namespace {

class RenewalImpl final : public Renewal {
 public:
  explicit RenewalImpl(std::shared_ptr<ClientImpl::RenewState> state) : state_(std::move(state)) {}
  ~RenewalImpl() override { state_->Stop(); }
  void Stop() override { state_->Stop(); }
  Lease lease() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->lease;
  }
  bool active() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->active;
  }
  absl::Status status() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->status;
  }
  int renewals() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->renewals;
  }

 private:
  std::shared_ptr<ClientImpl::RenewState> state_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Renewal>> ClientImpl::AutoRenew(
    const Lease& lease, RenewOptions options, absl::AnyInvocable<void(absl::Status)> on_lost) {
  if (!lease.has_value()) return absl::InvalidArgumentError("auto-renew: empty lease");
  if (!(options.interval_fraction > 0.0 && options.interval_fraction < 1.0)) {
    return absl::InvalidArgumentError("auto-renew: interval_fraction must be in (0, 1)");
  }
  if (options.max_renewals < 0)
    return absl::InvalidArgumentError("auto-renew: max_renewals must be >= 0");
  absl::Duration ttl = options.ttl == absl::ZeroDuration() ? lease.ttl() : options.ttl;
  absl::StatusOr<int64_t> ms = CheckTtl(ttl, options_);
  if (!ms.ok()) return ms.status();
  if (lease.TimeLeft(clock_->Now()) <= absl::ZeroDuration()) {
    return absl::FailedPreconditionError(
        absl::StrCat("auto-renew \"", lease.resource(), "\": the lease has already run out"));
  }
  auto state = std::make_shared<RenewState>();
  state->client = this;
  state->lease = lease;
  state->ttl = absl::Milliseconds(*ms);
  state->period = std::max(state->ttl * options.interval_fraction, absl::Milliseconds(1));
  state->max_renewals = options.max_renewals;
  state->on_lost = std::move(on_lost);
  {
    std::lock_guard<std::mutex> lock(renew_mu_);
    // Drop entries of finished renewals as we go.
    for (auto it = renewals_.begin(); it != renewals_.end();) {
      it = it->second.expired() ? renewals_.erase(it) : std::next(it);
    }
    renewals_.emplace(lease.token(), state);
    std::lock_guard<std::mutex> state_lock(state->mu);
    state->ScheduleLocked(state->UntilNextLocked());
  }
  return std::unique_ptr<Renewal>(new RenewalImpl(std::move(state)));
}

void ClientImpl::StopRenewals(const std::string& token) {
  std::vector<std::shared_ptr<RenewState>> found;
  {
    std::lock_guard<std::mutex> lock(renew_mu_);
    auto [begin, end] = renewals_.equal_range(token);
    for (auto it = begin; it != end; ++it) {
      if (auto r = it->second.lock()) found.push_back(std::move(r));
    }
    renewals_.erase(begin, end);
  }
  for (auto& r : found) r->Stop();
}

ClientImpl::~ClientImpl() {
  // Renewal handles may outlive the client: detach them first.
  {
    std::lock_guard<std::mutex> lock(renew_mu_);
    for (auto& [token, weak] : renewals_) {
      if (auto r = weak.lock()) r->Detach();
    }
    renewals_.clear();
  }
  transport_->Shutdown();
}

absl::StatusOr<std::vector<NodeView>> ClientImpl::Inspect(absl::string_view resource) {
  REDLOCK_RETURN_IF_ERROR(CheckResource(resource, options_));
  if (transport_->InTransportThread()) {
    return absl::FailedPreconditionError("Inspect called from a callback of the same client");
  }
  struct State {
    std::mutex mu;
    std::vector<NodeView> views;
    int left;
  };
  auto state = std::make_shared<State>();
  const int n = transport_->size();
  state->views.resize(static_cast<size_t>(n));
  state->left = n;
  auto waiter = std::make_shared<Waiter<bool>>();
  if (transport_->InTransportThread()) {
    return absl::FailedPreconditionError("Inspect called from a callback of the same client");
  }
  std::string key = Key(resource);
  Command command = ScriptCommand(InspectScript(), {key, absl::StrCat(key, kFenceSuffix)}, {});
  command.op = "inspect";
  for (int i = 0; i < n; ++i) {
    state->views[static_cast<size_t>(i)].node = transport_->NodeName(i);
    transport_->Send(i, command, [state, waiter, i](absl::StatusOr<Reply> r) {
      NodeView& v = state->views[static_cast<size_t>(i)];
      if (!r.ok()) {
        v.status = r.status();
      } else if (r->is_error()) {
        v.status = absl::Status(VoteForErrorReply(r->str) == Vote::kUnavailable
                                    ? absl::StatusCode::kUnavailable
                                    : absl::StatusCode::kInternal,
                                r->str);
      } else if (r->type != Reply::Type::kArray || r->elements.size() != 3) {
        v.status = absl::InternalError(absl::StrCat("unexpected reply ", r->Describe()));
      } else {
        v.token = r->elements[0].str;
        v.held = !v.token.empty();
        int64_t pttl = r->elements[1].integer;
        v.ttl_left = pttl > 0 ? absl::Milliseconds(pttl) : absl::ZeroDuration();
        absl::StatusOr<uint64_t> c = ParseCounter(r->elements[2].str);
        if (c.ok()) v.fence_counter = *c;
      }
      std::lock_guard<std::mutex> lock(state->mu);
      if (--state->left == 0) waiter->Set(true);
    });
  }
  transport_->AwaitSync(waiter);
  std::lock_guard<std::mutex> lock(state->mu);
  return state->views;
}

std::vector<NodeHealth> ClientImpl::Health() const {
  if (engine_ != nullptr) return engine_->Health();
  std::vector<NodeHealth> out;
  for (int i = 0; i < transport_->size(); ++i) {
    NodeHealth h;
    h.node = transport_->NodeName(i);
    h.connected = true;
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace redlock::internal

namespace redlock {

absl::StatusOr<std::unique_ptr<Client>> Client::Create(Options options) {
  REDLOCK_RETURN_IF_ERROR(ValidateOptions(options));
  REDLOCK_RETURN_IF_ERROR(internal::CheckDistinctAddresses(options.nodes));
  internal::Engine::Config config;
  config.nodes = options.nodes;
  config.node_timeout = options.node_timeout;
  config.connect_timeout = options.connect_timeout;
  config.reconnect_backoff_min = options.reconnect_backoff_min;
  config.reconnect_backoff_max = options.reconnect_backoff_max;
  config.breaker_probe_interval = options.breaker_probe_interval;
  config.max_in_flight_per_node = options.max_in_flight_per_node;
  REDLOCK_ASSIGN_OR_RETURN(std::unique_ptr<internal::Engine> engine,
                           internal::Engine::Start(std::move(config)));
  if (options.wait_for_connections) {
    engine->WaitForFirstConnections(options.connect_timeout + absl::Milliseconds(100));
    std::vector<std::pair<int, int>> same = engine->DuplicateNodes();
    if (!same.empty()) {
      return internal::SameServerError(options.nodes, same[0].first, same[0].second, "same run_id");
    }
  }
  internal::Engine* raw = engine.get();
  return std::unique_ptr<Client>(new internal::ClientImpl(std::move(options), std::move(engine),
                                                          internal::SteadyClock::Get(), raw));
}

}  // namespace redlock
