// redlock-proxy: FaultProxy instances for several upstreams, driven over a
// line-based text control port. See kUsage.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/flags.h"
#include "testkit/fault_proxy.h"

ABSL_FLAG(std::vector<std::string>, map, {},
          "Forward LISTEN to UPSTREAM (both HOST:PORT in 127.0.0.0/8; LISTEN port 0 picks a "
          "free port). Repeatable: maps are numbered from 0 in command-line order.");
ABSL_FLAG(std::string, control, "", "Where the control port listens (required).");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the proxies' jitter (map i gets seed+i); 0: a random one.");

namespace redlock::testkit {
namespace {

constexpr char kUsage[] =
    R"(usage: redlock-proxy --map LISTEN=UPSTREAM [--map ...] --control HOST:PORT [--seed N]

Forwards each LISTEN address to its UPSTREAM (both HOST:PORT in 127.0.0.0/8;
LISTEN port 0 picks a free port) through a fault-injecting TCP proxy, and takes
commands on the control port. Maps are numbered from 0 in command-line order.

Once listening it prints one line on stdout:
  READY control=HOST:PORT map0=HOST:PORT->HOST:PORT map1=...

Control protocol: one command per line; one reply line, "OK ..." or "ERR ...".
  <idx|all> <to-server|to-client|both> <fault>
      fault: latency <dur> [jitter <dur>] | blackhole | hold | reset
           | slice <bytes> [delay <dur>] | truncate <bytes> | clear
      durations like 250us, 20ms, 1.5s
  <idx|all> down        refuse connections, close existing ones
  <idx|all> up          listen again on the same port
  <idx|all> release     deliver the bytes held by "hold"
  <idx|all> reset       abort open connections with RST (one-shot)
  <idx|all> clear       clear the faults of both directions
  <idx> retarget HOST:PORT
                        send new connections to another upstream and close the
                        open ones (follow a failover to the promoted replica,
                        as a Sentinel-aware client would)
  faults                current faults of every map
  stats                 counters of every map
  help                  this command list
  quit                  close this control connection

SIGINT or SIGTERM stops the proxy.

Exit codes: 0 stopped by a signal; 1 cannot start (bind, resources);
2 bad command line.
)";

constexpr size_t kMaxLine = 4096;
constexpr size_t kMaxControlClients = 64;

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  const size_t colon = text.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(text.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad address '", text, "' (want HOST:PORT)"));
  }
  return HostPort{std::string(text.substr(0, colon)), static_cast<uint16_t>(port)};
}

struct Map {
  HostPort listen;
  HostPort upstream;
  std::unique_ptr<FaultProxy> proxy;
};

std::string FlowText(const ProxyStats::Flow& f) {
  return absl::StrCat("delivered=", f.delivered, ",dropped=", f.dropped, ",held=", f.held,
                      ",queued=", f.queued);
}

std::string StatsText(const std::vector<Map>& maps) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < maps.size(); ++i) {
    const ProxyStats s = maps[i].proxy->Stats();
    parts.push_back(absl::StrCat("map", i, " accepted=", s.connections_accepted,
                                 " open=", s.connections_open, " reset=", s.connections_reset,
                                 " upstream_failures=", s.upstream_failures,
                                 " down=", s.down ? 1 : 0, " to_server=", FlowText(s.to_server),
                                 " to_client=", FlowText(s.to_client)));
  }
  return absl::StrJoin(parts, "; ");
}

std::string FaultsText(const std::vector<Map>& maps) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < maps.size(); ++i) {
    parts.push_back(
        absl::StrCat("map", i, " to-server=", maps[i].proxy->fault(Direction::kToServer).ToString(),
                     " to-client=", maps[i].proxy->fault(Direction::kToClient).ToString()));
  }
  return absl::StrJoin(parts, "; ");
}

// Executes one control line; returns the reply line (without newline) and
// sets *quit for "quit".
std::string Execute(std::vector<Map>& maps, absl::string_view line, bool* quit) {
  std::vector<absl::string_view> t =
      absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
  if (t.empty()) return "ERR empty command (try help)";
  const std::string verb = absl::AsciiStrToLower(t[0]);
  if (t.size() == 1) {
    if (verb == "help") {
      return "OK <idx|all> <to-server|to-client|both> <fault>; <idx|all> "
             "down|up|release|reset|clear; <idx> retarget HOST:PORT; faults; stats; help; quit; "
             "fault = "
             "latency <dur> [jitter <dur>] | blackhole | hold | reset | slice "
             "<bytes> [delay <dur>] | truncate <bytes> | clear";
    }
    if (verb == "stats") return absl::StrCat("OK ", StatsText(maps));
    if (verb == "faults") return absl::StrCat("OK ", FaultsText(maps));
    if (verb == "quit") {
      *quit = true;
      return "OK bye";
    }
  }
  // Target selection.
  std::vector<Map*> targets;
  if (verb == "all") {
    for (Map& m : maps) targets.push_back(&m);
  } else {
    size_t idx = 0;
    if (!absl::SimpleAtoi(verb, &idx) || idx >= maps.size()) {
      return absl::StrCat("ERR unknown command or map '", t[0], "' (maps 0..", maps.size() - 1,
                          " or all; try help)");
    }
    targets.push_back(&maps[idx]);
  }
  if (t.size() < 2) return "ERR missing action after the map (try help)";
  const std::string action = absl::AsciiStrToLower(t[1]);
  if (t.size() == 2) {
    if (action == "down") {
      for (Map* m : targets) m->proxy->Down();
      return "OK down";
    }
    if (action == "up") {
      for (Map* m : targets) {
        absl::Status s = m->proxy->Up();
        if (!s.ok()) return absl::StrCat("ERR ", s.message());
      }
      return "OK up";
    }
    if (action == "release") {
      for (Map* m : targets) m->proxy->ReleaseHeld();
      return "OK released";
    }
    if (action == "reset") {
      for (Map* m : targets) m->proxy->ResetAll();
      return "OK reset";
    }
    if (action == "clear") {
      for (Map* m : targets) m->proxy->ClearFaults();
      return "OK cleared";
    }
  }
  if (action == "retarget") {
    if (t.size() != 3 || targets.size() != 1) {
      return "ERR usage: <idx> retarget HOST:PORT (one map at a time)";
    }
    absl::StatusOr<HostPort> to = ParseHostPort(t[2]);
    if (!to.ok()) return absl::StrCat("ERR ", to.status().message());
    absl::Status s = targets[0]->proxy->Retarget(to->host, to->port);
    if (!s.ok()) return absl::StrCat("ERR ", s.message());
    return absl::StrCat("OK retarget ", targets[0]->proxy->upstream());
  }
  std::vector<Direction> dirs;
  if (action == "to-server") {
    dirs = {Direction::kToServer};
  } else if (action == "to-client") {
    dirs = {Direction::kToClient};
  } else if (action == "both") {
    dirs = {Direction::kToServer, Direction::kToClient};
  } else {
    return absl::StrCat("ERR unknown action '", t[1],
                        "' (to-server, to-client, both, down, up, release, "
                        "reset, clear, retarget)");
  }
  if (t.size() < 3) return "ERR missing fault (try help)";
  // The fault text is everything after the direction.
  const size_t at = static_cast<size_t>(t[2].data() - line.data());
  absl::StatusOr<FaultSpec> spec = FaultSpec::Parse(line.substr(at));
  if (!spec.ok()) return absl::StrCat("ERR ", spec.status().message());
  for (Map* m : targets) {
    absl::Status s =
        dirs.size() == 2 ? m->proxy->SetFaultBoth(*spec) : m->proxy->SetFault(dirs[0], *spec);
    if (!s.ok()) return absl::StrCat("ERR ", s.message());
  }
  return absl::StrCat("OK ", action, " ", spec->ToString());
}

int Fail(int code, absl::string_view message) {
  std::fprintf(stderr, "redlock-proxy: %.*s\n", static_cast<int>(message.size()), message.data());
  return code;
}

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  for (int i = 0; i < 1000 && off < data.size(); ++i) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 1000) <= 0) return false;
      continue;
    }
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return off == data.size();
}

struct ControlClient {
  int fd = -1;
  std::string buffer;
};

int Main(int argc, char** argv) {
  const flags::Parsed args =
      flags::ParseOrExit(argc, argv, "redlock-proxy", absl::StripTrailingAsciiWhitespace(kUsage),
                         {.files = {"testkit/fault_proxy_main.cc"},
                          .value_names = {{"map", "LISTEN=UPSTREAM"}, {"control", "HOST:PORT"}}});
  if (const std::string* extra = args.FirstArgument()) {
    return Fail(2, absl::StrCat("unexpected argument '", *extra, "'; see --help"));
  }
  std::vector<Map> maps;
  for (const std::string& value : absl::GetFlag(FLAGS_map)) {
    std::vector<absl::string_view> sides = absl::StrSplit(value, '=');
    if (sides.size() != 2) {
      return Fail(2, absl::StrCat("bad --map '", value, "' (want LISTEN=UPSTREAM); see --help"));
    }
    auto listen = ParseHostPort(sides[0]);
    auto upstream = ParseHostPort(sides[1]);
    if (!listen.ok()) return Fail(2, listen.status().message());
    if (!upstream.ok()) return Fail(2, upstream.status().message());
    maps.push_back(Map{*listen, *upstream, nullptr});
  }
  const std::string control_text = absl::GetFlag(FLAGS_control);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (maps.empty()) return Fail(2, "at least one --map is required; see --help");
  if (control_text.empty()) return Fail(2, "--control is required; see --help");
  auto control = ParseHostPort(control_text);
  if (!control.ok()) return Fail(2, control.status().message());
  in_addr control_addr{};
  if (inet_pton(AF_INET, control->host.c_str(), &control_addr) != 1 ||
      (ntohl(control_addr.s_addr) >> 24) != 127) {
    return Fail(
        2, absl::StrCat("--control '", control_text, "' must be an IPv4 address in 127.0.0.0/8"));
  }

  // Signals arrive through a descriptor so that the poll loop stays simple;
  // blocked before the proxy threads start, which inherit the mask.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGPIPE);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
    return Fail(1, absl::StrCat("sigprocmask: ", strerror(errno)));
  }
  sigdelset(&mask, SIGPIPE);
  const int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sig_fd < 0) return Fail(1, absl::StrCat("signalfd: ", strerror(errno)));

  for (size_t i = 0; i < maps.size(); ++i) {
    ProxyOptions options;
    options.listen_host = maps[i].listen.host;
    options.listen_port = maps[i].listen.port;
    options.upstream_host = maps[i].upstream.host;
    options.upstream_port = maps[i].upstream.port;
    options.seed = seed == 0 ? 0 : seed + i;
    auto proxy = FaultProxy::Start(options);
    if (!proxy.ok()) {
      return Fail(proxy.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1,
                  absl::StrCat("map ", i, ": ", proxy.status().message()));
    }
    maps[i].proxy = *std::move(proxy);
  }

  const int listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) return Fail(1, absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = control_addr;
  sa.sin_port = htons(control->port);
  if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::listen(listen_fd, 16) != 0) {
    return Fail(1, absl::StrCat("cannot listen on control ", control_text, ": ", strerror(errno)));
  }
  socklen_t len = sizeof(sa);
  ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len);

  std::string ready = absl::StrCat("READY control=", control->host, ":", ntohs(sa.sin_port));
  for (size_t i = 0; i < maps.size(); ++i) {
    absl::StrAppend(&ready, " map", i, "=", maps[i].proxy->listen_address(), "->",
                    maps[i].upstream.host, ":", maps[i].upstream.port);
  }
  std::printf("%s\n", ready.c_str());
  std::fflush(stdout);

  std::vector<ControlClient> clients;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({sig_fd, POLLIN, 0});
    fds.push_back({listen_fd, POLLIN, 0});
    for (const ControlClient& c : clients) fds.push_back({c.fd, POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail(1, absl::StrCat("poll: ", strerror(errno)));
    }
    if (fds[0].revents != 0) break;        // SIGINT / SIGTERM
    const size_t polled = clients.size();  // fds[2 + i] for i < polled
    if (fds[1].revents != 0) {
      const int cfd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (cfd >= 0) {
        if (clients.size() >= kMaxControlClients) {
          SendAll(cfd, "ERR too many control connections\n");
          ::close(cfd);
        } else {
          clients.push_back({cfd, ""});
        }
      }
    }
    std::vector<ControlClient> keep;
    for (size_t i = 0; i < clients.size(); ++i) {
      ControlClient& c = clients[i];
      bool close_it = false;
      if (i < polled && fds[i + 2].revents != 0) {
        char buf[1024];
        const ssize_t r = ::recv(c.fd, buf, sizeof(buf), 0);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
          close_it = true;
        } else if (r > 0) {
          c.buffer.append(buf, static_cast<size_t>(r));
        }
        // Bounded: each pass consumes one line.
        for (size_t nl; !close_it && (nl = c.buffer.find('\n')) != std::string::npos;) {
          const std::string line = c.buffer.substr(0, nl);
          c.buffer.erase(0, nl + 1);
          bool quit = false;
          const std::string reply = Execute(maps, line, &quit);
          if (!SendAll(c.fd, reply + "\n") || quit) close_it = true;
        }
        if (!close_it && c.buffer.size() > kMaxLine) {
          SendAll(c.fd, "ERR line too long\n");
          close_it = true;
        }
      }
      if (close_it) {
        ::close(c.fd);
      } else {
        keep.push_back(std::move(c));
      }
    }
    clients.swap(keep);
  }
  for (ControlClient& c : clients) ::close(c.fd);
  ::close(listen_fd);
  ::close(sig_fd);
  maps.clear();  // stops every proxy
  return 0;
}

}  // namespace
}  // namespace redlock::testkit

int main(int argc, char** argv) { return redlock::testkit::Main(argc, argv); }
