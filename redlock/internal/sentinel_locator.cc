// Sentinel discovery for a node written as redis+sentinel:// or
// rediss+sentinel:// (then every connection, to the Sentinels and to the
// master, is TLS): the locator. One link per Sentinel (sentinel_link.h)
// asks where the master is and stays subscribed to +switch-master; a PING
// after a second of silence keeps it honest (a half-open connection would
// never announce a failover).
//
// While the master is unknown (at the start, and whenever the connection to
// it fails or its ROLE is not master) a discovery round asks every Sentinel
// again, at most once per backoff (reconnect_backoff_min doubling up to
// reconnect_backoff_max, reset once the master is connected). A round is
// decided once a majority of the Sentinels answered, all answered or
// failed, or connect_timeout passed; its choice, and when an answer outside
// a round moves a working node, are sentinel_choice.h's.
//
// Not a safety mechanism: a promoted replica may not have a key its master
// granted (Options::durability is what makes a node's vote survive that).

#include "redlock/internal/sentinel_locator.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/sentinel_choice.h"
#include "redlock/internal/sentinel_link.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Link = SentinelLink;

class SentinelLocator final : public Locator {
 public:
  SentinelLocator(const Endpoint& e, LocatorEnv env) : endpoint_(e), env_(std::move(env)) {
    for (const SentinelAddress& at : e.sentinel.sentinels) {
      Connection::Settings s = env_.settings;
      Endpoint login;  // the Sentinels' own credentials
      login.username = e.sentinel.username;
      login.password = e.sentinel.password;
      login.host = at.host;
      login.port = at.port;
      s.endpoint = login;
      s.make_stream = e.tls ? TlsFor(env_, "", at.host) : nullptr;
      links_.push_back(std::make_unique<Link>(s, at));
    }
    PublishHealth();
  }

  std::string Scheme() const override {
    return endpoint_.tls ? "rediss+sentinel" : "redis+sentinel";
  }
  MasterTarget Initial() const override { return {}; }
  bool Known() const override { return master_known_; }

  void Locate(TimePoint now) override { Round(now); }

  void MasterLost() override {
    if (!master_known_) return;
    master_known_ = false;
    const TimePoint now = Clock::now();
    refused_[JoinHostPort(master_host_, master_port_)] = now;
    Round(now);
  }

  void AddMasterChecks(std::vector<HandshakeStep>* steps) const override {
    // What a Sentinel named may be stale (a failover since, the old master
    // back as a replica): only a master is used.
    HandshakeStep role;
    AppendCommand(&role.payload, {"ROLE"});
    role.check = [master = endpoint_.sentinel.master](const Reply& r) -> std::string {
      if (r.is_error()) return HandshakeError("ROLE", r);
      if (r.type == Reply::Type::kArray && !r.elements.empty() && r.elements[0].str == "master") {
        return "";
      }
      return absl::StrCat(
          "a Sentinel named this server as the master \"", master, "\", but its ROLE is ",
          r.type == Reply::Type::kArray && !r.elements.empty() ? r.elements[0].str : r.Describe(),
          ": asking the Sentinels again");
    };
    steps->push_back(std::move(role));
  }

  void OnIo(uint32_t sub, uint32_t generation, uint32_t events) override;
  void Maintain(TimePoint now) override;
  TimePoint Wake(TimePoint now) const override;
  void Close() override {
    for (size_t s = 0; s < links_.size(); ++s) LinkClose(s);
  }

  void Health(NodeHealth* health) const override {
    std::lock_guard<std::mutex> lock(health_mu_);
    health->sentinels = health_;
  }

 private:
  Host& host() { return *env_.host; }
  absl::Duration connect_timeout() const { return env_.settings.connect_timeout; }

  void LinkStart(size_t s);
  void LinkFail(size_t s, const std::string& why);
  void LinkClose(size_t s);
  // Asks every Sentinel again (a discovery round), unless a round is open
  // or the last one started less than round_backoff_ ago.
  void Round(TimePoint now);
  // Closes the open round once it has enough answers (or its time is up)
  // and connects to the master it chooses.
  void CheckRound(TimePoint now);
  void Decide(TimePoint now);
  // Sentinel s answered outside a round (it reconnected): moves to the
  // master it names if the Sentinels now clearly prefer it.
  void Answered(size_t s, TimePoint now);
  // The Sentinels named the master.
  void MasterAt(const std::string& host, int port, const std::string& why);
  // Copies the links' state for Health().
  void PublishHealth();

  const Endpoint endpoint_;
  const LocatorEnv env_;
  std::vector<std::unique_ptr<Link>> links_;
  uint64_t round_ = 0;  // the latest round's number (0: none yet)
  bool round_open_ = false;
  TimePoint round_deadline_{};
  TimePoint next_round_{};  // no round starts before
  absl::Duration round_backoff_ = absl::ZeroDuration();
  // Masters the client could not use (connection failed, ROLE not master),
  // and when: among answers of equal config epoch, the others are tried
  // first, then these, least recently refused first.
  std::map<std::string, TimePoint> refused_;
  // The master chosen last, and whether the command connection's target is
  // that master with no connection to it failed since.
  std::string master_host_;
  int master_port_ = 0;
  int64_t master_epoch_ = -1;  // the config epoch it was named with (-1: unknown)
  bool master_known_ = false;

  mutable std::mutex health_mu_;
  std::vector<SentinelHealth> health_;  // guarded by health_mu_
};

void SentinelLocator::LinkStart(size_t s) {
  if (host().stopping()) return;
  Link& l = *links_[s];
  LinkClose(s);
  std::string why;
  if (!l.conn.Start(l.Steps(endpoint_.sentinel), &why)) {
    LinkFail(s, why);
    return;
  }
  host().Watch(l.conn, static_cast<uint32_t>(s), /*add=*/true, /*writable=*/true);
  PublishHealth();
}

void SentinelLocator::OnIo(uint32_t sub, uint32_t generation, uint32_t events) {
  const size_t s = sub;
  if (s >= links_.size() || links_[s]->conn.generation() != generation) return;
  Link& l = *links_[s];
  std::vector<Reply> messages;
  Connection::Progress p = host().Io(l.conn, sub, events, &messages);
  if (!p.failure.empty()) {
    LinkFail(s, p.failure);
    return;
  }
  const TimePoint now = Clock::now();
  if (p.ready || !messages.empty()) {
    l.last_heard = now;
    l.ping_out = false;
  }
  if (p.ready) {
    l.TakeAnswer();
    const bool in_round = round_open_;
    if (in_round) l.answered_round = round_;
    PublishHealth();
    if (in_round) {
      CheckRound(now);
    } else {
      Answered(s, now);
    }
  }
  for (const Reply& m : messages) {
    std::optional<SwitchMaster> sw = ParseSwitchMaster(m, endpoint_.sentinel.master);
    if (!sw.has_value()) continue;
    // The new master's config epoch is newer than every other answer held.
    int64_t newest = -1;
    for (const auto& other : links_) newest = std::max(newest, other->epoch);
    l.host = sw->host;
    l.port = sw->port;
    l.epoch = -1;
    master_epoch_ = newest + 1;
    MasterAt(sw->host, sw->port,
             absl::StrCat("failover: the Sentinels moved master \"", endpoint_.sentinel.master,
                          "\" from ", sw->old_host, ":", sw->old_port, " to ", sw->host, ":",
                          sw->port, "; reconnecting"));
    // Its new config epoch is learnt by asking again: until then this
    // answer would not outweigh the others' older epochs.
    LinkStart(s);
    return;
  }
}

void SentinelLocator::PublishHealth() {
  std::vector<SentinelHealth> view;
  for (const auto& lp : links_) {
    const Link& l = *lp;
    view.push_back(SentinelHealth{.address = l.address,
                                  .connected = l.conn.ready(),
                                  .master = l.host.empty() ? "" : JoinHostPort(l.host, l.port),
                                  .config_epoch = l.epoch,
                                  .last_error = l.error});
  }
  std::lock_guard<std::mutex> lock(health_mu_);
  health_ = std::move(view);
}

void SentinelLocator::Round(TimePoint now) {
  if (host().stopping() || round_open_ || now < next_round_ || links_.empty()) return;
  ++round_;
  round_open_ = true;
  round_deadline_ = now + absl::ToChronoNanoseconds(connect_timeout());
  if (round_backoff_ < env_.settings.backoff_min) round_backoff_ = env_.settings.backoff_min;
  next_round_ = now + absl::ToChronoNanoseconds(round_backoff_);
  round_backoff_ = std::min(round_backoff_ * 2, env_.settings.backoff_max);
  const uint64_t round = round_;
  for (size_t s = 0; s < links_.size() && round_open_ && round_ == round; ++s) LinkStart(s);
}

void SentinelLocator::CheckRound(TimePoint now) {
  if (!round_open_) return;
  size_t answered = 0;
  size_t failed = 0;
  for (const auto& l : links_) {
    if (l->answered_round == round_) {
      ++answered;
    } else if (l->failed_round == round_) {
      ++failed;
    }
  }
  const size_t total = links_.size();
  if (answered >= total / 2 + 1 || answered + failed == total || now >= round_deadline_) {
    round_open_ = false;
    Decide(now);
  }
}

void SentinelLocator::Decide(TimePoint now) {
  std::vector<SentinelAnswer> answers;
  for (size_t s = 0; s < links_.size(); ++s) {
    const Link& l = *links_[s];
    if (l.answered_round == round_ && !l.host.empty()) {
      answers.push_back({s, l.host, l.port, l.epoch});
    }
  }
  std::optional<MasterCandidate> best = ChooseInRound(answers, &refused_, now);
  if (!best.has_value()) {
    // Each Sentinel, and why it did not say.
    std::vector<std::string> why;
    for (const auto& l : links_) {
      why.push_back(!l->error.empty() ? l->error
                                      : absl::StrCat("Sentinel ", l->address, ": no answer within ",
                                                     absl::FormatDuration(connect_timeout())));
    }
    host().Unlocated(absl::StrCat("cannot learn where master \"", endpoint_.sentinel.master,
                                  "\" is: ", absl::StrJoin(why, "; ")));
    // Create waits for every node's first attempt: here, one at every Sentinel.
    host().FirstAttemptDone();
    return;
  }
  master_epoch_ = best->epoch;
  MasterAt(best->host, best->port, "");
}

void SentinelLocator::Answered(size_t s, TimePoint now) {
  if (!master_known_) {
    // Between rounds, with no master: the next round (paced) decides.
    Round(now);
    return;
  }
  const Link& l = *links_[s];
  const std::string current = JoinHostPort(master_host_, master_port_);
  if (l.host.empty()) return;
  if (JoinHostPort(l.host, l.port) == current) {
    master_epoch_ = std::max(master_epoch_, l.epoch);
    return;
  }
  // Every connected Sentinel's latest answer.
  std::vector<SentinelAnswer> answers;
  for (size_t i = 0; i < links_.size(); ++i) {
    const Link& link = *links_[i];
    if (link.conn.ready() && !link.ping_out && !link.host.empty()) {
      answers.push_back({i, link.host, link.port, link.epoch});
    }
  }
  MasterCandidate cur;
  std::optional<MasterCandidate> best =
      MoveOutsideRound(answers, current, master_epoch_, links_.size(), &cur);
  if (!best.has_value()) return;
  master_epoch_ = best->epoch;
  MasterAt(
      best->host, best->port,
      absl::StrCat("the Sentinels now name ", best->address, " as master \"",
                   endpoint_.sentinel.master, "\" (config epoch ", best->epoch, ", ", best->votes,
                   " of ", links_.size(), " Sentinels; ", current, " was named with epoch ",
                   cur.epoch, " by ", cur.votes, "): a failover this client missed; reconnecting"));
}

void SentinelLocator::MasterAt(const std::string& h, int port, const std::string& why) {
  master_host_ = h;
  master_port_ = port;
  master_known_ = true;
  round_open_ = false;  // a +switch-master decides an open round
  // The master's certificate: the configured name, or the address named.
  MasterTarget target{h, port,
                      endpoint_.tls ? TlsFor(env_, endpoint_.tls_server_name, h) : nullptr};
  host().MasterAt(
      std::move(target),
      why.empty() ? absl::StrCat("the Sentinels name ", JoinHostPort(h, port), " as the master now")
                  : why);
}

void SentinelLocator::Maintain(TimePoint now) {
  if (host().stopping()) return;
  // A working master: the next outage's rounds start from the short backoff.
  if (host().MasterConnected()) round_backoff_ = env_.settings.backoff_min;
  const auto timeout = absl::ToChronoNanoseconds(connect_timeout());
  for (size_t s = 0; s < links_.size(); ++s) {
    Link& l = *links_[s];
    switch (l.conn.state()) {
      case Connection::State::kDisconnected:
        // Within a round a failed Sentinel waits for the next round; between
        // rounds each reconnects on its own backoff (its answer may show a
        // failover announced while it was away).
        if (!round_open_ && master_known_ && now >= l.conn.next_connect()) LinkStart(s);
        break;
      case Connection::State::kReady:
        if (l.ping_out) {
          if (now - l.ping_sent >= timeout) {
            LinkFail(s, absl::StrCat("no answer to a keep-alive PING within ",
                                     absl::FormatDuration(connect_timeout()),
                                     " (a silent connection announces no failover); "
                                     "reconnecting"));
          }
        } else if (now - l.last_heard >= absl::ToChronoNanoseconds(kKeepaliveIdle)) {
          std::string ping = EncodeCommand({"PING", "redlock-keepalive"});
          Connection::Progress w = l.conn.Write(&ping);
          if (!w.failure.empty() || !ping.empty()) {
            LinkFail(s, w.failure.empty() ? "the Sentinel reads nothing more" : w.failure);
          } else {
            l.ping_out = true;
            l.ping_sent = now;
          }
        }
        break;
      default:
        if (now >= l.conn.connect_deadline()) {
          LinkFail(s, absl::StrCat("no answer within ", absl::FormatDuration(connect_timeout())));
        }
        break;
    }
  }
  if (round_open_) {
    CheckRound(now);
  } else if (!master_known_) {
    Round(now);
  }
}

TimePoint SentinelLocator::Wake(TimePoint /*now*/) const {
  TimePoint wake = TimePoint::max();
  const auto timeout = absl::ToChronoNanoseconds(connect_timeout());
  for (const auto& lp : links_) {
    const Link& l = *lp;
    switch (l.conn.state()) {
      case Connection::State::kDisconnected:
        if (!round_open_ && master_known_) wake = std::min(wake, l.conn.next_connect());
        break;
      case Connection::State::kReady:
        wake =
            std::min(wake, l.ping_out ? l.ping_sent + timeout
                                      : l.last_heard + absl::ToChronoNanoseconds(kKeepaliveIdle));
        break;
      default:
        wake = std::min(wake, l.conn.connect_deadline());
        break;
    }
  }
  if (round_open_) {
    wake = std::min(wake, round_deadline_);
  } else if (!master_known_) {
    wake = std::min(wake, next_round_);
  }
  return wake;
}

void SentinelLocator::LinkFail(size_t s, const std::string& why) {
  Link& l = *links_[s];
  l.error = absl::StrCat("Sentinel ", l.address, ": ", why);
  LinkClose(s);
  if (round_open_) l.failed_round = round_;
  PublishHealth();
  if (round_open_) CheckRound(Clock::now());
}

void SentinelLocator::LinkClose(size_t s) {
  Link& l = *links_[s];
  if (l.conn.fd() >= 0) host().Unwatch(l.conn);
  l.conn.Close();
  l.ping_out = false;
}

}  // namespace

std::unique_ptr<Locator> MakeSentinelLocator(const Endpoint& e, LocatorEnv env) {
  return std::make_unique<SentinelLocator>(e, std::move(env));
}

}  // namespace redlock::internal
