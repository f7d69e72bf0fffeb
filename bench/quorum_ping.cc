#include "bench/quorum_ping.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/workload.h"
#include "testkit/redis.h"

namespace redlock::bench {

namespace {

constexpr char kPing[] = "*1\r\n$4\r\nPING\r\n";

// RESP of one command.
std::string Encode(const std::vector<std::string>& args) {
  std::string out = absl::StrCat("*", args.size(), "\r\n");
  for (const std::string& a : args) absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
  return out;
}

// Writes all of `data` to a non-blocking socket, waiting for POLLOUT until
// `deadline_ns` at the latest.
absl::Status WriteAll(int fd, const std::string& data, int64_t deadline_ns) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    }
    const int64_t left = deadline_ns - NowNs();
    if (left <= 0) return absl::UnavailableError("send: timed out");
    pollfd p{fd, POLLOUT, 0};
    (void)::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left / 1'000'000)));
  }
  return absl::OkStatus();
}

}  // namespace

struct QuorumPing::Node {
  Endpoint endpoint;
  int fd = -1;
  bool broken = false;
  int handshake_left = 0;  // replies of AUTH/SELECT still to come
  std::string in;          // bytes read, not yet a whole line
  struct Sent {
    int64_t round;
    int64_t at_ns;
  };
  std::deque<Sent> sent;  // PINGs not yet answered, oldest first
  LatencyHistogram round_trips;
  ~Node() {
    if (fd >= 0) ::close(fd);
  }
};

QuorumPing::QuorumPing(const BaselineOptions& options)
    : options_(options), quorum_(EffectiveQuorumOf(options)) {}

QuorumPing::~QuorumPing() = default;

absl::StatusOr<std::unique_ptr<QuorumPing>> QuorumPing::Connect(const BaselineOptions& options) {
  if (options.nodes.empty()) return absl::InvalidArgumentError("no nodes");
  std::unique_ptr<QuorumPing> q(new QuorumPing(options));
  const int64_t deadline = NowNs() + absl::ToInt64Nanoseconds(options.connect_timeout);
  for (const Endpoint& ep : options.nodes) {
    auto node = std::make_unique<Node>();
    node->endpoint = ep;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &res) != 0 ||
        res == nullptr) {
      return absl::UnavailableError(absl::StrCat(ep.ToString(), ": cannot resolve"));
    }
    const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int rc = fd < 0 ? -1 : ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (fd < 0 || rc != 0) {
      const std::string err = strerror(errno);
      if (fd >= 0) ::close(fd);
      return absl::UnavailableError(absl::StrCat(ep.ToString(), ": connect: ", err));
    }
    node->fd = fd;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    std::string hello;
    for (const auto& cmd : testkit::HandshakeCommands(ep)) {
      hello += Encode(cmd);
      ++node->handshake_left;
    }
    if (!hello.empty()) {
      absl::Status st = WriteAll(fd, hello, deadline);
      if (!st.ok()) return absl::UnavailableError(absl::StrCat(ep.ToString(), ": ", st.message()));
    }
    q->nodes_.push_back(std::move(node));
  }
  // One round to check every node answers (and to consume the handshakes).
  for (auto& node : q->nodes_) {
    absl::Status st = WriteAll(node->fd, kPing, deadline);
    if (!st.ok()) return st;
    node->sent.push_back({0, NowNs()});
  }
  for (auto& node : q->nodes_) {
    if (!q->AwaitAll(*node, deadline)) {
      return absl::UnavailableError(
          absl::StrCat(node->endpoint.ToString(), ": no PONG within the connect timeout"));
    }
    node->round_trips = LatencyHistogram();  // the first one counts a fresh connection
  }
  return q;
}

bool QuorumPing::ReadReplies(Node& node, int64_t round, int* answered) {
  char buf[4096];
  for (int guard = 0; guard < 64; ++guard) {
    const ssize_t n = ::recv(node.fd, buf, sizeof(buf), 0);
    if (n == 0) {
      node.broken = true;
      return false;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      node.broken = true;
      return false;
    }
    const int64_t now = NowNs();
    node.in.append(buf, static_cast<size_t>(n));
    // Every reply here is one line: +OK, +PONG, or an -error.
    size_t start = 0;
    for (size_t eol; (eol = node.in.find("\r\n", start)) != std::string::npos; start = eol + 2) {
      const bool error = node.in[start] == '-';
      if (node.handshake_left > 0) {
        --node.handshake_left;
        if (error) node.broken = true;
        continue;
      }
      if (node.sent.empty()) {  // a reply to nothing: out of step
        node.broken = true;
        return false;
      }
      const Node::Sent s = node.sent.front();
      node.sent.pop_front();
      if (error) continue;
      node.round_trips.Record(now - s.at_ns);
      if (s.round == round) ++*answered;
    }
    node.in.erase(0, start);
    if (static_cast<size_t>(n) < sizeof(buf)) break;
  }
  return !node.broken;
}

bool QuorumPing::AwaitAll(Node& node, int64_t deadline_ns) {
  int ignored = 0;
  while (!node.broken && !node.sent.empty()) {
    const int64_t left = deadline_ns - NowNs();
    if (left <= 0) break;
    pollfd p{node.fd, POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left / 1'000'000)));
    ReadReplies(node, -1, &ignored);
  }
  return !node.broken && node.sent.empty();
}

absl::Status QuorumPing::Round() {
  const int64_t round = ++round_;
  const int64_t deadline = NowNs() + absl::ToInt64Nanoseconds(options_.node_timeout);
  for (auto& node : nodes_) {
    if (node->broken) continue;
    absl::Status st = WriteAll(node->fd, kPing, deadline);
    if (!st.ok()) {
      node->broken = true;
      continue;
    }
    node->sent.push_back({round, NowNs()});
  }
  int answered = 0;
  std::vector<pollfd> fds(nodes_.size());
  // Bounded: every pass handles an event or waits until the deadline.
  for (int pass = 0; answered < quorum_ && pass < 100000; ++pass) {
    const int64_t left = deadline - NowNs();
    if (left <= 0) break;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      fds[i] = pollfd{nodes_[i]->broken ? -1 : nodes_[i]->fd, POLLIN, 0};
    }
    const timespec ts = absl::ToTimespec(absl::Nanoseconds(left));
    const int ready = ::ppoll(fds.data(), fds.size(), &ts, nullptr);
    if (ready < 0 && errno != EINTR) break;
    for (size_t i = 0; i < fds.size() && ready > 0; ++i) {
      if (fds[i].revents != 0) ReadReplies(*nodes_[i], round, &answered);
    }
  }
  if (answered >= quorum_) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("model: ", answered, " of ", nodes_.size(),
                                             " nodes answered PING in time (quorum ", quorum_,
                                             ")"));
}

std::unique_ptr<Locker> QuorumPing::NewLocker() {
  class RoundLocker final : public Locker {
   public:
    explicit RoundLocker(QuorumPing* q) : q_(q) {}
    absl::Status Acquire(absl::Duration) override { return q_->Round(); }
    absl::Status Release() override { return q_->Round(); }

   private:
    QuorumPing* const q_;
  };
  return std::make_unique<RoundLocker>(this);
}

std::vector<Distribution> QuorumPing::RoundTripsAlone(int count, absl::Duration budget) {
  // Let the PONGs of the last rounds arrive first, so that none is mistaken
  // for one of these.
  const int64_t drain_deadline = NowNs() + absl::ToInt64Nanoseconds(options_.node_timeout);
  for (auto& node : nodes_) AwaitAll(*node, drain_deadline);
  std::vector<Distribution> out;
  for (auto& node : nodes_) {
    const LatencyHistogram kept = node->round_trips;
    node->round_trips = LatencyHistogram();
    const int64_t stop = NowNs() + absl::ToInt64Nanoseconds(budget);
    for (int i = 0; i < count && NowNs() < stop && !node->broken && node->sent.empty(); ++i) {
      const int64_t deadline = NowNs() + absl::ToInt64Nanoseconds(options_.node_timeout);
      if (!WriteAll(node->fd, kPing, deadline).ok()) break;
      node->sent.push_back({-1, NowNs()});
      AwaitAll(*node, deadline);
    }
    out.emplace_back(node->round_trips);
    node->round_trips = kept;
  }
  return out;
}

void QuorumPing::ResetRoundTrips() {
  for (auto& node : nodes_) node->round_trips = LatencyHistogram();
}

std::vector<Distribution> QuorumPing::NodeRoundTrips() const {
  std::vector<Distribution> out;
  for (const auto& node : nodes_) out.emplace_back(node->round_trips);
  return out;
}

}  // namespace redlock::bench
