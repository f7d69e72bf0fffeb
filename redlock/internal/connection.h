// One connection to one node, written once for the three kinds the engine
// keeps per node: the command connection (pipelined requests, replies in
// order), the subscriber connection (release announcements pushed by the
// node) and the connections a node's locator keeps (one to each Sentinel of
// a Sentinel-managed node).
// It connects (non-blocking, resolved per attempt), establishes the stream,
// runs the handshake, frames replies, and on failure records why and when to
// try again (exponential backoff with jitter).
//
// Not thread-safe: its owner serialises every call (the engine holds the
// node's mutex, or runs it on the polling thread only).

#ifndef REDLOCK_INTERNAL_CONNECTION_H_
#define REDLOCK_INTERNAL_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/reply.h"
#include "redlock/internal/reply_reader.h"
#include "redlock/internal/stream.h"
#include "redlock/options.h"

namespace redlock::internal {

// A side connection (subscriber, Sentinel) silent for this long is sent a
// PING; without any answer within connect_timeout it is replaced. A
// half-open connection (the peer's host gone, a NAT or firewall that forgot
// the flow) is otherwise never noticed, and delivers nothing again.
inline constexpr absl::Duration kKeepaliveIdle = absl::Seconds(1);

// Makes the stream over a connecting socket (plain TCP, or TLS). Null with
// `*error` set when it cannot (a TLS context that failed to load, say).
using StreamFactory = std::function<std::unique_ptr<Stream>(int fd, std::string* error)>;

// One command of a handshake: what to send, and the check of its reply
// ("" when the reply is fine, else what is wrong with the node).
struct HandshakeStep {
  std::string payload;
  std::function<std::string(const Reply&)> check;
};

// The message for an error reply to handshake step `step` (AUTH, SELECT,
// ...); a node asking for a password names the fix.
std::string HandshakeError(absl::string_view step, const Reply& reply);

// AUTH (password, or ACL user and password) and SELECT db for `endpoint`,
// with their checks: the first steps of every handshake.
std::vector<HandshakeStep> LoginSteps(const Endpoint& endpoint);

class Connection {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  enum class State { kDisconnected, kConnecting, kEstablishing, kHandshake, kReady };

  struct Settings {
    Endpoint endpoint;
    absl::Duration connect_timeout = absl::Seconds(1);
    absl::Duration backoff_min = absl::Milliseconds(10);
    absl::Duration backoff_max = absl::Seconds(1);
    StreamFactory make_stream;  // null: plain TCP (tls_stream.h: TLS)
    ReplyLimits reply_limits;   // a reply over them fails the connection
  };

  // What HandleIo saw.
  struct Progress {
    bool ready = false;       // the handshake just finished
    std::string failure;      // the connection failed (then closed by the caller)
    bool want_write = false;  // output is blocked until the socket is writable
  };

  explicit Connection(Settings settings);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  State state() const { return state_; }
  bool ready() const { return state_ == State::kReady; }
  // The socket while not disconnected, else -1.
  int fd() const { return stream_ != nullptr ? stream_->fd() : connecting_fd_; }
  // Bumped on every connect and close: tags the socket's poll events, so an
  // event of a closed socket is never taken for the new one.
  uint32_t generation() const { return generation_; }
  // The stream, shared with a writer that writes outside the owner's lock.
  const std::shared_ptr<Stream>& stream() const { return stream_; }
  TimePoint next_connect() const { return next_connect_; }
  TimePoint connect_deadline() const { return connect_deadline_; }

  // Where the next Start connects, and over which stream: a node's master
  // may move (locator.h), and TLS checks the name of where it went.
  void Retarget(const std::string& host, int port, StreamFactory make_stream) {
    settings_.endpoint.host = host;
    settings_.endpoint.port = port;
    settings_.make_stream = std::move(make_stream);
  }

  // Starts connecting with `steps` as the handshake; false (and closed, with
  // the reason in *why) when it failed at once.
  bool Start(std::vector<HandshakeStep> steps, std::string* why);

  // Drives the connection on poll events: connect, establish, handshake
  // replies, then reads every available byte and appends the replies that
  // follow the handshake to `replies`.
  Progress HandleIo(uint32_t events, std::vector<Reply>* replies);

  // Writes as much of `out` as the socket takes (erasing it from `out`).
  // Progress::failure on a write error.
  Progress Write(std::string* out) { return WriteSome(*stream_, out); }
  static Progress WriteSome(Stream& stream, std::string* out);

  // Closes (if open) and schedules the next attempt after the backoff.
  void Close();

 private:
  Progress ReadAll(std::vector<Reply>* replies);
  // Frames the replies buffered so far: handshake replies are checked, the
  // others appended to `replies`. False (with p->failure) on a failure.
  bool TakeReplies(std::vector<Reply>* replies, Progress* p);
  Progress Establish();

  Settings settings_;
  State state_ = State::kDisconnected;
  std::shared_ptr<Stream> stream_;
  int connecting_fd_ = -1;  // the socket before the stream exists
  std::unique_ptr<ReplyReader> reader_;
  std::vector<HandshakeStep> steps_;
  size_t steps_done_ = 0;
  bool got_bytes_ = false;  // the node has sent something on this connection
  uint32_t generation_ = 0;
  absl::Duration backoff_;
  TimePoint next_connect_{};
  TimePoint connect_deadline_{};
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CONNECTION_H_
