#include "testkit/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "testkit/proxy_conns.h"
#include "testkit/proxy_reactor.h"

namespace redlock::testkit {

// ---------------------------------------------------------------------------
// FaultSpec

absl::string_view DirectionName(Direction direction) {
  return direction == Direction::kToServer ? "to-server" : "to-client";
}

FaultSpec FaultSpec::Latency(absl::Duration latency, absl::Duration jitter) {
  FaultSpec spec;
  spec.kind = FaultKind::kLatency;
  spec.latency = latency;
  spec.jitter = jitter;
  return spec;
}

FaultSpec FaultSpec::BlackHole() {
  FaultSpec spec;
  spec.kind = FaultKind::kBlackHole;
  return spec;
}

FaultSpec FaultSpec::Hold() {
  FaultSpec spec;
  spec.kind = FaultKind::kHold;
  return spec;
}

FaultSpec FaultSpec::Reset() {
  FaultSpec spec;
  spec.kind = FaultKind::kReset;
  return spec;
}

FaultSpec FaultSpec::Slice(size_t bytes, absl::Duration delay) {
  FaultSpec spec;
  spec.kind = FaultKind::kSlice;
  spec.slice_bytes = bytes;
  spec.slice_delay = delay;
  return spec;
}

FaultSpec FaultSpec::Truncate(size_t bytes) {
  FaultSpec spec;
  spec.kind = FaultKind::kTruncate;
  spec.truncate_bytes = bytes;
  return spec;
}

FaultSpec FaultSpec::ResetAfterDelivery() {
  FaultSpec spec;
  spec.kind = FaultKind::kResetAfterDelivery;
  return spec;
}

namespace {

absl::StatusOr<absl::Duration> ParseDurationToken(absl::string_view token) {
  absl::Duration d;
  if (!absl::ParseDuration(token, &d) || d < absl::ZeroDuration() ||
      d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault: bad duration '", token, "' (want e.g. 20ms)"));
  }
  return d;
}

absl::StatusOr<size_t> ParseSizeToken(absl::string_view token) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(token, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("fault: bad byte count '", token, "'"));
  }
  return static_cast<size_t>(v);
}

// An optional `word <duration>` at t[i]: sets `out` and steps i past it.
absl::Status ParseOptionalDuration(const std::vector<absl::string_view>& t, absl::string_view word,
                                   size_t& i, absl::Duration& out) {
  if (i >= t.size() || t[i] != word) return absl::OkStatus();
  if (i + 1 >= t.size()) {
    return absl::InvalidArgumentError(absl::StrCat("fault: ", word, " needs a duration"));
  }
  absl::StatusOr<absl::Duration> d = ParseDurationToken(t[i + 1]);
  if (!d.ok()) return d.status();
  out = *d;
  i += 2;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FaultSpec> FaultSpec::Parse(absl::string_view text) {
  const std::string lowered = absl::AsciiStrToLower(text);
  std::vector<absl::string_view> t =
      absl::StrSplit(lowered, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
  if (t.empty()) return absl::InvalidArgumentError("fault: empty");
  auto extra = [&](size_t from) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault: unexpected '", t[from], "' in '", text, "'"));
  };
  FaultSpec spec;
  const absl::string_view verb = t[0];
  if (verb == "clear" || verb == "none") {
    if (t.size() > 1) return extra(1);
    return spec;
  }
  if (verb == "blackhole" || verb == "hold" || verb == "reset") {
    if (t.size() > 1) return extra(1);
    spec.kind = verb == "blackhole" ? FaultKind::kBlackHole
                : verb == "hold"    ? FaultKind::kHold
                                    : FaultKind::kReset;
    return spec;
  }
  if (verb == "reset-after") {
    if (t.size() > 1) return extra(1);
    spec.kind = FaultKind::kResetAfterDelivery;
    return spec;
  }
  if (verb == "latency") {
    if (t.size() < 2)
      return absl::InvalidArgumentError("fault: latency <duration> [jitter <duration>]");
    spec.kind = FaultKind::kLatency;
    auto latency = ParseDurationToken(t[1]);
    if (!latency.ok()) return latency.status();
    spec.latency = *latency;
    size_t i = 2;
    absl::Status tail = ParseOptionalDuration(t, "jitter", i, spec.jitter);
    if (!tail.ok()) return tail;
    if (i < t.size()) return extra(i);
  } else if (verb == "slice") {
    if (t.size() < 2) return absl::InvalidArgumentError("fault: slice <bytes> [delay <duration>]");
    spec.kind = FaultKind::kSlice;
    auto bytes = ParseSizeToken(t[1]);
    if (!bytes.ok()) return bytes.status();
    spec.slice_bytes = *bytes;
    size_t i = 2;
    absl::Status tail = ParseOptionalDuration(t, "delay", i, spec.slice_delay);
    if (!tail.ok()) return tail;
    if (i < t.size()) return extra(i);
  } else if (verb == "truncate") {
    if (t.size() != 2) return absl::InvalidArgumentError("fault: truncate <bytes>");
    spec.kind = FaultKind::kTruncate;
    auto bytes = ParseSizeToken(t[1]);
    if (!bytes.ok()) return bytes.status();
    spec.truncate_bytes = *bytes;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("fault: unknown '", verb,
                     "' (latency, blackhole, hold, reset, reset-after, slice, truncate, clear)"));
  }
  absl::Status status = spec.Validate();
  if (!status.ok()) return status;
  return spec;
}

std::string FaultSpec::ToString() const {
  switch (kind) {
    case FaultKind::kNone:
      return "none";
    case FaultKind::kLatency:
      return absl::StrCat("latency ", absl::FormatDuration(latency), " jitter ",
                          absl::FormatDuration(jitter));
    case FaultKind::kBlackHole:
      return "blackhole";
    case FaultKind::kHold:
      return "hold";
    case FaultKind::kReset:
      return "reset";
    case FaultKind::kSlice:
      return absl::StrCat("slice ", slice_bytes, " delay ", absl::FormatDuration(slice_delay));
    case FaultKind::kTruncate:
      return absl::StrCat("truncate ", truncate_bytes);
    case FaultKind::kResetAfterDelivery:
      return "reset-after";
  }
  return "none";
}

absl::Status FaultSpec::Validate() const {
  for (absl::Duration d : {latency, jitter, slice_delay}) {
    if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fault: durations must be finite and >= 0, got ", absl::FormatDuration(d)));
    }
  }
  if (kind == FaultKind::kLatency && latency + jitter > absl::Hours(1)) {
    return absl::InvalidArgumentError("fault: latency + jitter above 1h");
  }
  if (kind == FaultKind::kSlice && slice_delay > absl::Hours(1)) {
    return absl::InvalidArgumentError("fault: slice delay above 1h");
  }
  if (kind == FaultKind::kSlice && slice_bytes == 0) {
    return absl::InvalidArgumentError("fault: slice size must be >= 1");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The proxy's loop: the listener, the upstream, the faults and the counters;
// the thread is the reactor's (proxy_reactor.h), the connections the
// table's (proxy_conns.h), the bytes' fate the pipes' (proxy_pipe.h).

namespace {

using proxy_internal::ConnTable;
using proxy_internal::Reactor;

constexpr uint64_t kListenToken = Reactor::kFirstFreeToken;

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Parses a 127.0.0.0/8 IPv4 address ("localhost" = 127.0.0.1).
absl::StatusOr<in_addr> LoopbackAddress(absl::string_view what, const std::string& host) {
  in_addr addr{};
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault proxy: ", what, " '", host, "' is not an IPv4 address"));
  }
  if ((ntohl(addr.s_addr) >> 24) != 127) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fault proxy: ", what, " '", host, "' is not a loopback address (127.0.0.0/8 only)"));
  }
  return addr;
}

}  // namespace

class FaultProxy::Loop : public Reactor::Handler {
 public:
  explicit Loop(const ProxyOptions& options)
      : options_(options), conns_(options_, faults_, stats_, reactor_) {}

  ~Loop() override {
    reactor_.Stop();
    CloseFd(listen_fd_);
  }

  absl::Status Init() {
    auto listen_addr = LoopbackAddress("listen host", options_.listen_host);
    if (!listen_addr.ok()) return listen_addr.status();
    auto upstream_addr = LoopbackAddress("upstream host", options_.upstream_host);
    if (!upstream_addr.ok()) return upstream_addr.status();
    if (options_.upstream_port == 0) {
      return absl::InvalidArgumentError("fault proxy: upstream port is 0");
    }
    if (options_.max_queued_bytes == 0) {
      return absl::InvalidArgumentError("fault proxy: max_queued_bytes is 0");
    }
    listen_sa_.sin_family = AF_INET;
    listen_sa_.sin_addr = *listen_addr;
    listen_sa_.sin_port = htons(options_.listen_port);
    sockaddr_in upstream{};
    upstream.sin_family = AF_INET;
    upstream.sin_addr = *upstream_addr;
    upstream.sin_port = htons(options_.upstream_port);
    conns_.SetUpstream(upstream);

    absl::Status status = reactor_.Init();
    if (!status.ok()) return status;
    status = Listen();
    if (!status.ok()) return status;
    port_ = ntohs(listen_sa_.sin_port);
    reactor_.Start(this);
    return absl::OkStatus();
  }

  uint16_t port() const { return port_; }
  const ProxyOptions& options() const { return options_; }

  // Runs `fn` on the loop thread and waits for it.
  void RunInLoop(const std::function<void()>& fn) { reactor_.RunInLoop(fn); }

  // ---- operations, loop thread only ----

  void SetFault(Direction d, const FaultSpec& spec) {
    const FaultSpec old = faults_[static_cast<int>(d)];
    faults_[static_cast<int>(d)] = spec;
    conns_.FaultChanged(d, old);
  }

  FaultSpec GetFault(Direction d) const { return faults_[static_cast<int>(d)]; }

  void ReleaseHeld() { conns_.ReleaseHeld(); }

  void ResetAllConns() { conns_.ResetAll(); }

  void Down() {
    if (listen_fd_ >= 0) {
      reactor_.Remove(listen_fd_);
      CloseFd(listen_fd_);
    }
    conns_.CloseAll();
  }

  absl::Status Up() {
    if (listen_fd_ >= 0) return absl::OkStatus();
    return Listen();
  }

  void Retarget(in_addr host, uint16_t port) {
    sockaddr_in upstream = conns_.upstream();
    upstream.sin_addr = host;
    upstream.sin_port = htons(port);
    conns_.SetUpstream(upstream);
    conns_.CloseAll();
  }

  std::string Upstream() const {
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &conns_.upstream().sin_addr, buf, sizeof(buf));
    return absl::StrCat(buf, ":", ntohs(conns_.upstream().sin_port));
  }

  ProxyStats Stats() const {
    ProxyStats s = stats_;
    s.down = listen_fd_ < 0;
    conns_.AddTo(s);
    return s;
  }

  // ---- Reactor::Handler ----

  void OnReady(uint64_t token, uint32_t events) override {
    if (token == kListenToken) {
      if (listen_fd_ >= 0) conns_.Accept(listen_fd_);
    } else if (ConnTable::Owns(token)) {
      conns_.OnReady(token, events);
    }
  }
  int64_t NextDeadline() override { return conns_.NextDeadline(); }
  void OnTimer() override { conns_.OnTimer(); }

 private:
  absl::Status Listen() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return absl::UnavailableError(absl::StrCat("fault proxy: socket: ", strerror(errno)));
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa = listen_sa_;
    if (port_ != 0) sa.sin_port = htons(port_);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 128) != 0) {
      const int err = errno;
      ::close(fd);
      char host[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
      return absl::UnavailableError(absl::StrCat("fault proxy: cannot listen on ", host, ":",
                                                 ntohs(sa.sin_port), ": ", strerror(err)));
    }
    socklen_t len = sizeof(sa);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    listen_sa_.sin_port = sa.sin_port;
    reactor_.Add(fd, EPOLLIN, kListenToken);
    listen_fd_ = fd;
    return absl::OkStatus();
  }

  const ProxyOptions options_;
  sockaddr_in listen_sa_{};
  uint16_t port_ = 0;
  int listen_fd_ = -1;  // loop thread (Init before it starts)

  // Declared before what uses them: the reactor and the table outlive no
  // member they refer to. Loop-thread state.
  FaultSpec faults_[2];
  ProxyStats stats_;
  Reactor reactor_;
  ConnTable conns_;
};

// ---------------------------------------------------------------------------
// FaultProxy

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(const ProxyOptions& options) {
  auto loop = std::make_unique<Loop>(options);
  absl::Status status = loop->Init();
  if (!status.ok()) return status;
  return std::unique_ptr<FaultProxy>(new FaultProxy(std::move(loop)));
}

FaultProxy::FaultProxy(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

FaultProxy::~FaultProxy() = default;

uint16_t FaultProxy::listen_port() const { return loop_->port(); }

std::string FaultProxy::listen_address() const {
  return absl::StrCat(loop_->options().listen_host, ":", loop_->port());
}

const ProxyOptions& FaultProxy::options() const { return loop_->options(); }

absl::Status FaultProxy::SetFault(Direction direction, const FaultSpec& spec) {
  absl::Status status = spec.Validate();
  if (!status.ok()) return status;
  loop_->RunInLoop([&] { loop_->SetFault(direction, spec); });
  return absl::OkStatus();
}

absl::Status FaultProxy::SetFaultBoth(const FaultSpec& spec) {
  absl::Status status = spec.Validate();
  if (!status.ok()) return status;
  loop_->RunInLoop([&] {
    loop_->SetFault(Direction::kToServer, spec);
    loop_->SetFault(Direction::kToClient, spec);
  });
  return absl::OkStatus();
}

FaultSpec FaultProxy::fault(Direction direction) const {
  FaultSpec spec;
  loop_->RunInLoop([&] { spec = loop_->GetFault(direction); });
  return spec;
}

void FaultProxy::ClearFaults() {
  loop_->RunInLoop([&] {
    loop_->SetFault(Direction::kToServer, FaultSpec::None());
    loop_->SetFault(Direction::kToClient, FaultSpec::None());
  });
}

void FaultProxy::ReleaseHeld() {
  loop_->RunInLoop([&] { loop_->ReleaseHeld(); });
}

void FaultProxy::ResetAll() {
  loop_->RunInLoop([&] { loop_->ResetAllConns(); });
}

void FaultProxy::Down() {
  loop_->RunInLoop([&] { loop_->Down(); });
}

absl::Status FaultProxy::Up() {
  absl::Status status;
  loop_->RunInLoop([&] { status = loop_->Up(); });
  return status;
}

absl::Status FaultProxy::Retarget(const std::string& host, uint16_t port) {
  absl::StatusOr<in_addr> addr = LoopbackAddress("upstream host", host);
  if (!addr.ok()) return addr.status();
  if (port == 0) return absl::InvalidArgumentError("fault proxy: upstream port is 0");
  loop_->RunInLoop([&] { loop_->Retarget(*addr, port); });
  return absl::OkStatus();
}

std::string FaultProxy::upstream() const {
  std::string out;
  loop_->RunInLoop([&] { out = loop_->Upstream(); });
  return out;
}

ProxyStats FaultProxy::Stats() const {
  ProxyStats stats;
  loop_->RunInLoop([&] { stats = loop_->Stats(); });
  return stats;
}

}  // namespace redlock::testkit
