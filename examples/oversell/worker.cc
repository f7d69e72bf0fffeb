// The part of the example to copy: a read-modify-write of shared state kept
// in Redis, guarded by a redlock lease, with the lease's fencing token checked
// by the data server itself. The data server is reached with the project's
// test-kit connection (testkit/redis.h); in a service, any Redis client does.

#include "examples/oversell/worker.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "redlock/client.h"
#include "redlock/fencing.h"
#include "redlock/options.h"
#include "redlock/scoped_lease.h"
#include "testkit/redis.h"

namespace oversell {
namespace {

using redlock::testkit::RedisConnection;
using redlock::testkit::RedisValue;

// The stock as read, or nullopt when the fenced read was refused (a newer
// lock holder has touched the stock: this worker's lease is stale).
absl::StatusOr<std::optional<int64_t>> ReadStock(RedisConnection& data, LockMode mode,
                                                 uint64_t fencing_token) {
  absl::StatusOr<RedisValue> r =
      mode == LockMode::kFenced
          ? data.Command({"EVAL", std::string(redlock::FencedReadScript()), "2", kStockKey,
                          kFenceKey, std::to_string(fencing_token)})
          : data.Command({"GET", kStockKey});
  if (!r.ok()) return r.status();
  if (r->is_error()) {
    if (absl::StartsWith(r->str, "STALE")) return std::nullopt;
    return absl::InternalError(absl::StrCat("read: ", r->str));
  }
  int64_t stock = 0;
  if (r->type != RedisValue::Type::kString || !absl::SimpleAtoi(r->str, &stock)) {
    return absl::InternalError("read: the stock is not a number");
  }
  return stock;
}

// False when the fenced write was refused.
absl::StatusOr<bool> WriteStock(RedisConnection& data, LockMode mode, uint64_t fencing_token,
                                int64_t stock) {
  absl::StatusOr<RedisValue> r =
      mode == LockMode::kFenced
          ? data.Command({"EVAL", std::string(redlock::FencedWriteScript()), "2", kStockKey,
                          kFenceKey, std::to_string(fencing_token), std::to_string(stock)})
          : data.Command({"SET", kStockKey, std::to_string(stock)});
  if (!r.ok()) return r.status();
  if (r->is_error()) {
    if (absl::StartsWith(r->str, "STALE")) return false;
    return absl::InternalError(absl::StrCat("write: ", r->str));
  }
  return true;
}

int Fail(int id, const absl::Status& status) {
  std::fprintf(stderr, "oversell: worker %d: %s\n", id, std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int RunWorker(const WorkerConfig& config) {
  absl::StatusOr<redlock::Endpoint> data_node = redlock::ParseEndpoint(config.data);
  if (!data_node.ok()) return Fail(config.id, data_node.status());
  RedisConnection data(*data_node);
  if (absl::Status st = data.Connect(absl::Seconds(5), absl::Seconds(5)); !st.ok()) {
    return Fail(config.id, st);
  }

  std::unique_ptr<redlock::Client> client;
  if (config.mode != LockMode::kNone) {
    redlock::Options options;
    absl::StatusOr<std::vector<redlock::Endpoint>> nodes = redlock::ParseEndpointList(config.nodes);
    if (!nodes.ok()) return Fail(config.id, nodes.status());
    options.nodes = *std::move(nodes);
    options.fencing = config.mode == LockMode::kFenced;
    // Contenders poll quickly: a lock can vanish without a release
    // announcement (that is the point of the clock-jump modes).
    options.retry_delay = absl::Milliseconds(10);
    options.retry_jitter = absl::Milliseconds(5);
    options.wait_poll_max = absl::Milliseconds(20);
    absl::StatusOr<std::unique_ptr<redlock::Client>> c = redlock::Client::Create(options);
    if (!c.ok()) return Fail(config.id, c.status());
    client = *std::move(c);
  }

  // Start together: the parent pushes one token per worker once all are
  // ready.
  if (absl::StatusOr<RedisValue> r = data.Command({"INCR", kReadyKey}); !r.ok()) {
    return Fail(config.id, r.status());
  }
  bool started = false;
  for (int i = 0; i < 10 && !started;
       ++i) {  // up to 20 s, in waits shorter than the socket timeout
    absl::StatusOr<RedisValue> go = data.Command({"BLPOP", kGoKey, "2"});
    if (!go.ok()) return Fail(config.id, go.status());
    started = go->type == RedisValue::Type::kArray;
  }
  if (!started) return Fail(config.id, absl::DeadlineExceededError("no start signal within 20s"));

  const absl::Time deadline = absl::Now() + config.deadline;
  int sold = 0;
  for (int round = 0; round < 100000; ++round) {
    if (absl::Now() > deadline) {
      return Fail(config.id, absl::DeadlineExceededError("still selling at the deadline"));
    }
    // Released when it goes out of scope, whichever way the round ends
    // (owns nothing in the no-lock mode).
    redlock::ScopedLease held;
    if (client != nullptr) {
      absl::StatusOr<redlock::ScopedLease> l =
          redlock::ScopedLease::Acquire(*client, kResource, config.ttl, absl::Seconds(5));
      if (absl::IsInvalidArgument(l.status()) || absl::IsInternal(l.status())) {
        return Fail(config.id, l.status());
      }
      if (!l.ok()) continue;  // contended for 5 s: try again (bounded by the deadline)
      held = *std::move(l);
    }
    const redlock::Lease& lease = held.lease();

    absl::StatusOr<std::optional<int64_t>> stock =
        ReadStock(data, config.mode, lease.fencing_token());
    if (!stock.ok()) return Fail(config.id, stock.status());
    if (!stock->has_value()) {  // a newer holder exists: our lease is stale
      (void)data.Command({"INCR", kStaleKey});
      continue;
    }
    if (**stock <= 0) break;
    // The business logic between the read and the write: a payment call, a
    // slow query... long enough for a competitor to interleave.
    absl::SleepFor(config.pause);

    absl::StatusOr<bool> written =
        WriteStock(data, config.mode, lease.fencing_token(), **stock - 1);
    if (!written.ok()) return Fail(config.id, written.status());
    if (!*written) {
      (void)data.Command({"INCR", kStaleKey});
      continue;
    }
    absl::StatusOr<RedisValue> order =
        data.Command({"RPUSH", kOrdersKey, absl::StrCat("worker", config.id, "-", ++sold)});
    if (!order.ok()) return Fail(config.id, order.status());
  }
  return 0;
}

}  // namespace oversell
