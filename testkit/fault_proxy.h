// FaultProxy: a TCP proxy in front of one upstream (one Redis node) that
// injects network faults the chaos harness switches at run time.
//
// Thread safety: every method is thread-safe. Each proxy runs one event-loop
// thread (epoll, non-blocking sockets, TCP_NODELAY on both legs, no busy
// polling); the methods hand their change to that thread and return once it is
// in effect, so after SetFault() returns every byte read from then on is
// subject to the new fault, and after Down() returns connections are refused.
//
// Usage:
//
//   ProxyOptions options;
//   options.upstream_port = redis_port;            // 127.0.0.1 by default
//   REDLOCK_ASSIGN_OR_RETURN(auto proxy, FaultProxy::Start(options));
//   Connect("127.0.0.1", proxy->listen_port());    // clients use the proxy
//   REDLOCK_RETURN_IF_ERROR(proxy->SetFault(Direction::kToClient, FaultSpec::BlackHole()));
//   ...                                            // writes execute, acks vanish
//   proxy->ClearFaults();
//
// Faults are per direction (Direction::kToServer: client -> upstream bytes;
// Direction::kToClient: upstream -> client bytes) and apply to the bytes the
// proxy reads after the fault is set, on existing and new connections alike.
// Bytes already queued keep the schedule they were given when read. One fault
// per direction at a time; setting one replaces the previous one (and
// replacing or clearing kHold releases the held bytes).
//
//   kLatency   each chunk read at time t is delivered at
//              t + latency + uniform[0, jitter], never before the previous
//              chunk of the same connection and direction (order preserved).
//   kBlackHole bytes are read and discarded; the connection stays open. With
//              kToClient this is "ack loss": the server executes, the client
//              never hears.
//   kHold      bytes are buffered, undelivered, until ReleaseHeld() or until
//              the fault is replaced or cleared; then delivered in order. A
//              client that closes its side does not close the upstream leg
//              while bytes are held towards the server: they are delivered
//              after release, and then the upstream leg is closed (a SET that
//              arrives after the client gave up).
//   kReset     every open connection is aborted with RST (SO_LINGER 0) when
//              the fault is set; while it stays set (in either direction), new
//              connections are accepted and reset at once.
//   kSlice     bytes are delivered in slices of `slice_bytes` with
//              `slice_delay` between slices (parser stress); every byte
//              arrives, in order.
//   kResetAfterDelivery
//              every connection is aborted with RST right after the proxy
//              has written a chunk in this direction (kToClient: a reply
//              reached the client's socket, then the connection is gone; the
//              next request finds it reset).
//   kTruncate  only the first `truncate_bytes` bytes read in this direction
//              (per connection, counted from when the fault is set, or from
//              the connection's start for later connections) are delivered;
//              then the whole connection is closed and the rest discarded.
//
// Down() is not a per-direction fault: it closes the listening socket (new
// connections are refused) and closes every connection, discarding queued and
// held bytes; Up() listens again on the same port. Faults persist across
// Down()/Up().
//
// Buffering: per connection and direction, bytes waiting for delivery (latency,
// slicing, a slow reader) are bounded by ProxyOptions::max_queued_bytes: when
// reached, the proxy stops reading that side and TCP backpressure reaches the
// sender. Held bytes (kHold) and discarded bytes (kBlackHole) are NOT bounded:
// the proxy keeps reading so that the sender's writes complete, and held bytes
// grow with whatever the peer sends while the fault is set. Keep holds short or
// the traffic small (Redis commands in the chaos scenarios are).
//
// All addresses are IPv4 loopback (127.0.0.0/8); the proxy never connects or
// listens anywhere else.

#ifndef REDLOCK_TESTKIT_FAULT_PROXY_H_
#define REDLOCK_TESTKIT_FAULT_PROXY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace redlock::testkit {

enum class Direction {
  kToServer = 0,  // client -> upstream
  kToClient = 1,  // upstream -> client
};

// "to-server" / "to-client".
absl::string_view DirectionName(Direction direction);

enum class FaultKind {
  kNone,
  kLatency,
  kBlackHole,
  kHold,
  kReset,
  kSlice,
  kTruncate,
  kResetAfterDelivery,
};

// One fault for one direction. Only the fields of `kind` are used.
struct FaultSpec {
  FaultKind kind = FaultKind::kNone;

  // kLatency: fixed delay, plus a uniform random extra in [0, jitter].
  absl::Duration latency = absl::ZeroDuration();
  absl::Duration jitter = absl::ZeroDuration();

  // kSlice: slice size (>= 1) and pause between slices (>= 0).
  size_t slice_bytes = 1;
  absl::Duration slice_delay = absl::Milliseconds(1);

  // kTruncate: bytes let through before the connection is closed (may be 0).
  size_t truncate_bytes = 0;

  static FaultSpec None() { return FaultSpec{}; }
  static FaultSpec Latency(absl::Duration latency, absl::Duration jitter = absl::ZeroDuration());
  static FaultSpec BlackHole();
  static FaultSpec Hold();
  static FaultSpec Reset();
  static FaultSpec Slice(size_t bytes, absl::Duration delay = absl::Milliseconds(1));
  static FaultSpec Truncate(size_t bytes);
  static FaultSpec ResetAfterDelivery();

  // Parses the text form, tokens separated by blanks, case-insensitive:
  //   "clear" | "none"
  //   "latency <duration> [jitter <duration>]"   e.g. "latency 20ms jitter 5ms"
  //   "blackhole" | "hold" | "reset"
  //   "slice <bytes> [delay <duration>]"         default delay 1ms
  //   "truncate <bytes>"
  //   "reset-after"                               kResetAfterDelivery
  // Durations use absl::ParseDuration syntax ("250us", "20ms", "1.5s", "0").
  // Errors: kInvalidArgument naming the offending token.
  [[nodiscard]] static absl::StatusOr<FaultSpec> Parse(absl::string_view text);

  // The text form, which Parse() accepts ("none" for kNone).
  std::string ToString() const;

  // kInvalidArgument if a duration is negative or infinite, latency + jitter
  // exceeds one hour, or slice_bytes is 0.
  [[nodiscard]] absl::Status Validate() const;
};

struct ProxyOptions {
  // Where clients connect: an IPv4 address in 127.0.0.0/8 (or "localhost").
  // Port 0 picks an ephemeral port, kept across Down()/Up().
  // Default: 127.0.0.1:0.
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;

  // The server every accepted connection is forwarded to; 127.0.0.0/8 only.
  // upstream_port is required. Default host: 127.0.0.1.
  std::string upstream_host = "127.0.0.1";
  uint16_t upstream_port = 0;

  // Bytes waiting for delivery per connection and direction before the proxy
  // stops reading from the sender (held bytes do not count).
  // Default: 1 MiB.
  size_t max_queued_bytes = size_t{1} << 20;

  // Seed of the jitter generator; 0 seeds it randomly. Default: 0.
  uint64_t seed = 0;
};

// Counters since Start(). Bytes are payload bytes.
struct ProxyStats {
  struct Flow {
    uint64_t delivered = 0;  // written to the receiving side
    uint64_t dropped = 0;    // discarded (black-hole, truncation, close, down)
    uint64_t held = 0;       // held now (kHold), not yet released
    uint64_t queued = 0;     // read, not held, not yet delivered
  };
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;
  uint64_t connections_reset = 0;  // aborted with RST by the proxy
  uint64_t upstream_failures = 0;  // upstream connect refused or failed
  bool down = false;
  Flow to_server;
  Flow to_client;

  const Flow& flow(Direction d) const { return d == Direction::kToServer ? to_server : to_client; }
};

class FaultProxy {
 public:
  // Validates `options`, binds and listens, and starts the event loop. The
  // upstream is not contacted until a client connects (a refused upstream
  // connect closes that client's connection and counts upstream_failures).
  // Errors: kInvalidArgument for a non-loopback or malformed address or a
  // missing upstream port; kUnavailable if the listen address cannot be bound
  // or a system resource (epoll, thread) cannot be created.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FaultProxy>> Start(
      const ProxyOptions& options);

  // Stops the loop and closes every socket (connections see EOF; queued and
  // held bytes are discarded). Never blocks on a peer.
  ~FaultProxy();

  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // The bound port (the ephemeral one when options.listen_port was 0).
  uint16_t listen_port() const;
  // "127.0.0.1:<port>" (with the configured listen host).
  std::string listen_address() const;
  const ProxyOptions& options() const;

  // Replaces the fault of `direction`. Errors: kInvalidArgument if
  // !spec.Validate().ok() (the previous fault stays).
  [[nodiscard]] absl::Status SetFault(Direction direction, const FaultSpec& spec);
  // Both directions at once (atomically with respect to traffic).
  [[nodiscard]] absl::Status SetFaultBoth(const FaultSpec& spec);
  FaultSpec fault(Direction direction) const;

  // Both directions back to kNone; held bytes are released.
  void ClearFaults();

  // Delivers every byte held so far, in order; a kHold fault stays set and
  // holds what is read afterwards.
  void ReleaseHeld();

  // Aborts every open connection with RST now (one-shot; new connections are
  // not affected unless a kReset fault is set).
  void ResetAll();

  // Closes the listener and every connection. Idempotent.
  void Down();

  // Listens again on the same port. OK if already up.
  // Errors: kUnavailable if the port cannot be bound (taken meanwhile).
  [[nodiscard]] absl::Status Up();

  // Sends every new connection to another upstream from now on, and closes
  // every open connection (queued and held bytes are discarded), so that
  // clients reconnect and reach the new upstream. This is how a harness makes
  // a client follow a failover, as a Sentinel-aware client would: the proxy
  // in front of "node i" is re-pointed at the promoted replica. Faults and
  // the listening state stay as they are. options() keeps the upstream given
  // at Start; upstream() is the current one.
  // Errors: kInvalidArgument for a non-loopback host or port 0.
  [[nodiscard]] absl::Status Retarget(const std::string& host, uint16_t port);
  // "host:port" of the current upstream.
  std::string upstream() const;

  ProxyStats Stats() const;

 private:
  class Loop;
  explicit FaultProxy(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace redlock::testkit

#endif  // REDLOCK_TESTKIT_FAULT_PROXY_H_
