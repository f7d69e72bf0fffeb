#include "redlock/internal/subscriber.h"

#include <sys/epoll.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "redlock/internal/resp.h"

namespace redlock::internal {
namespace {

// A channel's share of a SUBSCRIBE command: its bulk string header and CRLFs.
size_t ChannelBytes(const std::string& channel) { return channel.size() + 16; }

// Backlog a subscriber connection may have beyond one resubscription of
// every channel: a node that has not read that much is not reading.
constexpr size_t kSubBacklogSlack = size_t{1} << 20;

std::string ChannelsCommand(const char* verb, const std::vector<std::string>& channels) {
  std::string cmd;
  AppendArrayHeader(&cmd, channels.size() + 1);
  AppendBulk(&cmd, verb);
  for (const auto& c : channels) AppendBulk(&cmd, c);
  return cmd;
}

}  // namespace

std::string Subscriber::Add(const std::vector<std::string>& channels) {
  std::vector<std::string> fresh;
  for (const auto& c : channels) {
    if (channels_[c]++ == 0) {
      fresh.push_back(c);
      channel_bytes_ += ChannelBytes(c);
    }
  }
  return fresh.empty() ? std::string() : ChannelsCommand("SUBSCRIBE", fresh);
}

std::string Subscriber::Remove(const std::vector<std::string>& channels) {
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
  return gone.empty() ? std::string() : ChannelsCommand("UNSUBSCRIBE", gone);
}

void Subscriber::Start(SubscriberLink& link, const Endpoint& endpoint, int node) {
  std::vector<HandshakeStep> steps = LoginSteps(endpoint);
  // PING proves the handshake is through (a subscriber connection answers
  // nothing else before it subscribes).
  HandshakeStep ping;
  AppendCommand(&ping.payload, {"PING"});
  ping.check = [](const Reply& r) -> std::string {
    return r.IsStatus("PONG") ? "" : absl::StrCat("PING returned ", r.Describe());
  };
  steps.push_back(std::move(ping));
  std::string why;
  link.out_.clear();
  link.epollout_ = false;
  link.ping_out_ = false;
  if (!link.conn.Start(std::move(steps), &why)) {
    Failed(link, why);
    return;
  }
  poller_.Register(link.conn, node, Poller::kSubscriber, EPOLL_CTL_ADD,
                   /*writable=*/true);  // connect done
}

void Subscriber::Write(SubscriberLink& link, int node, std::string bytes) {
  if (!link.conn.ready()) return;
  link.out_.append(bytes);
  if (link.out_.size() > channel_bytes_ + kSubBacklogSlack) {
    // A stopped node reads nothing, and every waiter that comes or goes adds
    // to the backlog. Past one resubscription of every channel the backlog
    // is worth less than a new connection, which subscribes to the channels
    // still wanted once the node answers again.
    Close(link, absl::StrCat("the node has not read ", link.out_.size(),
                             " bytes of subscription changes; reconnecting"));
    return;
  }
  if (link.epollout_) return;
  Connection::Progress p = link.conn.Write(&link.out_);
  if (!p.failure.empty()) {
    Close(link, p.failure);
    return;
  }
  if (!link.out_.empty()) {
    link.epollout_ = true;
    poller_.Register(link.conn, node, Poller::kSubscriber, EPOLL_CTL_MOD, true);
  }
}

void Subscriber::OnIo(SubscriberLink& link, int node, uint32_t events) {
  std::vector<Reply> messages;
  Connection::Progress p = poller_.SideIo(link.conn, node, Poller::kSubscriber, events, &messages);
  if (!p.failure.empty()) {
    Close(link, p.failure);
    return;
  }
  if (p.ready || !messages.empty()) {
    link.last_heard_ = std::chrono::steady_clock::now();
    link.ping_out_ = false;
  }
  if (p.ready && !channels_.empty()) {
    {
      std::lock_guard<std::mutex> lock(link.mu_);
      link.error_.clear();
    }
    std::vector<std::string> all;
    all.reserve(channels_.size());
    for (const auto& [c, count] : channels_) all.push_back(c);
    Write(link, node, ChannelsCommand("SUBSCRIBE", all));
  }
  if ((events & EPOLLOUT) && link.epollout_ && link.conn.ready()) {
    link.epollout_ = false;
    poller_.Register(link.conn, node, Poller::kSubscriber, EPOLL_CTL_MOD, false);
    Write(link, node, "");
  }
  for (const Reply& m : messages) {
    // subscribe/unsubscribe confirmations need no action.
    if (m.type == Reply::Type::kArray && m.elements.size() == 3 && m.elements[0].str == "message" &&
        handler_) {
      handler_(node, m.elements[1].str, m.elements[2].str);
    }
  }
}

void Subscriber::Failed(SubscriberLink& link, const std::string& why) {
  // Notifications are best effort: waiters fall back to polling meanwhile.
  std::lock_guard<std::mutex> lock(link.mu_);
  link.error_ = why;
}

void Subscriber::Close(SubscriberLink& link, const std::string& why) {
  if (!life_.stopping()) Failed(link, why);
  poller_.Unregister(link.conn.fd());
  link.conn.Close();
  std::string().swap(link.out_);  // its memory too: a new connection resubscribes
}

void Subscriber::Maintain(SubscriberLink& link, const Endpoint& endpoint, int node, TimePoint now) {
  if (channels_.empty() || life_.stopping()) return;
  switch (link.conn.state()) {
    case Connection::State::kDisconnected:
      if (now >= link.conn.next_connect()) Start(link, endpoint, node);
      break;
    case Connection::State::kReady:
      if (link.ping_out_) {
        if (now - link.ping_sent_ >= absl::ToChronoNanoseconds(connect_timeout_)) {
          Close(link, absl::StrCat("no answer to a keep-alive PING within ",
                                   absl::FormatDuration(connect_timeout_), "; reconnecting"));
        }
      } else if (now - link.last_heard_ >= absl::ToChronoNanoseconds(kKeepaliveIdle)) {
        // Answered in subscribed mode too (["pong", ...]); any reply will do.
        link.ping_out_ = true;
        link.ping_sent_ = now;
        Write(link, node, EncodeCommand({"PING", "redlock-keepalive"}));
      }
      break;
    default:
      if (now >= link.conn.connect_deadline()) Close(link, "could not connect in time");
      break;
  }
}

Subscriber::TimePoint Subscriber::NextWake(const SubscriberLink& link, TimePoint wake) const {
  if (channels_.empty()) return wake;
  const Connection& c = link.conn;
  if (c.state() == Connection::State::kDisconnected) return std::min(wake, c.next_connect());
  if (!c.ready()) return std::min(wake, c.connect_deadline());
  return std::min(wake, link.ping_out_
                            ? link.ping_sent_ + absl::ToChronoNanoseconds(connect_timeout_)
                            : link.last_heard_ + absl::ToChronoNanoseconds(kKeepaliveIdle));
}

}  // namespace redlock::internal
