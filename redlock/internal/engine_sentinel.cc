// Sentinel discovery for a node written as redis+sentinel://. One connection
// per Sentinel asks, in its handshake, where the master is (SENTINEL
// get-master-addr-by-name) and with which config epoch (SENTINEL MASTER),
// then stays subscribed to +switch-master; a PING after a second of silence
// keeps it honest (a half-open connection would never announce a failover).
//
// While the master is unknown (at the start, and whenever the connection to
// it fails or its ROLE is not master) a discovery round asks every Sentinel
// again, at most once per backoff (reconnect_backoff_min doubling up to
// reconnect_backoff_max, reset once the master is connected). A round is
// decided once a majority of the Sentinels answered, all answered or
// failed, or connect_timeout passed. Its choice among the answers:
//   1. the highest config epoch (a later failover; a Sentinel cut off from
//      the others keeps the epoch of the view it was left with);
//   2. then masters not refused lately before those that were (a failed
//      connection or ROLE check), least recently refused first: a stale
//      Sentinel's answer is tried once, then the others', in turn;
//   3. then the answer of the most Sentinels;
//   4. then the order of the endpoint.
// Outside a round (a Sentinel reconnected after a silence), a Sentinel's
// answer moves the node only if it beats the current master by epoch, or by
// a majority of all the Sentinels at equal epoch: a stale Sentinel (an
// older epoch, a minority) never pulls a working node away.
//
// Not a safety mechanism: a promoted replica may not have a key its master
// granted. Options::durability is what makes a node's vote survive that.

#include <sys/epoll.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

using Clock = std::chrono::steady_clock;

constexpr absl::string_view kSwitchMaster = "+switch-master";

// A refusal older than this no longer counts against an answer.
constexpr absl::Duration kRefusalMemory = absl::Seconds(60);

std::string HostPort(const std::string& host, int port) {
  Endpoint e;
  e.host = host;
  e.port = port;
  return e.ToString();
}

// The config-epoch field of a SENTINEL MASTER reply (-1 when absent).
int64_t ConfigEpoch(const Reply& r) {
  if (r.type != Reply::Type::kArray) return -1;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    int64_t epoch = -1;
    if (r.elements[i].str == "config-epoch" && absl::SimpleAtoi(r.elements[i + 1].str, &epoch)) {
      return epoch;
    }
  }
  return -1;
}

// One master named by some Sentinels.
struct Candidate {
  std::string host;
  int port = 0;
  std::string address;
  int64_t epoch = -1;  // the highest epoch it was named with
  int votes = 0;       // Sentinels naming it
  size_t first = 0;    // the first of them in the endpoint's order
  Clock::time_point refused = Clock::time_point::min();  // min: not lately
};

// One Sentinel's answer: the master it names and its config epoch.
struct Answer {
  size_t sentinel = 0;  // in the endpoint's order
  std::string host;
  int port = 0;
  int64_t epoch = -1;
};

// The answers grouped by master.
std::vector<Candidate> Candidates(const std::vector<Answer>& answers) {
  std::vector<Candidate> out;
  for (const Answer& a : answers) {
    const std::string address = HostPort(a.host, a.port);
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Candidate& c) { return c.address == address; });
    if (it == out.end()) {
      out.push_back(
          Candidate{.host = a.host, .port = a.port, .address = address, .first = a.sentinel});
      it = out.end() - 1;
    }
    it->epoch = std::max(it->epoch, a.epoch);
    ++it->votes;
  }
  return out;
}

// The order of a round's choice (file comment).
bool Better(const Candidate& a, const Candidate& b) {
  if (a.epoch != b.epoch) return a.epoch > b.epoch;
  if (a.refused != b.refused) return a.refused < b.refused;
  if (a.votes != b.votes) return a.votes > b.votes;
  return a.first < b.first;
}

}  // namespace

void Engine::SentinelLinkStart(Node& n, size_t s) {
  if (stopping()) return;
  SentinelLink& l = *n.sentinels[s];
  SentinelLinkClose(n, s);
  Endpoint login;
  login.username = n.endpoint.sentinel_username;
  login.password = n.endpoint.sentinel_password;
  std::vector<HandshakeStep> steps = LoginSteps(login);
  HandshakeStep ask;
  AppendCommand(&ask.payload, {"SENTINEL", "get-master-addr-by-name", n.endpoint.sentinel_master});
  SentinelLink* link = &l;
  ask.check = [&n, link](const Reply& r) -> std::string {
    if (r.is_error()) return HandshakeError("SENTINEL get-master-addr-by-name", r);
    if (r.is_nil()) {
      return absl::StrCat("the Sentinel knows no master named \"", n.endpoint.sentinel_master,
                          "\"");
    }
    int port = 0;
    if (r.type != Reply::Type::kArray || r.elements.size() != 2 ||
        r.elements[0].type != Reply::Type::kString || r.elements[0].str.empty() ||
        !absl::SimpleAtoi(r.elements[1].str, &port) || port < 1 || port > 65535) {
      return absl::StrCat("SENTINEL get-master-addr-by-name returned ", r.Describe());
    }
    link->asked_host = r.elements[0].str;
    link->asked_port = port;
    return "";
  };
  steps.push_back(std::move(ask));
  // The epoch cross-checks the Sentinels' answers. A Sentinel user that may
  // not run SENTINEL MASTER is not refused: its epoch is unknown.
  HandshakeStep master;
  AppendCommand(&master.payload, {"SENTINEL", "MASTER", n.endpoint.sentinel_master});
  master.check = [link](const Reply& r) -> std::string {
    link->asked_epoch = r.is_error() ? -1 : ConfigEpoch(r);
    return "";
  };
  steps.push_back(std::move(master));
  HandshakeStep subscribe;
  AppendCommand(&subscribe.payload, {"SUBSCRIBE", std::string(kSwitchMaster)});
  subscribe.check = [](const Reply& r) -> std::string {
    // A Sentinel user denied SUBSCRIBE still names the master: it is then
    // asked again at every outage, and announces no failover.
    if (r.is_error() || (r.type == Reply::Type::kArray && !r.elements.empty() &&
                         r.elements[0].str == "subscribe")) {
      return "";
    }
    return absl::StrCat("SUBSCRIBE ", kSwitchMaster, " returned ", r.Describe());
  };
  steps.push_back(std::move(subscribe));
  l.asked_host.clear();
  l.asked_port = 0;
  l.asked_epoch = -1;
  l.ping_out = false;
  std::string why;
  if (!l.conn.Start(std::move(steps), &why)) {
    SentinelLinkFail(n, s, why);
    return;
  }
  Register(l.conn, n.index, kSentinelEvents, EPOLL_CTL_ADD, /*writable=*/true,
           static_cast<uint32_t>(s));
  SentinelPublishHealth(n);
}

void Engine::OnSentinelIo(Node& n, size_t s, uint32_t events) {
  SentinelLink& l = *n.sentinels[s];
  std::vector<Reply> messages;
  Connection::Progress p = SideConnectionIo(l.conn, n.index, kSentinelEvents, events, &messages,
                                            static_cast<uint32_t>(s));
  if (!p.failure.empty()) {
    SentinelLinkFail(n, s, p.failure);
    return;
  }
  const TimePoint now = Clock::now();
  if (p.ready || !messages.empty()) {
    l.last_heard = now;
    l.ping_out = false;
  }
  if (p.ready) {
    l.host = l.asked_host;
    l.port = l.asked_port;
    l.epoch = l.asked_epoch;
    l.error.clear();
    const bool in_round = n.round_open;
    if (in_round) l.answered_round = n.round;
    SentinelPublishHealth(n);
    if (in_round) {
      SentinelCheckRound(n, now);
    } else {
      SentinelAnswered(n, s, now);
    }
  }
  for (const Reply& m : messages) {
    // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
    if (m.type != Reply::Type::kArray || m.elements.size() != 3 || m.elements[0].str != "message" ||
        m.elements[1].str != kSwitchMaster) {
      continue;  // a keep-alive's answer
    }
    std::vector<std::string> f = absl::StrSplit(m.elements[2].str, ' ');
    int port = 0;
    if (f.size() != 5 || f[0] != n.endpoint.sentinel_master || !absl::SimpleAtoi(f[4], &port) ||
        port < 1 || port > 65535) {
      continue;  // another master of this Sentinel
    }
    // The new master's config epoch is newer than every other answer held.
    int64_t newest = -1;
    for (const auto& other : n.sentinels) newest = std::max(newest, other->epoch);
    l.host = f[3];
    l.port = port;
    l.epoch = -1;
    n.master_epoch = newest + 1;
    MasterAt(n, f[3], port,
             absl::StrCat("failover: the Sentinels moved master \"", f[0], "\" from ", f[1], ":",
                          f[2], " to ", f[3], ":", f[4], "; reconnecting"));
    // Its new config epoch is learnt by asking again: until then this
    // answer would not outweigh the others' older epochs.
    SentinelLinkStart(n, s);
    return;
  }
}

void Engine::SentinelPublishHealth(Node& n) {
  std::vector<SentinelHealth> view;
  for (const auto& lp : n.sentinels) {
    const SentinelLink& l = *lp;
    view.push_back(SentinelHealth{.address = l.address,
                                  .connected = l.conn.ready(),
                                  .master = l.host.empty() ? "" : HostPort(l.host, l.port),
                                  .config_epoch = l.epoch,
                                  .last_error = l.error});
  }
  std::lock_guard<std::mutex> lock(n.mu);
  n.sentinel_health = std::move(view);
}

void Engine::SentinelRound(Node& n, TimePoint now) {
  if (stopping() || n.round_open || now < n.next_round || n.sentinels.empty()) return;
  ++n.round;
  n.round_open = true;
  n.round_deadline = now + absl::ToChronoNanoseconds(config_.connect_timeout);
  if (n.round_backoff < config_.reconnect_backoff_min) {
    n.round_backoff = config_.reconnect_backoff_min;
  }
  n.next_round = now + absl::ToChronoNanoseconds(n.round_backoff);
  n.round_backoff = std::min(n.round_backoff * 2, config_.reconnect_backoff_max);
  const uint64_t round = n.round;
  for (size_t s = 0; s < n.sentinels.size() && n.round_open && n.round == round; ++s) {
    SentinelLinkStart(n, s);
  }
}

void Engine::SentinelCheckRound(Node& n, TimePoint now) {
  if (!n.round_open) return;
  size_t answered = 0;
  size_t failed = 0;
  for (const auto& l : n.sentinels) {
    if (l->answered_round == n.round) {
      ++answered;
    } else if (l->failed_round == n.round) {
      ++failed;
    }
  }
  const size_t total = n.sentinels.size();
  if (answered >= total / 2 + 1 || answered + failed == total || now >= n.round_deadline) {
    n.round_open = false;
    SentinelDecide(n, now);
  }
}

void Engine::SentinelDecide(Node& n, TimePoint now) {
  std::vector<Answer> answers;
  for (size_t s = 0; s < n.sentinels.size(); ++s) {
    const SentinelLink& l = *n.sentinels[s];
    if (l.answered_round == n.round && !l.host.empty())
      answers.push_back({s, l.host, l.port, l.epoch});
  }
  std::vector<Candidate> candidates = Candidates(answers);
  if (candidates.empty()) {
    // Each Sentinel, and why it did not say.
    std::vector<std::string> why;
    for (const auto& l : n.sentinels) {
      why.push_back(!l->error.empty()
                        ? l->error
                        : absl::StrCat("Sentinel ", l->address, ": no answer within ",
                                       absl::FormatDuration(config_.connect_timeout)));
    }
    {
      std::lock_guard<std::mutex> lock(n.mu);
      OpenBreakerLocked(n, absl::StrCat("cannot learn where master \"", n.endpoint.sentinel_master,
                                        "\" is: ", absl::StrJoin(why, "; ")));
    }
    // Create waits for every node's first attempt: here, one at every Sentinel.
    FirstConnectDone(n);
    return;
  }
  for (Candidate& c : candidates) {
    auto it = n.refused.find(c.address);
    if (it == n.refused.end()) continue;
    if (now - it->second < absl::ToChronoNanoseconds(kRefusalMemory)) {
      c.refused = it->second;
    } else {
      n.refused.erase(it);
    }
  }
  const Candidate& best = *std::min_element(candidates.begin(), candidates.end(), Better);
  n.master_epoch = best.epoch;
  MasterAt(n, best.host, best.port, "");
}

void Engine::SentinelAnswered(Node& n, size_t s, TimePoint now) {
  if (!n.master_known) {
    // Between rounds, with no master: the next round (paced) decides.
    SentinelRound(n, now);
    return;
  }
  const SentinelLink& l = *n.sentinels[s];
  const std::string current = HostPort(n.master_host, n.master_port);
  if (l.host.empty()) return;
  if (HostPort(l.host, l.port) == current) {
    n.master_epoch = std::max(n.master_epoch, l.epoch);
    return;
  }
  // Every connected Sentinel's latest answer; the current master keeps at
  // least the epoch it was chosen with (its Sentinels may be away).
  std::vector<Answer> answers;
  for (size_t i = 0; i < n.sentinels.size(); ++i) {
    const SentinelLink& link = *n.sentinels[i];
    if (link.conn.ready() && !link.ping_out && !link.host.empty()) {
      answers.push_back({i, link.host, link.port, link.epoch});
    }
  }
  std::vector<Candidate> candidates = Candidates(answers);
  Candidate cur{.address = current};
  for (const Candidate& c : candidates) {
    if (c.address == current) cur = c;
  }
  cur.epoch = std::max(cur.epoch, n.master_epoch);
  const Candidate& best = *std::min_element(candidates.begin(), candidates.end(), Better);
  const int majority = static_cast<int>(n.sentinels.size() / 2 + 1);
  if (best.address == current) return;
  if (best.epoch > cur.epoch ||
      (best.epoch == cur.epoch && best.votes > cur.votes && best.votes >= majority)) {
    n.master_epoch = best.epoch;
    MasterAt(n, best.host, best.port,
             absl::StrCat("the Sentinels now name ", best.address, " as master \"",
                          n.endpoint.sentinel_master, "\" (config epoch ", best.epoch, ", ",
                          best.votes, " of ", n.sentinels.size(), " Sentinels; ", current,
                          " was named with epoch ", cur.epoch, " by ", cur.votes,
                          "): a failover this client missed; reconnecting"));
  }
}

void Engine::SentinelMasterLost(Node& n) {
  if (!n.master_known) return;
  n.master_known = false;
  const TimePoint now = Clock::now();
  n.refused[HostPort(n.master_host, n.master_port)] = now;
  SentinelRound(n, now);
}

void Engine::MasterAt(Node& n, const std::string& host, int port, const std::string& why) {
  const std::string address = HostPort(host, port);
  bool moved;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    moved = n.address != address;
    n.address = address;
  }
  n.master_host = host;
  n.master_port = port;
  n.master_known = true;
  n.round_open = false;  // a +switch-master decides an open round
  // The same master: the next attempt comes after the usual backoff.
  if (!moved) return;
  n.cmd.Retarget(host, port);
  n.sub.Retarget(host, port);
  const std::string reason =
      why.empty() ? absl::StrCat("the Sentinels name ", address, " as the master now") : why;
  if (n.cmd.state() != Connection::State::kDisconnected) {
    Disconnect(n, reason, /*ask_sentinel=*/false);
  }
  if (n.sub.state() != Connection::State::kDisconnected) SubClose(n, reason);
  // At once: the backoff of attempts at the old address does not apply.
  StartConnect(n);
}

void Engine::SentinelMaintain(Node& n, TimePoint now) {
  if (stopping()) return;
  // A working master: the next outage's rounds start from the short backoff.
  if (n.cmd.ready()) n.round_backoff = config_.reconnect_backoff_min;
  const auto timeout = absl::ToChronoNanoseconds(config_.connect_timeout);
  for (size_t s = 0; s < n.sentinels.size(); ++s) {
    SentinelLink& l = *n.sentinels[s];
    switch (l.conn.state()) {
      case Connection::State::kDisconnected:
        // Within a round a failed Sentinel waits for the next round; between
        // rounds each reconnects on its own backoff (its answer may show a
        // failover announced while it was away).
        if (!n.round_open && n.master_known && now >= l.conn.next_connect()) {
          SentinelLinkStart(n, s);
        }
        break;
      case Connection::State::kReady:
        if (l.ping_out) {
          if (now - l.ping_sent >= timeout) {
            SentinelLinkFail(n, s,
                             absl::StrCat("no answer to a keep-alive PING within ",
                                          absl::FormatDuration(config_.connect_timeout),
                                          " (a silent connection announces no failover); "
                                          "reconnecting"));
          }
        } else if (now - l.last_heard >= absl::ToChronoNanoseconds(kKeepaliveIdle)) {
          std::string ping = EncodeCommand({"PING", "redlock-keepalive"});
          Connection::Progress w = l.conn.Write(&ping);
          if (!w.failure.empty() || !ping.empty()) {
            SentinelLinkFail(n, s,
                             w.failure.empty() ? "the Sentinel reads nothing more" : w.failure);
          } else {
            l.ping_out = true;
            l.ping_sent = now;
          }
        }
        break;
      default:
        if (now >= l.conn.connect_deadline()) {
          SentinelLinkFail(
              n, s,
              absl::StrCat("no answer within ", absl::FormatDuration(config_.connect_timeout)));
        }
        break;
    }
  }
  if (n.round_open) {
    SentinelCheckRound(n, now);
  } else if (!n.master_known) {
    SentinelRound(n, now);
  }
}

Engine::TimePoint Engine::SentinelWake(const Node& n) const {
  TimePoint wake = TimePoint::max();
  const auto timeout = absl::ToChronoNanoseconds(config_.connect_timeout);
  for (const auto& lp : n.sentinels) {
    const SentinelLink& l = *lp;
    switch (l.conn.state()) {
      case Connection::State::kDisconnected:
        if (!n.round_open && n.master_known) wake = std::min(wake, l.conn.next_connect());
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
  if (n.round_open) {
    wake = std::min(wake, n.round_deadline);
  } else if (!n.master_known) {
    wake = std::min(wake, n.next_round);
  }
  return wake;
}

void Engine::SentinelLinkFail(Node& n, size_t s, const std::string& why) {
  SentinelLink& l = *n.sentinels[s];
  l.error = absl::StrCat("Sentinel ", l.address, ": ", why);
  SentinelLinkClose(n, s);
  if (n.round_open) l.failed_round = n.round;
  SentinelPublishHealth(n);
  if (n.round_open) SentinelCheckRound(n, Clock::now());
}

void Engine::SentinelLinkClose(Node& n, size_t s) {
  SentinelLink& l = *n.sentinels[s];
  if (l.conn.fd() >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, l.conn.fd(), nullptr);
  l.conn.Close();
  l.ping_out = false;
}

void Engine::SentinelCloseAll(Node& n) {
  for (size_t s = 0; s < n.sentinels.size(); ++s) SentinelLinkClose(n, s);
}

}  // namespace redlock::internal
