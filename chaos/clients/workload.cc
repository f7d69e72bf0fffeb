#include "chaos/clients/workload.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "chaos/base/cleanup.h"
#include "chaos/clients/external_client.h"
#include "chaos/history/history.h"
#include "common/enum_names.h"
#include "redlock/client.h"
#include "redlock/election.h"
#include "redlock/fencing.h"
#include "redlock/internal/status_macros.h"
#include "redlock/options.h"
#include "redlock/outcome.h"
#include "redlock/rw_lock.h"
#include "redlock/semaphore.h"
#include "testkit/redis.h"

namespace redlock::chaos {
namespace {

constexpr EnumName<ClientVariant> kVariants[] = {
    {ClientVariant::kLibrary, "library"},
    {ClientVariant::kNoElapsedCheck, "no-elapsed"},
    {ClientVariant::kPlainDelRelease, "plain-del"},
    {ClientVariant::kWallClock, "wall-clock"},
    {ClientVariant::kNoPartialRelease, "no-partial-release"},
    {ClientVariant::kMajorityCount, "majority-count"},
};

constexpr EnumName<Primitive> kPrimitives[] = {
    {Primitive::kMutex, "mutex"},         {Primitive::kRwLock, "rwlock"},
    {Primitive::kSemaphore, "semaphore"}, {Primitive::kElection, "election"},
    {Primitive::kFair, "fair"},
};

void SleepRaw(int64_t ns, const std::atomic<bool>* stop) {
  int64_t until = RawMonotonicNanos() + ns;
  for (int i = 0; i < 10000000; ++i) {
    if (stop != nullptr && stop->load()) return;
    int64_t left = until - RawMonotonicNanos();
    if (left <= 0) return;
    int64_t step = std::min<int64_t>(left, 10000000);  // 10 ms
    timespec ts{static_cast<time_t>(step / 1000000000), static_cast<long>(step % 1000000000)};
    nanosleep(&ts, nullptr);
  }
}

// A blocking connection to the data server (never faulted).
class DataStore {
 public:
  explicit DataStore(const std::string& address) : address_(address) {
    absl::StatusOr<Endpoint> ep = ParseEndpoint(address);
    if (ep.ok()) conn_.emplace(*std::move(ep));
  }

  // Runs a command; returns the reply converted, or an error status for
  // transport errors. Redis error replies are returned as kAborted with the
  // message (STALE ...) or kInternal.
  absl::StatusOr<std::optional<std::string>> Run(const std::vector<std::string>& args) {
    if (!conn_.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("bad data address ", address_));
    }
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (!conn_->connected() && !conn_->Connect(absl::Seconds(2), absl::Seconds(2)).ok()) {
        SleepRaw(50000000, nullptr);
        continue;
      }
      absl::StatusOr<testkit::RedisValue> r = conn_->Command(args);
      if (!r.ok()) continue;  // closed: reconnect
      switch (r->type) {
        case testkit::RedisValue::Type::kNil:
          return std::optional<std::string>();
        case testkit::RedisValue::Type::kString:
        case testkit::RedisValue::Type::kStatus:
          return std::optional<std::string>(r->str);
        case testkit::RedisValue::Type::kInteger:
          return std::optional<std::string>(std::to_string(r->integer));
        case testkit::RedisValue::Type::kError:
          return absl::StartsWith(r->str, "STALE") ? absl::AbortedError(r->str)
                                                   : absl::InternalError(r->str);
        default:
          return absl::InternalError("unexpected reply type");
      }
    }
    return absl::UnavailableError(absl::StrCat("data server ", address_, " unreachable"));
  }

 private:
  const std::string address_;
  std::optional<testkit::RedisConnection> conn_;
};

class LibraryBackend : public LockBackend {
 public:
  LibraryBackend(const ClientConfig& config, std::unique_ptr<redlock::Client> client)
      : config_(config), client_(std::move(client)) {}

  // One attempt of the configured primitive: its lease, and what the
  // history records of it.
  absl::StatusOr<HeldLock> AcquireLease(const std::string& resource, int64_t ttl_ms,
                                        std::string* inspect_as) {
    const absl::Duration ttl = absl::Milliseconds(ttl_ms);
    const absl::Duration wait = absl::Milliseconds(config_.wait_ms);
    const bool waits = config_.wait_ms > 0;
    HeldLock h;
    *inspect_as = resource;
    switch (config_.primitive) {
      case Primitive::kMutex: {
        absl::StatusOr<redlock::Lease> lease =
            waits ? client_->Acquire(resource, ttl, wait) : client_->TryAcquire(resource, ttl);
        if (!lease.ok()) return lease.status();
        h.lease = *lease;
        break;
      }
      case Primitive::kRwLock: {
        redlock::ReadWriteLock rw(client_.get(), resource);
        absl::StatusOr<redlock::Lease> lease =
            config_.shared ? (waits ? rw.AcquireShared(ttl, wait) : rw.TryAcquireShared(ttl))
                           : (waits ? rw.AcquireExclusive(ttl, wait) : rw.TryAcquireExclusive(ttl));
        if (!lease.ok()) return lease.status();
        h.lease = *lease;
        h.mode = config_.shared ? "shared" : "exclusive";
        h.read_only = config_.shared;
        if (config_.shared) inspect_as->clear();  // no plain key to look at
        break;
      }
      case Primitive::kSemaphore: {
        redlock::Semaphore sem(client_.get(), resource, config_.permits);
        absl::StatusOr<redlock::Permit> permit =
            waits ? sem.Acquire(ttl, wait) : sem.TryAcquire(ttl);
        if (!permit.ok()) return permit.status();
        h.lease = permit->lease();
        h.mode = "slot";
        h.permits = config_.permits;
        h.slot = permit->slot();
        h.read_only = true;
        *inspect_as = permit->lease().resource();
        break;
      }
      case Primitive::kFair: {
        // Through the Client's entry point, which says when the place is
        // taken (the history's "queued").
        Client::FamilyRequest r;
        r.kind = Client::FamilyRequest::Kind::kFair;
        r.resource = resource;
        r.ttl = ttl;
        if (waits) r.wait = wait;
        r.place_ttl = absl::Milliseconds(config_.place_ttl_ms);
        r.on_queued = queued_;
        absl::StatusOr<Client::FamilyGrant> g = client_->AcquireFamily(std::move(r));
        if (!g.ok()) return g.status();
        h.lease = g->lease;
        h.mode = "fair";
        break;
      }
      case Primitive::kElection: {
        redlock::Election election(client_.get(), resource);
        redlock::CampaignOptions campaign;
        campaign.ttl = ttl;
        // The loop extends (or lets lapse) as for a lock: the leadership is
        // only watched, so that the history's validity is the lease's.
        campaign.renew.extend = false;
        absl::StatusOr<std::unique_ptr<redlock::Leadership>> leader =
            waits ? election.Campaign(config_.name, wait, redlock::StopToken(), campaign)
                  : election.TryCampaign(config_.name, campaign);
        if (!leader.ok()) return leader.status();
        h.lease = (*leader)->lease();
        h.mode = "leader";
        // The term is the leader's fencing token, fenced or not.
        h.fencing_token = (*leader)->term();
        leaders_[h.lease.token()] = *std::move(leader);
        break;
      }
    }
    return h;
  }

  absl::StatusOr<HeldLock> Acquire(const std::string& resource, int64_t ttl_ms) override {
    std::string inspect_as;
    absl::StatusOr<HeldLock> held = AcquireLease(resource, ttl_ms, &inspect_as);
    if (!held.ok()) return held.status();
    HeldLock& h = *held;
    const redlock::Lease& lease = h.lease;
    h.resource = resource;
    h.token = lease.token();
    h.start_raw = RawFromSteady(lease.acquired_at());
    h.valid_until_raw = RawFromSteady(lease.valid_until());
    h.drift_ms =
        static_cast<int64_t>(std::ceil(absl::ToDoubleMilliseconds(DriftOf(config_, ttl_ms))));
    if (config_.fencing) h.fencing_token = lease.fencing_token();
    if (config_.inspect_nodes && !inspect_as.empty()) {
      absl::StatusOr<std::vector<NodeView>> views = client_->Inspect(inspect_as);
      if (views.ok()) {
        for (size_t i = 0; i < views->size(); ++i) {
          if ((*views)[i].status.ok() && (*views)[i].held && (*views)[i].token == h.token) {
            h.nodes.push_back(static_cast<int>(i));
          }
        }
      }
    }
    return h;
  }

  absl::Duration TimeLeft(const HeldLock& lock) override { return lock.lease.TimeLeft(); }

  void SetQueuedHook(std::function<void()> hook) override { queued_ = std::move(hook); }

  absl::StatusOr<HeldLock> Extend(const HeldLock& lock, int64_t ttl_ms) override {
    absl::StatusOr<redlock::Lease> lease = client_->Extend(lock.lease, absl::Milliseconds(ttl_ms));
    if (!lease.ok()) return lease.status();
    HeldLock h = lock;
    h.valid_until_raw = RawFromSteady(lease->valid_until());
    h.lease = *lease;
    return h;
  }

  absl::Status Release(const HeldLock& lock) override {
    auto it = leaders_.find(lock.token);
    if (it == leaders_.end()) return client_->Release(lock.lease);
    // The extended lease reaches the nodes its extensions did; the
    // leadership's resignation releases the same token everywhere.
    absl::Status st = client_->Release(lock.lease);
    (void)it->second->Resign();
    leaders_.erase(it);
    return st;
  }

 private:
  ClientConfig config_;
  std::unique_ptr<redlock::Client> client_;
  // Leaderships held, by token (released with the lease).
  std::map<std::string, std::unique_ptr<redlock::Leadership>> leaders_;
  std::function<void()> queued_;  // the next fair call's (SetQueuedHook)
};

class MarkerWriter {
 public:
  explicit MarkerWriter(int fd) : fd_(fd) {
    if (fd_ >= 0) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  void Write(absl::string_view kind, int64_t op, absl::string_view resource,
             absl::string_view detail = "") {
    if (fd_ < 0) return;
    std::string line =
        absl::StrCat(kind, " ", op, " ", resource, detail.empty() ? "" : " ", detail, "\n");
    // Best effort: one write of a short line is atomic on a pipe; a full pipe
    // (the harness not reading) drops the marker rather than blocking.
    ssize_t w = write(fd_, line.data(), line.size());
    (void)w;
  }

 private:
  int fd_;
};

}  // namespace

absl::string_view VariantName(ClientVariant v) { return NameOf(kVariants, v); }

absl::StatusOr<ClientVariant> ParseVariant(absl::string_view name) {
  return ParseName(kVariants, name, "variant");
}

std::vector<ClientVariant> AllVariants() { return Values(kVariants); }

absl::string_view PrimitiveName(Primitive p) { return NameOf(kPrimitives, p); }

absl::StatusOr<Primitive> ParsePrimitive(absl::string_view name) {
  return ParseName(kPrimitives, name, "primitive");
}

absl::Duration DriftOf(const ClientConfig& config, int64_t ttl_ms) {
  redlock::Options drift;
  drift.clock_drift_factor = config.drift_factor;
  drift.clock_drift_floor = absl::Milliseconds(config.drift_floor_ms);
  return redlock::DriftAllowance(absl::Milliseconds(ttl_ms), drift);
}

std::string DataKey(absl::string_view resource) { return absl::StrCat("data:", resource); }
std::string FenceKey(absl::string_view resource) { return absl::StrCat("fence:", resource); }

namespace {

// One flag of the client process's command line: how ClientArgs writes the
// field and how ParseClientArgs reads it back. A parser answers an empty
// InvalidArgument for a plain bad value (the caller names the flag and the
// value), or an error of its own.
struct ClientFlag {
  const char* name;
  std::string (*format)(const ClientConfig&);
  absl::Status (*parse)(const std::string& value, ClientConfig& c);
  bool omit_empty = false;  // not written when the value is empty
};

template <auto M>
std::string FormatField(const ClientConfig& c) {
  const auto& v = c.*M;
  using T = std::decay_t<decltype(v)>;
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return absl::StrJoin(v, ",");
  } else if constexpr (std::is_same_v<T, ClientVariant>) {
    return std::string(VariantName(v));
  } else if constexpr (std::is_same_v<T, Primitive>) {
    return std::string(PrimitiveName(v));
  } else {
    return absl::StrCat(v);
  }
}

template <auto M, int64_t kMin = std::numeric_limits<int64_t>::min(),
          int64_t kMax = std::numeric_limits<int64_t>::max()>
absl::Status ParseField(const std::string& v, ClientConfig& c) {
  auto& out = c.*M;
  using T = std::decay_t<decltype(out)>;
  const absl::Status bad = absl::InvalidArgumentError("");
  if constexpr (std::is_same_v<T, bool>) {
    if (v != "true" && v != "1" && v != "false" && v != "0") return bad;
    out = v == "true" || v == "1";
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    out = absl::StrSplit(v, ',', absl::SkipEmpty());
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = v;
  } else if constexpr (std::is_same_v<T, ClientVariant>) {
    REDLOCK_ASSIGN_OR_RETURN(out, ParseVariant(v));
  } else if constexpr (std::is_same_v<T, Primitive>) {
    REDLOCK_ASSIGN_OR_RETURN(out, ParsePrimitive(v));
  } else if constexpr (std::is_same_v<T, double>) {
    if (!absl::SimpleAtod(v, &out)) return bad;
  } else {
    T x{};
    if (!absl::SimpleAtoi(v, &x)) return bad;
    // The bounds, where a flag has them (a seed takes every uint64_t).
    if constexpr (kMin != std::numeric_limits<int64_t>::min()) {
      if (std::cmp_less(x, kMin)) return bad;
    }
    if constexpr (kMax != std::numeric_limits<int64_t>::max()) {
      if (std::cmp_greater(x, kMax)) return bad;
    }
    out = x;
  }
  return absl::OkStatus();
}

template <auto M, int64_t kMin = std::numeric_limits<int64_t>::min(),
          int64_t kMax = std::numeric_limits<int64_t>::max()>
constexpr ClientFlag Flag(const char* name, bool omit_empty = false) {
  return {name, &FormatField<M>, &ParseField<M, kMin, kMax>, omit_empty};
}

using C = ClientConfig;
const ClientFlag kClientFlags[] = {
    Flag<&C::name>("name"),
    Flag<&C::variant>("variant"),
    {"client", &FormatField<&C::client>,
     [](const std::string& v, ClientConfig& c) {
       c.client = v.empty() ? std::string(kLibraryClient) : v;
       return absl::OkStatus();
     }},
    Flag<&C::client_timeout_ms, 0>("client-timeout-ms"),
    Flag<&C::nodes>("nodes"),
    Flag<&C::data>("data"),
    Flag<&C::history>("history"),
    Flag<&C::marker_fd>("marker-fd"),
    Flag<&C::resources>("resources"),
    Flag<&C::ttl_ms>("ttl-ms"),
    Flag<&C::use_ms>("use-ms"),
    Flag<&C::uses_per_lease>("uses-per-lease"),
    Flag<&C::guard_ms>("guard-ms"),
    Flag<&C::think_ms>("think-ms"),
    Flag<&C::pre_release_ms>("pre-release-ms"),
    Flag<&C::retry_ms>("retry-ms"),
    Flag<&C::node_timeout_ms>("node-timeout-ms"),
    Flag<&C::drift_factor>("drift-factor"),
    Flag<&C::drift_floor_ms, 0>("drift-floor-ms"),
    Flag<&C::fencing>("fencing"),
    Flag<&C::fencing_shared_counter>("fencing-shared-counter"),
    Flag<&C::durability_replicas>("durability-replicas"),
    Flag<&C::durability_timeout_ms>("durability-timeout-ms"),
    Flag<&C::release>("release"),
    Flag<&C::inspect_nodes>("inspect-nodes"),
    Flag<&C::extend>("extend"),
    Flag<&C::primitive>("primitive"),
    Flag<&C::shared>("shared"),
    Flag<&C::permits, 1, 1024>("permits"),
    Flag<&C::wait_ms, 0>("wait-ms"),
    Flag<&C::place_ttl_ms, 0>("place-ttl-ms"),
    Flag<&C::tls_ca>("tls-ca", /*omit_empty=*/true),
    Flag<&C::tls_server_name>("tls-server-name", /*omit_empty=*/true),
    Flag<&C::seed>("seed"),
    Flag<&C::duration_ms>("duration-ms"),
    Flag<&C::max_ops>("max-ops"),
};

}  // namespace

std::vector<std::string> ClientArgs(const ClientConfig& c) {
  std::vector<std::string> args;
  for (const ClientFlag& f : kClientFlags) {
    std::string value = f.format(c);
    if (f.omit_empty && value.empty()) continue;
    args.push_back(absl::StrCat("--", f.name, "=", value));
  }
  return args;
}

absl::StatusOr<ClientConfig> ParseClientArgs(const std::vector<std::string>& args) {
  ClientConfig c;
  for (const std::string& arg : args) {
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
    }
    std::vector<std::string> kv = absl::StrSplit(arg.substr(2), absl::MaxSplits('=', 1));
    const std::string& k = kv[0];
    std::string v = kv.size() > 1 ? kv[1] : "true";
    const ClientFlag* flag = nullptr;
    for (const ClientFlag& f : kClientFlags) {
      if (k == f.name) flag = &f;
    }
    if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", k));
    absl::Status s = flag->parse(v, c);
    if (!s.ok() && s.message().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bad value for --", k, ": \"", v, "\""));
    }
    if (!s.ok()) return s;
  }
  if (c.nodes.empty()) return absl::InvalidArgumentError("--nodes is required");
  if (c.data.empty()) return absl::InvalidArgumentError("--data is required");
  if (c.history.empty()) return absl::InvalidArgumentError("--history is required");
  if (c.resources.empty()) return absl::InvalidArgumentError("--resources is empty");
  if (c.ttl_ms <= 0 || c.use_ms < 0 || c.uses_per_lease < 0 || c.node_timeout_ms <= 0) {
    return absl::InvalidArgumentError("ttl, use, uses-per-lease and node timeout must be positive");
  }
  if (c.shared && c.primitive != Primitive::kRwLock) {
    return absl::InvalidArgumentError("--shared is for --primitive=rwlock");
  }
  if (c.variant == ClientVariant::kMajorityCount && c.primitive != Primitive::kSemaphore) {
    return absl::InvalidArgumentError(
        "--variant=majority-count is a semaphore: --primitive=semaphore");
  }
  if (!IsLibraryClient(c.client) && c.primitive != Primitive::kMutex) {
    return absl::InvalidArgumentError(
        absl::StrCat("--client=", c.client, ": external clients are mutexes only"));
  }
  if (!IsLibraryClient(c.client) && c.variant != ClientVariant::kLibrary) {
    return absl::InvalidArgumentError(
        absl::StrCat("--client=", c.client, " with --variant=", VariantName(c.variant),
                     ": the broken variants are of this library only"));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<LockBackend>> MakeLibraryBackend(const ClientConfig& config) {
  if (!IsLibraryClient(config.client)) return MakeExternalBackend(config);
  if (config.variant != ClientVariant::kLibrary) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variant ", VariantName(config.variant),
        " is a deliberately broken client: it is in the test-only redlock-chaos-broken-client"));
  }
  redlock::Options options;
  for (const std::string& n : config.nodes) {
    absl::StatusOr<redlock::Endpoint> ep = redlock::ParseEndpoint(n);
    if (!ep.ok()) return ep.status();
    options.nodes.push_back(*ep);
  }
  options.tls.ca_file = config.tls_ca;
  options.tls.server_name = config.tls_server_name;
  options.node_timeout = absl::Milliseconds(config.node_timeout_ms);
  options.clock_drift_factor = config.drift_factor;
  options.clock_drift_floor = absl::Milliseconds(config.drift_floor_ms);
  options.fencing = config.fencing;
  if (config.fencing_shared_counter) {
    options.fencing_counters = Options::FencingCounters::kShared;
  }
  options.durability.replicas = config.durability_replicas;
  options.durability.timeout = absl::Milliseconds(config.durability_timeout_ms);
  options.max_attempts = 1;
  // A fair waiter is woken on its own channel: that is the path to test.
  options.release_notifications = config.primitive == Primitive::kFair;
  absl::StatusOr<std::unique_ptr<redlock::Client>> client = redlock::Client::Create(options);
  if (!client.ok()) return client.status();
  return std::unique_ptr<LockBackend>(new LibraryBackend(config, *std::move(client)));
}

int RunClientLoop(const ClientConfig& config, LockBackend& backend, const std::atomic<bool>* stop) {
  absl::StatusOr<std::unique_ptr<HistoryWriter>> opened = HistoryWriter::Open(config.history);
  if (!opened.ok()) {
    fprintf(stderr, "%s: %s\n", config.name.c_str(), opened.status().ToString().c_str());
    return 2;
  }
  HistoryWriter& h = **opened;
  auto check = [&](const absl::Status& s) {
    if (!s.ok()) fprintf(stderr, "%s: history: %s\n", config.name.c_str(), s.ToString().c_str());
  };
  MarkerWriter markers(config.marker_fd);
  DataStore data(config.data);
  std::mt19937_64 rng(config.seed);
  const int64_t deadline = RawMonotonicNanos() + config.duration_ms * 1000000;
  const int64_t ms = 1000000;
  std::optional<HeldLock> unreleased;
  int64_t op = 0;
  int64_t grants = 0, fails = 0, uses = 0;

  // A backend that cannot go on (an external client's adapter died,
  // answered garbage or timed out) ends the loop; what it was doing then has
  // no known outcome and is not recorded.
  auto failed = [&backend] { return !backend.Failure().ok(); };
  auto release = [&](const HeldLock& held, int64_t lease_op) {
    int64_t t = RawMonotonicNanos();
    absl::Status st = backend.Release(held);
    if (failed()) return;
    check(h.WriteRelease({.t = t,
                          .process = config.name,
                          .op = lease_op,
                          .resource = held.resource,
                          .token = held.token,
                          .end = RawMonotonicNanos(),
                          .ok = st.ok()}));
    markers.Write("release", lease_op, held.resource);
  };
  int64_t unreleased_op = 0;

  for (; op < config.max_ops && !stop->load() && RawMonotonicNanos() < deadline && !failed();) {
    const std::string& resource =
        config.resources[static_cast<size_t>(rng() % config.resources.size())];
    ++op;
    const bool fair = config.primitive == Primitive::kFair;
    check(h.WriteInvoke({.process = config.name,
                         .op = op,
                         .resource = resource,
                         .ttl_ms = config.ttl_ms,
                         .mode = fair ? "fair" : "",
                         .wait_ms = fair ? config.wait_ms : 0}));
    markers.Write("invoke", op, resource);
    if (fair) {
      // On the library's thread, once the place is on a quorum: the end of
      // the enqueue (HistoryWriter is thread-safe).
      backend.SetQueuedHook([&h, &check, &config, &markers, op, resource] {
        check(h.WriteQueued({.process = config.name, .op = op, .resource = resource}));
        markers.Write("queued", op, resource);
      });
    }
    absl::StatusOr<HeldLock> held = backend.Acquire(resource, config.ttl_ms);
    if (fair) backend.SetQueuedHook(nullptr);
    if (failed()) break;
    if (!held.ok()) {
      ++fails;
      std::optional<Outcome> outcome = GetOutcome(held.status());
      check(h.WriteFail({.process = config.name,
                         .op = op,
                         .resource = resource,
                         .code = absl::StatusCodeToString(held.status().code()),
                         .error = std::string(held.status().message()),
                         .outcome = outcome.has_value() ? OutcomeKindName(outcome->kind) : ""}));
      markers.Write("fail", op, resource, absl::StatusCodeToString(held.status().code()));
      int64_t pause = config.retry_ms / 2 +
                      static_cast<int64_t>(rng() % static_cast<uint64_t>(config.retry_ms + 1));
      SleepRaw(pause * ms, stop);
      continue;
    }
    ++grants;
    check(h.WriteGrant({.process = config.name,
                        .op = op,
                        .resource = resource,
                        .token = held->token,
                        .start = held->start_raw,
                        .valid_until = held->valid_until_raw,
                        .ttl_ms = config.ttl_ms,
                        .drift_ms = held->drift_ms,
                        .nodes = held->nodes,
                        .fencing_token = held->fencing_token,
                        .mode = held->mode,
                        .permits = held->permits,
                        .slot = held->slot}));
    markers.Write("grant", op, resource);
    for (int u = 0; u < config.uses_per_lease && !stop->load(); ++u) {
      absl::Duration left = backend.TimeLeft(*held);
      if (config.extend && left < absl::Milliseconds(config.ttl_ms) / 2) {
        // Renew before using: an extension the client believes in moves its
        // validity; a failed one leaves the old one standing.
        const int64_t t = RawMonotonicNanos();
        absl::StatusOr<HeldLock> renewed = backend.Extend(*held, config.ttl_ms);
        check(h.WriteExtend(
            {.t = t,
             .process = config.name,
             .op = op,
             .resource = resource,
             .token = held->token,
             .valid_until = renewed.ok() ? renewed->valid_until_raw : held->valid_until_raw,
             .ok = renewed.ok()}));
        markers.Write("extend", op, resource, renewed.ok() ? "ok" : "failed");
        if (renewed.ok()) *held = *std::move(renewed);
        left = backend.TimeLeft(*held);
      }
      if (failed() || left < absl::Milliseconds(config.use_ms + config.guard_ms)) break;
      int64_t begin = RawMonotonicNanos();
      std::string token_str = held->fencing_token ? std::to_string(*held->fencing_token) : "";
      // A permit's token is its own permit's: not comparable with the
      // others' on one fence, so a permit holder reads unfenced.
      const bool fenced = config.fencing && held->fencing_token.has_value() && held->mode != "slot";
      // One use in the history; a reader's (write false) only reads.
      auto record_use = [&](int64_t read, int64_t wrote, bool accepted, int64_t write_at) {
        ++uses;
        check(h.WriteUse({.process = config.name,
                          .op = op,
                          .resource = resource,
                          .token = held->token,
                          .begin = begin,
                          .end = RawMonotonicNanos(),
                          .read = read,
                          .wrote = wrote,
                          .accepted = accepted,
                          .fencing_token = fenced ? held->fencing_token : std::nullopt,
                          .write = !held->read_only,
                          .write_at = write_at}));
      };
      absl::StatusOr<std::optional<std::string>> got =
          fenced ? data.Run({"EVAL", std::string(redlock::FencedReadScript()), "2",
                             DataKey(resource), FenceKey(resource), token_str})
                 : data.Run({"GET", DataKey(resource)});
      if (!got.ok() && absl::IsAborted(got.status())) {
        // The fence refused even the read: a newer holder exists.
        record_use(-1, -1, false, 0);
        break;
      }
      if (!got.ok()) {
        fprintf(stderr, "%s: data read: %s\n", config.name.c_str(),
                got.status().ToString().c_str());
        break;
      }
      int64_t value = 0;
      if (got->has_value() && !absl::SimpleAtoi(**got, &value)) value = 0;
      markers.Write("use_read", op, resource);
      SleepRaw(config.use_ms * ms, nullptr);
      // Readers and permit holders only read: K holders at once are allowed,
      // and their writes would lose updates by design.
      const bool write = !held->read_only;
      int64_t write_at = 0;
      bool accepted = true;
      if (write) {
        std::string next = std::to_string(value + 1);
        write_at = RawMonotonicNanos();
        absl::StatusOr<std::optional<std::string>> put =
            fenced ? data.Run({"EVAL", std::string(redlock::FencedWriteScript()), "2",
                               DataKey(resource), FenceKey(resource), token_str, next})
                   : data.Run({"SET", DataKey(resource), next});
        accepted = put.ok();
        if (!put.ok() && !absl::IsAborted(put.status())) {
          fprintf(stderr, "%s: data write: %s\n", config.name.c_str(),
                  put.status().ToString().c_str());
        }
      }
      record_use(value, write ? value + 1 : value, accepted, write_at);
      markers.Write("use_end", op, resource);
    }
    if (config.release) {
      SleepRaw(config.pre_release_ms * ms, nullptr);
      release(*held, op);
      SleepRaw(config.think_ms * ms, stop);
    } else {
      unreleased = *held;
      unreleased_op = op;
      // Let the lease lapse (bounded by the ttl and the stop flag).
      absl::Duration left = backend.TimeLeft(*held);
      SleepRaw(std::min<int64_t>(absl::ToInt64Nanoseconds(left), config.ttl_ms * ms), stop);
      if (backend.TimeLeft(*held) <= absl::ZeroDuration()) unreleased.reset();
      SleepRaw(config.think_ms * ms, stop);
    }
  }
  if (!failed() && unreleased.has_value() && backend.TimeLeft(*unreleased) > absl::ZeroDuration()) {
    release(*unreleased, unreleased_op);
  }
  markers.Write("exit", op, "-");
  if (failed()) {
    fprintf(stderr, "%s: stopped: %s\n", config.name.c_str(), backend.Failure().ToString().c_str());
    return 3;
  }
  fprintf(stderr, "%s: %lld ops, %lld grants, %lld fails, %lld uses\n", config.name.c_str(),
          static_cast<long long>(op), static_cast<long long>(grants), static_cast<long long>(fails),
          static_cast<long long>(uses));
  return 0;
}

namespace {

// Set by the handler, read by the loop. A process-directed signal may be
// delivered to any thread (the library's I/O thread too), so this must be an
// atomic, not a volatile bool; lock-free, it is async-signal-safe.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnTerm(int) { g_stop.store(true); }

}  // namespace

int ClientMain(int argc, char** argv, BackendFactory make_backend) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      fprintf(stderr,
              "usage: %s --name=c1 --nodes=h:p,... --data=h:p --history=FILE [options]\n"
              "see chaos/clients/workload.h and chaos/README.md\n",
              argv[0]);
      return 0;
    }
  }
  absl::StatusOr<ClientConfig> config = ParseClientArgs(args);
  if (!config.ok()) {
    fprintf(stderr, "%s: %s\n", argv[0], config.status().ToString().c_str());
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (!IsLibraryClient(config->client)) {
    // The adapter (chaos/clients/external_client.h) stays in this process's group,
    // and the harness stops and continues the whole group
    // (ClientProcess::Pause): a pause of "the client" must stop the lock
    // client itself, as it would stop a library inside the process.
    setpgid(0, 0);
  }
  absl::StatusOr<std::unique_ptr<LockBackend>> backend = make_backend(*config);
  if (!backend.ok()) {
    fprintf(stderr, "%s: %s\n", config->name.c_str(), backend.status().ToString().c_str());
    return 2;
  }
  return RunClientLoop(*config, **backend, &g_stop);
}

}  // namespace redlock::chaos
