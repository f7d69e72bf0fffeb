// chaos/clients/external_client.h: any Redlock client under test, through an adapter.
//
// A chaos client process (redlock-chaos-client, chaos/clients/workload.h) keeps its
// loop, its history, its markers and the "use" of the lock; with
// ClientConfig::client naming an external client, the lock itself comes
// from an ADAPTER: a child process that wraps another Redlock client (in any
// language) and answers one JSON request per line on its stdin with one JSON
// reply per line on its stdout. The protocol (hello, acquire, remaining,
// extend, release) is specified in chaos/README.md, section "Any client
// under test"; kProtocolVersion is its version.
//
// Which adapter: ClientConfig::client is
//   "library"       this library (no adapter; the default);
//   "node-redlock"  node <clients>/node-redlock/adapter.js (npm redlock@4.2.0);
//   "redis-py"      python3 <clients>/redis-py/adapter.py (Debian's
//                   python3-redis, the single-instance redis.lock.Lock);
//   anything else   a command line run by /bin/sh -c "exec <client>".
// <clients> is $REDLOCK_CHAOS_CLIENTS_DIR, else chaos/clients of the source
// tree this was built from. The runtimes are $REDLOCK_CHAOS_NODE (default
// `node` on the PATH) and $REDLOCK_CHAOS_PYTHON (default /usr/bin/python3,
// Debian's, which is the one that sees python3-redis). scripts/lab-clients.sh
// installs both adapters' dependencies.
//
// How the answers become a HeldLock: start_raw is the raw clock just before
// the acquire request is written, valid_until_raw the raw clock when the
// reply is read plus the validity the adapter reported (its belief at the
// moment of answering), or, when smaller, the same for a `remaining` asked
// right after the grant (should the client process alone be stopped while
// its adapter answered, the pause is thereby counted as the adapter's clock
// saw it, not credited; the harness stops the client's whole process group,
// adapter included: ClientProcess::Pause). TimeLeft asks the adapter
// (`remaining`), so a client that measures its lease on the wall clock is
// judged by its own belief.
//
// Failures of the adapter itself (it exits, answers something that is not a
// reply to the request, or does not answer within the request timeout) are
// not lock failures: the backend records the reason (Failure()), answers
// every later call with it, and the client loop stops and exits non-zero.
//
// Thread-safety: an ExternalBackend is used by one thread at a time.

#ifndef REDLOCK_CHAOS_EXTERNAL_CLIENT_H_
#define REDLOCK_CHAOS_EXTERNAL_CLIENT_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "chaos/clients/workload.h"

namespace redlock::chaos {

inline constexpr int kProtocolVersion = 1;

// The name of this library as a client under test ("library").
inline constexpr absl::string_view kLibraryClient = "library";

// True for "library" (and ""): no adapter.
bool IsLibraryClient(absl::string_view client);

// The names with a built-in adapter: "node-redlock", "redis-py".
std::vector<std::string> KnownExternalClients();

// What the client names: the command line of its adapter. kNotFound when a
// known adapter's runtime or script is missing, with what to install.
struct AdapterCommand {
  std::vector<std::string> argv;  // argv[0] is a path
  std::string description;        // "node-redlock (node .../adapter.js)"
  bool known = false;             // a built-in adapter (scripts/lab-clients.sh installs it)
};
[[nodiscard]] absl::StatusOr<AdapterCommand> ResolveAdapter(absl::string_view client);

// Whether `client` can run here: OK for the library, a user's command, and a
// known adapter whose runtime and dependencies are installed (it runs the
// adapter with --check). Otherwise kFailedPrecondition naming
// scripts/lab-clients.sh (a test skips), or kNotFound under CI=true (a test
// fails: CI must run every client).
[[nodiscard]] absl::Status CheckExternalClientAvailable(absl::string_view client);

// The adapter's hello.
struct AdapterInfo {
  std::string name;
  std::string version;
  bool single_instance = false;
  bool fencing = false;
  std::string validity;  // how it computes validity (free text), may be empty
};

// The request timeout: ClientConfig::client_timeout_ms, or ttl + 5 s.
absl::Duration AdapterRequestTimeout(const ClientConfig& config);

class ExternalBackend : public LockBackend {
 public:
  // Starts the adapter (in this process's group; its stderr goes to this
  // process's stderr; it gets SIGKILL if this process dies) and says hello with the config's nodes,
  // TLS settings, node timeout and drift factor. Errors: those of
  // ResolveAdapter, the adapter's own hello error, an adapter that fails the
  // protocol, and kInvalidArgument for a config the adapter cannot honour
  // (fencing without fencing tokens, a broken variant).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ExternalBackend>> Start(
      const ClientConfig& config);
  // Closes the adapter's stdin, waits up to 2 s for its exit, then SIGKILL.
  ~ExternalBackend() override;
  ExternalBackend(const ExternalBackend&) = delete;
  ExternalBackend& operator=(const ExternalBackend&) = delete;

  // One attempt. Not granted: kAborted (held elsewhere), kUnavailable (too
  // few nodes answered), kDeadlineExceeded (granted with no validity left),
  // kInternal (anything else), each with the adapter's message.
  [[nodiscard]] absl::StatusOr<HeldLock> Acquire(const std::string& resource,
                                                 int64_t ttl_ms) override;
  // The adapter's belief (`remaining`), never negative.
  absl::Duration TimeLeft(const HeldLock& lock) override;
  // kUnavailable / kFailedPrecondition (the lock was no longer ours) /
  // kInternal when the adapter says it did not release.
  [[nodiscard]] absl::Status Release(const HeldLock& lock) override;
  // Sets the lock's ttl to ttl_ms again; on success updates lock->token and
  // lock->valid_until_raw. Not extended: kFailedPrecondition (lost),
  // kUnavailable, kDeadlineExceeded, kInternal.
  [[nodiscard]] absl::Status Extend(HeldLock* lock, int64_t ttl_ms);
  // The same for the client loop (LockBackend::Extend).
  [[nodiscard]] absl::StatusOr<HeldLock> Extend(const HeldLock& lock, int64_t ttl_ms) override {
    HeldLock out = lock;
    absl::Status s = Extend(&out, ttl_ms);
    if (!s.ok()) return s;
    return out;
  }
  absl::Status Failure() const override { return failure_; }

  const AdapterInfo& info() const { return info_; }
  pid_t adapter_pid() const { return pid_; }

 private:
  ExternalBackend(ClientConfig config, AdapterCommand command)
      : config_(std::move(config)), command_(std::move(command)) {}
  absl::Status Spawn();
  absl::Status Hello();
  // A JSON object (defined in the .cc).
  struct Message;
  // Sends `request` (its "id" is set here) and returns the reply to it. Any
  // failure of the adapter (exit, garbage, a reply to another id, timeout,
  // "ok": false) is recorded in failure_ and returned.
  absl::StatusOr<Message> Call(Message request, absl::Duration timeout);
  // Call of `op` on a held lock (its resource and token, and `ttl_ms` when
  // given), with the adapter's request timeout.
  absl::StatusOr<Message> CallOnLock(const char* op, const HeldLock& lock,
                                     std::optional<int64_t> ttl_ms = std::nullopt);
  absl::Status Fail(absl::Status why);
  // The adapter's reply `rep` to `op` on `resource`: OK when its boolean
  // `field` is true, else the error it classed; a reply without the field,
  // or with an unknown class, fails the adapter (Fail).
  absl::Status Answer(const Message& rep, const char* op, const char* field,
                      const std::string& resource);
  std::string Describe() const;

  ClientConfig config_;
  AdapterCommand command_;
  AdapterInfo info_;
  pid_t pid_ = -1;
  int to_adapter_ = -1;    // its stdin
  int from_adapter_ = -1;  // its stdout
  std::string buffer_;     // read but not yet a whole line
  int64_t next_id_ = 1;
  absl::Status failure_;
};

// ExternalBackend::Start as a LockBackend (MakeLibraryBackend calls it for
// an external ClientConfig::client).
[[nodiscard]] absl::StatusOr<std::unique_ptr<LockBackend>> MakeExternalBackend(
    const ClientConfig& config);

}  // namespace redlock::chaos

#endif  // REDLOCK_CHAOS_EXTERNAL_CLIENT_H_
