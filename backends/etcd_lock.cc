// etcd's v3 lock through the HTTP/JSON gateway (grpc-gateway of etcd 3.4):
// the `concurrency` Mutex recipe, client side for one attempt and the
// server's lock service (which runs the same recipe) for a blocking wait.

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/http.h"
#include "backends/lock_service.h"
#include "redlock/options.h"

namespace redlock::backends {
namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

std::string B64(absl::string_view s) { return absl::Base64Escape(s); }

// int64 fields come as strings in the gateway's JSON; absent means 0.
int64_t Int(const Json& j, const char* field) {
  if (!j.is_object() || !j.contains(field)) return 0;
  const Json& v = j[field];
  int64_t out = 0;
  if (v.is_string()) {
    (void)absl::SimpleAtoi(v.get<std::string>(), &out);
  } else if (v.is_number_integer()) {
    out = v.get<int64_t>();
  }
  return out;
}

// The status of an error reply: {"error": ..., "code": grpc code, "message": ...}.
absl::Status ErrorOf(const HttpReply& r, absl::string_view what) {
  Json j = Json::parse(r.body, nullptr, false);
  std::string message = r.body.substr(0, 200);
  int code = 0;
  if (j.is_object()) {
    if (j.contains("message") && j["message"].is_string()) message = j["message"];
    if (j.contains("code") && j["code"].is_number_integer()) code = j["code"];
  }
  std::string text = absl::StrCat(what, ": HTTP ", r.status, ": ", message);
  if (code == 5) return absl::NotFoundError(text);                   // e.g. lease not found
  if (code == 14 || code == 4) return absl::UnavailableError(text);  // no leader, timed out
  if (r.status >= 500) return absl::UnavailableError(text);
  return absl::InternalError(text);
}

class EtcdSession final : public LockSession {
 public:
  EtcdSession(const ServiceOptions& options) : options_(options), http_(options.endpoints) {
    ttl_s_ = std::max<int64_t>(
        2, static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(options.session_timeout))));
  }
  ~EtcdSession() override {
    if (lease_ != 0) {
      (void)Call("/v3/lease/revoke", Json{{"ID", std::to_string(lease_)}}, "revoke");
    }
  }

  absl::StatusOr<Grant> TryAcquire(const std::string& resource, absl::Duration ttl) override {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const auto start = SteadyClock::now();
      if (absl::Status s = EnsureLease(); !s.ok()) return s;
      const std::string name = options_.key_prefix + resource;
      const std::string key = KeyOf(name);
      const std::string pfx = name + "/";
      std::string end = pfx;
      end.back() = static_cast<char>(end.back() + 1);
      Json owner = {{"request_range",
                     {{"key", B64(pfx)},
                      {"range_end", B64(end)},
                      {"sort_order", "ASCEND"},
                      {"sort_target", "CREATE"},
                      {"limit", "1"}}}};
      Json txn = {
          {"compare", Json::array({{{"key", B64(key)},
                                    {"target", "CREATE"},
                                    {"result", "EQUAL"},
                                    {"create_revision", "0"}}})},
          {"success",
           Json::array({{{"request_put",
                          {{"key", B64(key)}, {"value", ""}, {"lease", std::to_string(lease_)}}}},
                        owner})},
          {"failure", Json::array({{{"request_range", {{"key", B64(key)}}}}, owner})}};
      absl::StatusOr<Json> r = Call("/v3/kv/txn", txn, "txn");
      if (absl::IsNotFound(r.status()) && attempt == 0) {
        lease_ = 0;  // the lease expired under us: take a new one, once
        continue;
      }
      if (!r.ok()) return r.status();
      const bool succeeded = r->value("succeeded", false);
      const Json& responses = (*r)["responses"];
      if (!responses.is_array() || responses.size() != 2) {
        return absl::InternalError(absl::StrCat("txn: unexpected reply ", r->dump()));
      }
      int64_t mine = 0;
      if (succeeded) {
        mine = Int(responses[0]["response_put"]["header"], "revision");
      } else {
        const Json& kvs = responses[0]["response_range"]["kvs"];
        if (kvs.is_array() && !kvs.empty()) mine = Int(kvs[0], "create_revision");
      }
      const Json& okvs = responses[1]["response_range"]["kvs"];
      const int64_t first = okvs.is_array() && !okvs.empty() ? Int(okvs[0], "create_revision") : 0;
      if (mine != 0 && first == mine) return MakeGrant(resource, key, mine, start, ttl);
      // Someone else holds it: take our key back out (TryLock does the same).
      (void)Call("/v3/kv/deleterange", Json{{"key", B64(key)}}, "deleterange");
      return absl::AbortedError(absl::StrCat("etcd lock \"", resource, "\": held (owner revision ",
                                             first, ", ours ", mine, ")"));
    }
    return absl::UnavailableError("etcd: lease lost twice");
  }

  absl::StatusOr<Grant> Acquire(const std::string& resource, absl::Duration ttl,
                                absl::Duration wait) override {
    const auto start = SteadyClock::now();
    if (absl::Status s = EnsureLease(); !s.ok()) return s;
    const std::string name = options_.key_prefix + resource;
    absl::StatusOr<HttpReply> r = http_.Post(
        "/v3/lock/lock", Json{{"name", B64(name)}, {"lease", std::to_string(lease_)}}.dump(), wait);
    if (!r.ok()) {
      // The server gives up its wait when the connection goes; our key may
      // still have been created: remove it.
      (void)Call("/v3/kv/deleterange", Json{{"key", B64(KeyOf(name))}}, "deleterange");
      if (absl::IsDeadlineExceeded(r.status())) return r.status();
      return absl::UnavailableError(r.status().message());
    }
    if (r->status != 200) return ErrorOf(*r, "lock");
    Json j = Json::parse(r->body, nullptr, false);
    std::string key;
    if (!j.is_object() || !j.contains("key") ||
        !absl::Base64Unescape(j["key"].get<std::string>(), &key)) {
      return absl::InternalError(absl::StrCat("lock: unexpected reply ", r->body.substr(0, 200)));
    }
    return MakeGrant(resource, key, Int(j["header"], "revision"), start, ttl);
  }

  absl::Status Release(const Grant& grant) override {
    absl::StatusOr<Json> r = Call("/v3/kv/deleterange", Json{{"key", B64(grant.token)}}, "release");
    return r.status();
  }

  absl::Duration TimeLeft(const Grant& grant) override {
    const auto end = std::min(grant.valid_until, lease_expiry_ - DriftChrono());
    const auto now = SteadyClock::now();
    return end > now ? absl::FromChrono(end - now) : absl::ZeroDuration();
  }

 private:
  SteadyClock::duration DriftChrono() const {
    // The library's drift rule at its default factor and floor.
    return absl::ToChronoNanoseconds(
        redlock::DriftAllowance(absl::Seconds(ttl_s_), redlock::Options()));
  }

  std::string KeyOf(const std::string& name) const {
    return absl::StrFormat("%s/%x", name, static_cast<uint64_t>(lease_));
  }

  absl::StatusOr<Grant> MakeGrant(const std::string& resource, const std::string& key,
                                  int64_t revision, SteadyClock::time_point start,
                                  absl::Duration ttl) {
    Grant g;
    g.resource = resource;
    g.token = key;
    g.fencing_token = static_cast<uint64_t>(revision);
    g.acquired_at = start;
    // The lock lasts as long as the lease: until its expiry as last renewed
    // (measured from when the renewal was sent), less the drift allowance.
    g.valid_until = lease_expiry_ - DriftChrono();
    return g;
  }

  absl::StatusOr<Json> Call(absl::string_view path, const Json& body, absl::string_view what) {
    absl::StatusOr<HttpReply> r = http_.Post(path, body.dump(), options_.request_timeout);
    if (!r.ok()) {
      return absl::UnavailableError(absl::StrCat("etcd ", what, ": ", r.status().message()));
    }
    if (r->status != 200) return ErrorOf(*r, absl::StrCat("etcd ", what));
    Json j = Json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return absl::InternalError(absl::StrCat("etcd ", what, ": bad JSON"));
    return j;
  }

  // A lease for the session, renewed lazily: before an attempt, when less
  // than two thirds of its TTL is left (so a session that locks often renews
  // about every TTL/3, like the Go client's keep-alive, without a thread).
  absl::Status EnsureLease() {
    const auto now = SteadyClock::now();
    const auto ttl = std::chrono::seconds(ttl_s_);
    if (lease_ != 0 && lease_expiry_ - now > ttl * 2 / 3) return absl::OkStatus();
    if (lease_ != 0) {
      absl::StatusOr<Json> r =
          Call("/v3/lease/keepalive", Json{{"ID", std::to_string(lease_)}}, "lease keepalive");
      if (r.ok() && Int((*r)["result"], "TTL") > 0) {
        lease_expiry_ = now + std::chrono::seconds(Int((*r)["result"], "TTL"));
        return absl::OkStatus();
      }
      if (!r.ok() && !absl::IsNotFound(r.status()) && !absl::IsInternal(r.status())) {
        return r.status();
      }
      lease_ = 0;  // expired: a new one
    }
    absl::StatusOr<Json> r =
        Call("/v3/lease/grant", Json{{"TTL", std::to_string(ttl_s_)}}, "lease grant");
    if (!r.ok()) return r.status();
    lease_ = Int(*r, "ID");
    const int64_t granted = Int(*r, "TTL");
    if (lease_ == 0 || granted <= 0) {
      return absl::InternalError(absl::StrCat("lease grant: unexpected reply ", r->dump()));
    }
    lease_expiry_ = now + std::chrono::seconds(granted);
    return absl::OkStatus();
  }

  const ServiceOptions options_;
  HttpClient http_;
  int64_t ttl_s_ = 10;
  int64_t lease_ = 0;
  SteadyClock::time_point lease_expiry_{};
};

class EtcdService final : public LockService {
 public:
  explicit EtcdService(ServiceOptions options) : options_(std::move(options)) {}
  Kind kind() const override { return Kind::kEtcd; }
  std::string Describe() const override {
    return absl::StrCat("etcd v3 concurrency recipe over the HTTP/JSON gateway, ",
                        options_.endpoints.size(), " members; fencing token = create revision");
  }
  absl::StatusOr<std::unique_ptr<LockSession>> NewSession() override {
    return std::unique_ptr<LockSession>(new EtcdSession(options_));
  }

 private:
  const ServiceOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LockService>> NewEtcdService(ServiceOptions options) {
  return std::unique_ptr<LockService>(new EtcdService(std::move(options)));
}

}  // namespace redlock::backends
