// PostgreSQL lock recipes through libpq: session advisory locks, a unique
// key in a table (insert/delete, taking over an expired row), and a row lock
// (SELECT ... FOR UPDATE) held by an open transaction. Compiled only when
// the build found libpq (REDLOCK_HAVE_LIBPQ).
//
// Every statement goes through the asynchronous API with a deadline of our
// own: a stopped server must cost a timeout, not a hang.

#ifdef REDLOCK_HAVE_LIBPQ

#include <libpq-fe.h>
#include <poll.h>
#include <sys/random.h>

#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "backends/lock_service.h"
#include "redlock/options.h"

namespace redlock::backends {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr char kSchema[] =
    "CREATE TABLE IF NOT EXISTS redlock_unique (resource text PRIMARY KEY, owner text NOT NULL, "
    "expires_at timestamptz NOT NULL, fence bigint NOT NULL);"
    "CREATE TABLE IF NOT EXISTS redlock_rows (resource text PRIMARY KEY, "
    "fence bigint NOT NULL DEFAULT 0);"
    "CREATE SEQUENCE IF NOT EXISTS redlock_fence";

std::string RandomHex() {
  unsigned char b[16];
  if (getrandom(b, sizeof(b), 0) != static_cast<ssize_t>(sizeof(b))) return "0";
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(b), sizeof(b)));
}

int64_t AdvisoryKey(absl::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return static_cast<int64_t>(h);
}

// A result, owned.
struct Result {
  PGresult* r = nullptr;
  ~Result() {
    if (r != nullptr) PQclear(r);
  }
  Result() = default;
  Result(Result&& o) noexcept : r(std::exchange(o.r, nullptr)) {}
  Result& operator=(Result&& o) noexcept {
    if (this != &o) {
      if (r != nullptr) PQclear(r);
      r = std::exchange(o.r, nullptr);
    }
    return *this;
  }
  int rows() const { return PQntuples(r); }
  std::string Get(int row, int col) const { return PQgetvalue(r, row, col); }
};

class PgConnection {
 public:
  PgConnection(const ServiceOptions& options) : options_(options) {}
  ~PgConnection() { Close(); }

  bool ok() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }
  void Close() {
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = nullptr;
  }
  int generation() const { return generation_; }

  absl::Status Connect() {
    if (ok()) return absl::OkStatus();
    Close();
    std::pair<std::string, std::string> hp =
        absl::StrSplit(options_.endpoints[0], absl::MaxSplits(':', 1));
    const std::string conninfo = absl::StrCat(
        "host=", hp.first, " port=", hp.second, " user=", options_.pg_user,
        " dbname=", options_.pg_database,
        " connect_timeout=", std::max<int64_t>(2, absl::ToInt64Seconds(options_.request_timeout)),
        " application_name=redlock-backends");
    conn_ = PQconnectdb(conninfo.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string e = PQerrorMessage(conn_);
      Close();
      return absl::UnavailableError(absl::StrCat("postgresql connect: ", e));
    }
    ++generation_;
    return absl::OkStatus();
  }

  // Runs `sql` (several statements in the simple protocol when `params` is
  // empty and `simple`) within the request timeout; the last result. An
  // error result comes back as a status whose message starts with the
  // SQLSTATE.
  absl::StatusOr<Result> Exec(const std::string& sql, const std::vector<std::string>& params,
                              absl::Duration timeout, bool simple = false) {
    if (absl::Status s = Connect(); !s.ok()) return s;
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    const int sent = simple ? PQsendQuery(conn_, sql.c_str())
                            : PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()),
                                                nullptr, values.data(), nullptr, nullptr, 0);
    if (sent != 1) return Broken("send");
    const auto deadline = SteadyClock::now() + absl::ToChronoNanoseconds(timeout);
    Result last;
    for (int i = 0; i < 1000000; ++i) {
      if (PQconsumeInput(conn_) != 1) return Broken("read");
      while (PQisBusy(conn_) == 0) {
        PGresult* r = PQgetResult(conn_);
        if (r == nullptr) {
          if (last.r == nullptr) return absl::InternalError("postgresql: no result");
          const ExecStatusType st = PQresultStatus(last.r);
          if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return last;
          const char* state = PQresultErrorField(last.r, PG_DIAG_SQLSTATE);
          return ErrorOf(state != nullptr ? state : "", PQresultErrorMessage(last.r));
        }
        // Keep the first error, else the last result.
        if (last.r == nullptr || PQresultStatus(last.r) == PGRES_COMMAND_OK ||
            PQresultStatus(last.r) == PGRES_TUPLES_OK) {
          if (last.r != nullptr) PQclear(last.r);
          last.r = r;
        } else {
          PQclear(r);
        }
      }
      const auto now = SteadyClock::now();
      if (now >= deadline) {
        Close();  // a stopped server: give the connection up
        return absl::UnavailableError(
            absl::StrCat("postgresql: no reply within ", absl::FormatDuration(timeout)));
      }
      pollfd p{PQsocket(conn_), POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      (void)poll(&p, 1, static_cast<int>(left.count()) + 1);
    }
    return Broken("too many results");
  }

 private:
  absl::Status Broken(absl::string_view what) {
    std::string e = conn_ != nullptr ? PQerrorMessage(conn_) : "";
    Close();
    return absl::UnavailableError(absl::StrCat("postgresql ", what, ": ", e));
  }
  static absl::Status ErrorOf(absl::string_view state, absl::string_view message) {
    std::string text = absl::StrCat(state, ": ", message);
    if (state == "55P03") return absl::AbortedError(text);           // lock_not_available
    if (state == "57014") return absl::DeadlineExceededError(text);  // query_canceled (timeouts)
    if (absl::StartsWith(state, "08") || absl::StartsWith(state, "57P")) {
      return absl::UnavailableError(text);
    }
    return absl::InternalError(text);
  }

  const ServiceOptions& options_;
  PGconn* conn_ = nullptr;
  int generation_ = 0;
};

class PgSession final : public LockSession {
 public:
  explicit PgSession(const ServiceOptions& options) : options_(options), conn_(options_) {}

  absl::StatusOr<Grant> TryAcquire(const std::string& resource, absl::Duration ttl) override {
    return Lock(resource, ttl, absl::ZeroDuration());
  }
  absl::StatusOr<Grant> Acquire(const std::string& resource, absl::Duration ttl,
                                absl::Duration wait) override {
    if (options_.kind != Kind::kPgUnique) return Lock(resource, ttl, wait);
    // No wake-up in the table recipe: poll, with growing pauses.
    const auto deadline = SteadyClock::now() + absl::ToChronoNanoseconds(wait);
    auto pause = std::chrono::microseconds(500);
    for (int i = 0; i < 100000; ++i) {
      absl::StatusOr<Grant> g = Lock(resource, ttl, absl::ZeroDuration());
      if (!absl::IsAborted(g.status())) return g;
      if (SteadyClock::now() + pause >= deadline) break;
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(16));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("pg-unique lock \"", resource, "\": not granted within wait"));
  }

  absl::Status Release(const Grant& grant) override {
    const std::string key = options_.key_prefix + grant.resource;
    if (options_.kind != Kind::kPgUnique && conn_.generation() != generation_of_[grant.token]) {
      return absl::OkStatus();  // the connection that held it is gone, and the lock with it
    }
    generation_of_.erase(grant.token);
    absl::StatusOr<Result> r;
    switch (options_.kind) {
      case Kind::kPgAdvisory:
        r = conn_.Exec("SELECT pg_advisory_unlock($1)", {absl::StrCat(AdvisoryKey(key))},
                       options_.request_timeout);
        break;
      case Kind::kPgUnique:
        r = conn_.Exec("DELETE FROM redlock_unique WHERE resource = $1 AND owner = $2",
                       {key, grant.token}, options_.request_timeout);
        break;
      default:
        r = conn_.Exec("COMMIT", {}, options_.request_timeout, true);
        break;
    }
    return r.status();
  }

  absl::Duration TimeLeft(const Grant& grant) override {
    if (options_.kind == Kind::kPgUnique) return LockSession::TimeLeft(grant);
    // Held by the session: as long as the connection is the one that took it.
    auto it = generation_of_.find(grant.token);
    if (it == generation_of_.end() || it->second != conn_.generation() || !conn_.ok()) {
      return absl::ZeroDuration();
    }
    return absl::Hours(1);
  }

 private:
  absl::StatusOr<Grant> Lock(const std::string& resource, absl::Duration ttl, absl::Duration wait) {
    const auto start = SteadyClock::now();
    const std::string key = options_.key_prefix + resource;
    const absl::Duration timeout = options_.request_timeout + wait;
    Grant g;
    g.resource = resource;
    g.acquired_at = start;
    g.valid_until = SteadyClock::time_point::max();
    std::string fence;
    switch (options_.kind) {
      case Kind::kPgAdvisory: {
        const std::string k = absl::StrCat(AdvisoryKey(key));
        if (wait <= absl::ZeroDuration()) {
          absl::StatusOr<Result> r =
              conn_.Exec(options_.fencing ? "SELECT CASE WHEN pg_try_advisory_lock($1) THEN "
                                            "nextval('redlock_fence') ELSE -1 END"
                                          : "SELECT CASE WHEN pg_try_advisory_lock($1) THEN 0 "
                                            "ELSE -1 END",
                         {k}, timeout);
          if (!r.ok()) return r.status();
          fence = r->Get(0, 0);
          if (fence == "-1") return Held(resource);
        } else {
          absl::StatusOr<Result> r =
              conn_.Exec(absl::StrCat("SET lock_timeout = ", absl::ToInt64Milliseconds(wait),
                                      "; SELECT pg_advisory_lock(", k, "); SELECT ",
                                      options_.fencing ? "nextval('redlock_fence')" : "0"),
                         {}, timeout, true);
          if (!r.ok()) return WaitStatus(r.status(), resource);
          fence = r->Get(0, 0);
        }
        g.token = absl::StrCat("advisory:", k);
        break;
      }
      case Kind::kPgUnique: {
        g.token = RandomHex();
        absl::StatusOr<Result> r = conn_.Exec(
            absl::StrCat(
                "INSERT INTO redlock_unique AS l (resource, owner, expires_at, fence) VALUES ($1, "
                "$2, clock_timestamp() + $3 * interval '1 millisecond', ",
                options_.fencing ? "nextval('redlock_fence')" : "0",
                ") ON CONFLICT (resource) DO UPDATE SET owner = EXCLUDED.owner, expires_at = "
                "EXCLUDED.expires_at, fence = EXCLUDED.fence WHERE l.expires_at < "
                "clock_timestamp() RETURNING fence"),
            {key, g.token, absl::StrCat(absl::ToInt64Milliseconds(ttl))}, timeout);
        if (!r.ok()) return r.status();
        if (r->rows() != 1) return Held(resource);
        fence = r->Get(0, 0);
        // The row expires on the database's clock at insert time + ttl,
        // which is later than start + ttl: the client's validity is safe
        // while that clock runs at the client's pace.
        // (The library's drift rule at its default factor and floor.)
        g.valid_until = start + absl::ToChronoNanoseconds(
                                    ttl - redlock::DriftAllowance(ttl, redlock::Options()));
        break;
      }
      default: {  // kPgForUpdate
        if (!rows_.count(key) || rows_generation_ != conn_.generation()) {
          absl::StatusOr<Result> r =
              conn_.Exec("INSERT INTO redlock_rows (resource) VALUES ($1) ON CONFLICT DO NOTHING",
                         {key}, options_.request_timeout);
          if (!r.ok()) return r.status();
          if (rows_generation_ != conn_.generation()) rows_.clear();
          rows_generation_ = conn_.generation();
          rows_.insert(key);
        }
        // A literal (standard_conforming_strings is on by default): quotes doubled.
        const std::string literal = absl::StrCat("'", absl::StrReplaceAll(key, {{"'", "''"}}), "'");
        const std::string sql = absl::StrCat(
            "BEGIN; ",
            wait > absl::ZeroDuration()
                ? absl::StrCat("SET LOCAL lock_timeout = ", absl::ToInt64Milliseconds(wait), "; ")
                : "",
            "SELECT 1 FROM redlock_rows WHERE resource = ", literal, " FOR UPDATE",
            wait > absl::ZeroDuration() ? "" : " NOWAIT", "; SELECT ",
            options_.fencing ? "nextval('redlock_fence')" : "0");
        absl::StatusOr<Result> r = conn_.Exec(sql, {}, timeout, true);
        if (!r.ok()) {
          (void)conn_.Exec("ROLLBACK", {}, options_.request_timeout, true);
          if (absl::IsAborted(r.status()) && wait <= absl::ZeroDuration()) return Held(resource);
          return WaitStatus(r.status(), resource);
        }
        fence = r->Get(0, 0);
        g.token = absl::StrCat("row:", key, ":", RandomHex());
        break;
      }
    }
    uint64_t f = 0;
    if (options_.fencing && absl::SimpleAtoi(fence, &f)) g.fencing_token = f;
    generation_of_[g.token] = conn_.generation();
    return g;
  }

  absl::Status Held(const std::string& resource) {
    return absl::AbortedError(
        absl::StrCat(KindName(options_.kind), " lock \"", resource, "\": held"));
  }
  absl::Status WaitStatus(const absl::Status& s, const std::string& resource) {
    // lock_timeout ends a wait with lock_not_available (55P03).
    if (absl::IsAborted(s)) {
      return absl::DeadlineExceededError(absl::StrCat(KindName(options_.kind), " lock \"", resource,
                                                      "\": not granted within wait"));
    }
    return s;
  }

  const ServiceOptions& options_;
  PgConnection conn_;
  std::map<std::string, int> generation_of_;  // grant token -> connection generation
  std::set<std::string> rows_;                // rows known to exist (for-update)
  int rows_generation_ = -1;
};

class PgService final : public LockService {
 public:
  explicit PgService(ServiceOptions options) : options_(std::move(options)) {}
  Kind kind() const override { return options_.kind; }
  std::string Describe() const override {
    switch (options_.kind) {
      case Kind::kPgAdvisory:
        return "PostgreSQL session advisory lock (pg_try_advisory_lock / pg_advisory_unlock)";
      case Kind::kPgUnique:
        return "PostgreSQL unique-key row: INSERT ... ON CONFLICT (take over if expired) / DELETE";
      default:
        return "PostgreSQL row lock: BEGIN; SELECT ... FOR UPDATE NOWAIT / COMMIT";
    }
  }
  absl::StatusOr<std::unique_ptr<LockSession>> NewSession() override {
    return std::unique_ptr<LockSession>(new PgSession(options_));
  }
  absl::Status Init() {
    // Several processes may create the schema at once: IF NOT EXISTS can
    // still race on the catalog, so try a few times.
    absl::Status last;
    for (int i = 0; i < 5; ++i) {
      PgConnection c(options_);
      absl::StatusOr<Result> r = c.Exec(kSchema, {}, absl::Seconds(10), true);
      if (r.ok()) return absl::OkStatus();
      last = r.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * (i + 1)));
    }
    return last;
  }

 private:
  const ServiceOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LockService>> NewPostgresService(ServiceOptions options) {
  auto service = std::make_unique<PgService>(std::move(options));
  if (absl::Status s = service->Init(); !s.ok()) return s;
  return std::unique_ptr<LockService>(std::move(service));
}

}  // namespace redlock::backends

#endif  // REDLOCK_HAVE_LIBPQ
