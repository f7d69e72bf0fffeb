// The engine's subscriber connection per node, opened when the first channel
// is subscribed: release announcements (redlock:release:<key>) for waiting
// acquisitions, resubscribed after every reconnect. Kept alive: silent for
// kKeepaliveIdle, it is sent a PING, and replaced when nothing answers
// within connect_timeout (a half-open connection delivers nothing, forever).

#include <sys/epoll.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "redlock/internal/engine.h"
#include "redlock/internal/engine_node.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

// A channel's share of a SUBSCRIBE command: its bulk string header and CRLFs.
size_t ChannelBytes(const std::string& channel) { return channel.size() + 16; }

// Backlog a subscriber connection may have beyond one resubscription of
// every channel: a node that has not read that much is not reading.
constexpr size_t kSubBacklogSlack = size_t{1} << 20;

}  // namespace

void Engine::Subscribe(const std::vector<std::string>& channels) {
  Post([this, channels] {
    std::vector<std::string> fresh;
    for (const auto& c : channels) {
      if (channels_[c]++ == 0) {
        fresh.push_back(c);
        channel_bytes_ += ChannelBytes(c);
      }
    }
    if (fresh.empty()) return;
    std::string cmd;
    AppendArrayHeader(&cmd, fresh.size() + 1);
    AppendBulk(&cmd, "SUBSCRIBE");
    for (const auto& c : fresh) AppendBulk(&cmd, c);
    // Connections still connecting subscribe to every channel once ready.
    // A cluster node listens on one member: PUBLISH reaches every member.
    for (int i = 0; i < size(); ++i) SubWrite(NodeAt(i), cmd);
  });
}

void Engine::Unsubscribe(const std::vector<std::string>& channels) {
  Post([this, channels] {
    std::vector<std::string> gone;
    for (const auto& c : channels) {
      auto it = channels_.find(c);
      if (it == channels_.end()) continue;
      if (--it->second <= 0) {
        channel_bytes_ -= ChannelBytes(c);
        channels_.erase(it);
        gone.push_back(c);
      }
    }
    if (gone.empty()) return;
    std::string cmd;
    AppendArrayHeader(&cmd, gone.size() + 1);
    AppendBulk(&cmd, "UNSUBSCRIBE");
    for (const auto& c : gone) AppendBulk(&cmd, c);
    for (int i = 0; i < size(); ++i) SubWrite(NodeAt(i), cmd);
  });
}

void Engine::SubStart(Node& n) {
  std::vector<HandshakeStep> steps = LoginSteps(n.endpoint);
  // PING proves the handshake is through (a subscriber connection answers
  // nothing else before it subscribes).
  HandshakeStep ping;
  AppendCommand(&ping.payload, {"PING"});
  ping.check = [](const Reply& r) -> std::string {
    return r.IsStatus("PONG") ? "" : absl::StrCat("PING returned ", r.Describe());
  };
  steps.push_back(std::move(ping));
  std::string why;
  n.sub_out.clear();
  n.sub_epollout = false;
  n.sub_ping_out = false;
  if (!n.sub.Start(std::move(steps), &why)) {
    SubFailed(n, why);
    return;
  }
  Register(n.sub, n.index, kSubscriberEvents, EPOLL_CTL_ADD, /*writable=*/true);  // connect done
}

void Engine::SubWrite(Node& n, std::string bytes) {
  if (!n.sub.ready()) return;
  n.sub_out.append(bytes);
  if (n.sub_out.size() > channel_bytes_ + kSubBacklogSlack) {
    // A stopped node reads nothing, and every waiter that comes or goes adds
    // to the backlog. Past one resubscription of every channel the backlog
    // is worth less than a new connection, which subscribes to the channels
    // still wanted once the node answers again.
    SubClose(n, absl::StrCat("the node has not read ", n.sub_out.size(),
                             " bytes of subscription changes; reconnecting"));
    return;
  }
  if (n.sub_epollout) return;
  Connection::Progress p = n.sub.Write(&n.sub_out);
  if (!p.failure.empty()) {
    SubClose(n, p.failure);
    return;
  }
  if (!n.sub_out.empty()) {
    n.sub_epollout = true;
    Register(n.sub, n.index, kSubscriberEvents, EPOLL_CTL_MOD, true);
  }
}

void Engine::OnSubIo(Node& n, uint32_t events) {
  std::vector<Reply> messages;
  Connection::Progress p = SideConnectionIo(n.sub, n.index, kSubscriberEvents, events, &messages);
  if (!p.failure.empty()) {
    SubClose(n, p.failure);
    return;
  }
  if (p.ready || !messages.empty()) {
    n.sub_last_heard = std::chrono::steady_clock::now();
    n.sub_ping_out = false;
  }
  if (p.ready && !channels_.empty()) {
    {
      std::lock_guard<std::mutex> lock(n.mu);
      n.sub_error.clear();
    }
    std::string cmd;
    AppendArrayHeader(&cmd, channels_.size() + 1);
    AppendBulk(&cmd, "SUBSCRIBE");
    for (const auto& [c, count] : channels_) AppendBulk(&cmd, c);
    SubWrite(n, std::move(cmd));
  }
  if ((events & EPOLLOUT) && n.sub_epollout && n.sub.ready()) {
    n.sub_epollout = false;
    Register(n.sub, n.index, kSubscriberEvents, EPOLL_CTL_MOD, false);
    SubWrite(n, "");
  }
  for (const Reply& m : messages) {
    // subscribe/unsubscribe confirmations need no action.
    if (m.type == Reply::Type::kArray && m.elements.size() == 3 && m.elements[0].str == "message" &&
        message_handler_) {
      message_handler_(n.index, m.elements[1].str, m.elements[2].str);
    }
  }
}

void Engine::SubFailed(Node& n, const std::string& why) {
  // Notifications are best effort: waiters fall back to polling meanwhile.
  std::lock_guard<std::mutex> lock(n.mu);
  n.sub_error = why;
}

void Engine::SubClose(Node& n, const std::string& why) {
  if (!stopping()) SubFailed(n, why);
  if (n.sub.fd() >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, n.sub.fd(), nullptr);
  n.sub.Close();
  std::string().swap(n.sub_out);  // its memory too: a new connection resubscribes
}

void Engine::SubMaintain(Node& n, TimePoint now) {
  if (channels_.empty() || stopping()) return;
  if (!n.locator->Known()) return;
  switch (n.sub.state()) {
    case Connection::State::kDisconnected:
      if (now >= n.sub.next_connect()) SubStart(n);
      break;
    case Connection::State::kReady:
      if (n.sub_ping_out) {
        if (now - n.sub_ping_sent >= absl::ToChronoNanoseconds(config_.connect_timeout)) {
          SubClose(n,
                   absl::StrCat("no answer to a keep-alive PING within ",
                                absl::FormatDuration(config_.connect_timeout), "; reconnecting"));
        }
      } else if (now - n.sub_last_heard >= absl::ToChronoNanoseconds(kKeepaliveIdle)) {
        // Answered in subscribed mode too (["pong", ...]); any reply will do.
        n.sub_ping_out = true;
        n.sub_ping_sent = now;
        SubWrite(n, EncodeCommand({"PING", "redlock-keepalive"}));
      }
      break;
    default:
      if (now >= n.sub.connect_deadline()) SubClose(n, "could not connect in time");
      break;
  }
}

}  // namespace redlock::internal
