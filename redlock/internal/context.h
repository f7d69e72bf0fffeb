// What the client's operations share: options, quorum, the transport and the
// calls on top of it, the clock, the release watches and the renewals. The operations (acquire_op,
// keys_op, renewal, release_watch) depend on this small object, never on
// ClientImpl or on each other's classes.

#ifndef REDLOCK_INTERNAL_CONTEXT_H_
#define REDLOCK_INTERNAL_CONTEXT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "redlock/internal/clock.h"
#include "redlock/internal/transport.h"
#include "redlock/observer.h"
#include "redlock/options.h"

namespace redlock::internal {

class NodeCalls;       // node_calls.h
class ReleaseWatches;  // release_watch.h
class Renewals;        // renewal.h
class ScriptingModes;  // scriptless.h
class ServerCommands;  // server_commands.h

class OpContext {
 public:
  // `clock` must outlive the context.
  // `modes`: which nodes forbid scripting (null: none known).
  // `commands`: which script-free compare-and-set commands each node has,
  // as the handshakes find (server_commands.h; null: none).
  OpContext(Options options, std::unique_ptr<Transport> transport, const Clock* clock,
            std::shared_ptr<ScriptingModes> modes = nullptr,
            std::shared_ptr<ServerCommands> commands = nullptr);
  ~OpContext();
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;

  const Options& options() const { return options_; }
  // The client's quorum (Options::quorum resolved).
  int quorum() const { return quorum_; }
  // `quorum` of a call (0: the client's).
  int QuorumOr(int quorum) const { return quorum == 0 ? quorum_ : quorum; }
  int nodes() const { return transport_->size(); }
  Transport& transport() const { return *transport_; }
  // Commands to the nodes as the operations send them: scripts, durable
  // writes, releases that must not be lost (node_calls.h).
  NodeCalls& calls() const { return *calls_; }
  const Clock& clock() const { return *clock_; }
  ReleaseWatches& watches() const { return *watches_; }
  // Options::observer, or null.
  Observer* observer() const { return options_.observer.get(); }
  Renewals& renewals() const { return *renewals_; }

  // The Redis key of `resource`: key_prefix + resource.
  std::string Key(absl::string_view resource) const;
  // The fencing counter of lock key `key`: key + ":fence", or with
  // Options::FencingCounters::kShared the namespace's key_prefix + ":fence".
  std::string FenceKey(absl::string_view key) const;
  // With kShared, the namespace's counter key; else "".
  std::string SharedFenceKey() const;
  // `keys` then their counters, as the fencing scripts take them.
  std::vector<std::string> WithFenceKeys(const std::vector<std::string>& keys) const;
  // Why one call that touches `keys` (all of them: lock keys, counters,
  // the reader-writer lock's sets) cannot go to every node, or to node
  // `node` ("" when it can): each node's scheme says (a Redis Cluster's
  // keys of one call must share a hash slot; scheme.h).
  std::string KeysProblem(const std::vector<std::string>& keys) const;
  std::string KeysProblemOn(int node, const std::vector<std::string>& keys) const;
  // The pause before a retry: retry_delay +/- retry_jitter, at least zero.
  absl::Duration RetryDelay() const;

  // Stops the renewals and completes everything pending with kCancelled.
  void Shutdown();

 private:
  const Options options_;
  const int quorum_;
  std::unique_ptr<Transport> transport_;
  const Clock* const clock_;
  std::unique_ptr<NodeCalls> calls_;
  std::unique_ptr<ReleaseWatches> watches_;
  std::unique_ptr<Renewals> renewals_;
};

}  // namespace redlock::internal

#endif  // REDLOCK_INTERNAL_CONTEXT_H_
