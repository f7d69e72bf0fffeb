#include "chaos/clients/external_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chaos/history/history.h"
#include "nlohmann/json.hpp"
#include "testkit/fleet.h"
#include "testkit/process.h"

namespace redlock::chaos {

using Json = nlohmann::json;

struct ExternalBackend::Message {
  Json j = Json::object();
};

namespace {

constexpr char kNodeRedlock[] = "node-redlock";
constexpr char kRedisPy[] = "redis-py";
// What to run when an adapter or its runtime is missing.
constexpr char kInstallHint[] =
    "run scripts/lab-clients.sh as root (on Debian 12 it installs nodejs and npm when node is "
    "missing, python3 and python3-redis, then runs npm ci in chaos/clients/node-redlock)";
// The longest reply line accepted: replies are a few hundred bytes.
constexpr size_t kMaxLine = 64 * 1024;

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string ClientsDir() {
#ifdef REDLOCK_SOURCE_DIR
  return EnvOr("REDLOCK_CHAOS_CLIENTS_DIR", absl::StrCat(REDLOCK_SOURCE_DIR, "/chaos/clients"));
#else
  return EnvOr("REDLOCK_CHAOS_CLIENTS_DIR", "chaos/clients");
#endif
}

std::string Clip(absl::string_view s, size_t n = 300) {
  if (s.size() <= n) return std::string(s);
  return absl::StrCat(s.substr(0, n), "...");
}

// The ways an adapter says "not done".
absl::StatusOr<absl::StatusCode> CodeOfClass(absl::string_view cls) {
  if (cls == "held") return absl::StatusCode::kAborted;
  if (cls == "unavailable") return absl::StatusCode::kUnavailable;
  if (cls == "expired") return absl::StatusCode::kDeadlineExceeded;
  if (cls == "lost") return absl::StatusCode::kFailedPrecondition;
  if (cls == "other") return absl::StatusCode::kInternal;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown class \"", cls, "\" (held, unavailable, expired, lost or other)"));
}

const Json* Field(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> BoolField(const Json& j, const char* key) {
  const Json* f = Field(j, key);
  if (f == nullptr || !f->is_boolean()) return std::nullopt;
  return f->get<bool>();
}

std::optional<double> NumberField(const Json& j, const char* key) {
  const Json* f = Field(j, key);
  if (f == nullptr || !f->is_number()) return std::nullopt;
  double v = f->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::string> StringField(const Json& j, const char* key) {
  const Json* f = Field(j, key);
  if (f == nullptr || !f->is_string()) return std::nullopt;
  return f->get<std::string>();
}

// Milliseconds (fractional) as an absl::Duration, clamped to +-2^40 ms so
// that a wild but finite number cannot overflow the raw-clock arithmetic.
absl::Duration Millis(double ms) {
  constexpr double kLimit = 1099511627776.0;
  return absl::Milliseconds(std::clamp(ms, -kLimit, kLimit));
}

absl::Status SkipOrFail(const std::string& message) {
  if (testkit::UnderCi()) {
    return absl::NotFoundError(absl::StrCat(message, "; CI=true makes that a failure"));
  }
  return absl::FailedPreconditionError(message);
}

void SleepMs(int ms) {
  timespec ts{0, static_cast<long>(ms) * 1000000};
  nanosleep(&ts, nullptr);
}

}  // namespace

bool IsLibraryClient(absl::string_view client) {
  return client.empty() || client == kLibraryClient;
}

std::vector<std::string> KnownExternalClients() { return {kNodeRedlock, kRedisPy}; }

absl::StatusOr<AdapterCommand> ResolveAdapter(absl::string_view client) {
  if (IsLibraryClient(client)) {
    return absl::InvalidArgumentError("the library is not run through an adapter");
  }
  AdapterCommand cmd;
  std::string runtime, script;
  if (client == kNodeRedlock) {
    runtime = EnvOr("REDLOCK_CHAOS_NODE", "node");
    script = absl::StrCat(ClientsDir(), "/node-redlock/adapter.js");
  } else if (client == kRedisPy) {
    // Debian's interpreter: python3-redis is installed for it, not for
    // another python3 that may come first on the PATH.
    runtime = EnvOr("REDLOCK_CHAOS_PYTHON", "/usr/bin/python3");
    script = absl::StrCat(ClientsDir(), "/redis-py/adapter.py");
  } else {
    // A user's adapter: any command line.
    cmd.argv = {"/bin/sh", "-c", absl::StrCat("exec ", client)};
    cmd.description = absl::StrCat("adapter `", client, "`");
    return cmd;
  }
  std::string path = testkit::FindExecutable(runtime);
  if (path.empty()) {
    return absl::NotFoundError(
        absl::StrCat(client, ": its runtime `", runtime, "` is not installed; ", kInstallHint));
  }
  if (access(script.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(client, ": no adapter at ", script,
                                            " (set REDLOCK_CHAOS_CLIENTS_DIR to the directory "
                                            "holding node-redlock/ and redis-py/)"));
  }
  cmd.argv = {path, script};
  cmd.known = true;
  cmd.description = absl::StrCat(client, " (", path, " ", script, ")");
  return cmd;
}

absl::Status CheckExternalClientAvailable(absl::string_view client) {
  if (IsLibraryClient(client)) return absl::OkStatus();
  const std::vector<std::string> known = KnownExternalClients();
  if (std::find(known.begin(), known.end(), client) == known.end()) return absl::OkStatus();
  absl::StatusOr<AdapterCommand> cmd = ResolveAdapter(client);
  if (!cmd.ok()) return SkipOrFail(std::string(cmd.status().message()));
  testkit::ProcessOptions options;
  options.argv = cmd->argv;
  options.argv.push_back("--check");
  options.stdout_to = testkit::Stream::kPipe;
  options.stderr_to = testkit::Stream::kStdout;
  absl::StatusOr<testkit::ProcessResult> r = testkit::RunProcess(options, absl::Seconds(30));
  if (!r.ok()) return SkipOrFail(absl::StrCat(client, ": ", r.status().message()));
  if (r->timed_out || r->exit_code() != 0) {
    return SkipOrFail(
        absl::StrCat(client, " cannot run here: ", absl::StripAsciiWhitespace(Clip(r->out, 600)),
                     r->timed_out ? " (its --check timed out)" : ""));
  }
  return absl::OkStatus();
}

absl::Duration AdapterRequestTimeout(const ClientConfig& config) {
  return absl::Milliseconds(config.client_timeout_ms > 0 ? config.client_timeout_ms
                                                         : config.ttl_ms + 5000);
}

// ---- ExternalBackend --------------------------------------------------------

absl::StatusOr<std::unique_ptr<ExternalBackend>> ExternalBackend::Start(
    const ClientConfig& config) {
  if (config.variant != ClientVariant::kLibrary) {
    return absl::InvalidArgumentError(
        absl::StrCat("client ", config.client, ": the broken variants are of this library only"));
  }
  absl::StatusOr<AdapterCommand> cmd = ResolveAdapter(config.client);
  if (!cmd.ok()) return cmd.status();
  std::unique_ptr<ExternalBackend> b(new ExternalBackend(config, *std::move(cmd)));
  absl::Status s = b->Spawn();
  if (s.ok()) s = b->Hello();
  if (!s.ok()) return s;
  return b;
}

absl::Status ExternalBackend::Spawn() {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return absl::UnavailableError(strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    int err = errno;
    close(in[0]);
    close(in[1]);
    return absl::UnavailableError(strerror(err));
  }
  // Everything the child needs, prepared before fork().
  std::vector<char*> argv;
  for (std::string& a : command_.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    return absl::UnavailableError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    // The adapter dies with this process (a SIGKILL by the harness
    // included), and stays in its process group: the harness pauses a client
    // process by its group (ClientProcess::Pause), so the lock client
    // stops with it. It ends when its stdin closes.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(in[0], 0);
    dup2(out[1], 1);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    const char msg[] = "redlock-chaos-client: cannot execute the adapter\n";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    (void)w;
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  pid_ = pid;
  to_adapter_ = in[1];
  from_adapter_ = out[0];
  return absl::OkStatus();
}

std::string ExternalBackend::Describe() const {
  return absl::StrCat("client under test ", command_.description);
}

absl::Status ExternalBackend::Fail(absl::Status why) {
  if (failure_.ok()) {
    failure_ = absl::Status(why.code(), absl::StrCat(Describe(), ": ", why.message()));
  }
  return failure_;
}

absl::StatusOr<ExternalBackend::Message> ExternalBackend::Call(Message request,
                                                               absl::Duration timeout) {
  if (!failure_.ok()) return failure_;
  const int64_t id = next_id_++;
  request.j["id"] = id;
  const std::string op = request.j.value("op", std::string("?"));
  std::string what = op;
  if (const Json* r = Field(request.j, "resource"); r != nullptr && r->is_string()) {
    absl::StrAppend(&what, " \"", r->get<std::string>(), "\"");
  }
  const std::string line = request.j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  for (size_t done = 0; done < line.size();) {
    ssize_t w = write(to_adapter_, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return Fail(absl::UnavailableError(
          absl::StrCat("the adapter's stdin is closed (", strerror(errno), ") at ", what)));
    }
    done += static_cast<size_t>(w);
  }
  // The deadline is on the raw clock: a clock shim moves this process's
  // monotonic clock, never CLOCK_MONOTONIC_RAW.
  const int64_t deadline = RawMonotonicNanos() + absl::ToInt64Nanoseconds(timeout);
  std::string reply;
  for (int i = 0; i < 10000000; ++i) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      reply = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      break;
    }
    if (buffer_.size() > kMaxLine) {
      return Fail(
          absl::InternalError(absl::StrCat("the adapter's reply to ", what, " is longer than ",
                                           kMaxLine, " bytes: ", Clip(buffer_))));
    }
    const int64_t left = deadline - RawMonotonicNanos();
    // After a SIGSTOP of this process the deadline may have passed while the
    // reply waited in the pipe: poll once more, without waiting.
    pollfd pfd{from_adapter_, POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(std::clamp<int64_t>(left / 1000000, 0, 100)));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (left <= 0) {
        return Fail(absl::DeadlineExceededError(absl::StrCat(
            "the adapter did not answer ", what, " within ", absl::FormatDuration(timeout),
            " (the request timeout: --client-timeout-ms, default ttl + 5s)")));
      }
      continue;
    }
    char chunk[4096];
    ssize_t n = read(from_adapter_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // EOF: the adapter exited (or closed its stdout). Say how it ended.
      std::string how = "closed its stdout";
      for (int k = 0; k < 100 && pid_ > 0; ++k) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          how = absl::StrCat("exited (", testkit::DescribeWaitStatus(status), ")");
          pid_ = -1;
          break;
        }
        SleepMs(10);
      }
      return Fail(absl::UnavailableError(
          absl::StrCat("the adapter ", how, " during ", what,
                       buffer_.empty() ? "" : absl::StrCat("; it had written: ", Clip(buffer_)),
                       " (its stderr is in this log above)")));
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  Json j = Json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Fail(absl::InternalError(absl::StrCat(
        "the adapter answered ", what, " with a line that is not a JSON object: ", Clip(reply),
        " (adapters log to stderr only)")));
  }
  const Json* got_id = Field(j, "id");
  if (got_id == nullptr || !got_id->is_number_integer() || got_id->get<int64_t>() != id) {
    return Fail(absl::InternalError(absl::StrCat("the adapter's reply to ", what, " (id ", id,
                                                 ") has another or no id: ", Clip(reply))));
  }
  std::optional<bool> ok = BoolField(j, "ok");
  if (!ok.has_value()) {
    return Fail(absl::InternalError(
        absl::StrCat("the adapter's reply to ", what, " has no boolean \"ok\": ", Clip(reply))));
  }
  if (!*ok) {
    return Fail(absl::InternalError(absl::StrCat("the adapter failed ", what, ": ",
                                                 StringField(j, "error").value_or(Clip(reply)))));
  }
  Message m;
  m.j = std::move(j);
  return m;
}

absl::Status ExternalBackend::Hello() {
  Message req;
  req.j["op"] = "hello";
  req.j["protocol"] = kProtocolVersion;
  req.j["client"] = config_.name;
  req.j["nodes"] = config_.nodes;
  req.j["tls_ca"] = config_.tls_ca;
  req.j["tls_server_name"] = config_.tls_server_name;
  req.j["node_timeout_ms"] = config_.node_timeout_ms;
  req.j["drift_factor"] = config_.drift_factor;
  // Start-up of a runtime (and its first connections) may take a while.
  absl::StatusOr<Message> rep =
      Call(std::move(req), std::max(AdapterRequestTimeout(config_), absl::Seconds(20)));
  if (!rep.ok()) {
    if (command_.known) {
      return absl::Status(
          rep.status().code(),
          absl::StrCat(rep.status().message(), ". If it is not installed: ", kInstallHint));
    }
    return rep.status();
  }
  const Json& j = rep->j;
  const Json* protocol = Field(j, "protocol");
  std::optional<std::string> name = StringField(j, "name");
  std::optional<std::string> version = StringField(j, "version");
  std::optional<bool> single = BoolField(j, "single_instance");
  std::optional<bool> fencing = BoolField(j, "fencing");
  if (protocol == nullptr || !protocol->is_number_integer() ||
      protocol->get<int64_t>() != kProtocolVersion || !name || !version || !single || !fencing) {
    return Fail(absl::InternalError(absl::StrCat(
        "the adapter's hello must carry \"protocol\": ", kProtocolVersion,
        ", \"name\", \"version\", \"single_instance\" and \"fencing\": ", Clip(j.dump()))));
  }
  info_.name = *name;
  info_.version = *version;
  info_.single_instance = *single;
  info_.fencing = *fencing;
  info_.validity = StringField(j, "validity").value_or("");
  fprintf(stderr, "%s: client under test: %s %s (%s, %s)%s%s\n", config_.name.c_str(),
          info_.name.c_str(), info_.version.c_str(),
          info_.single_instance ? "single instance" : "multi-instance",
          info_.fencing ? "fencing tokens" : "no fencing tokens",
          info_.validity.empty() ? "" : "; validity: ", info_.validity.c_str());
  if (config_.fencing && !info_.fencing) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat(info_.name, " has no fencing tokens: run it with fencing off")));
  }
  if (config_.durability_replicas > 0 || config_.inspect_nodes) {
    fprintf(stderr, "%s: %s: durability and inspect-nodes are options of this library; ignored\n",
            config_.name.c_str(), info_.name.c_str());
  }
  return absl::OkStatus();
}

absl::StatusOr<HeldLock> ExternalBackend::Acquire(const std::string& resource, int64_t ttl_ms) {
  Message req;
  req.j["op"] = "acquire";
  req.j["resource"] = resource;
  req.j["ttl_ms"] = ttl_ms;
  const int64_t start = RawMonotonicNanos();
  absl::StatusOr<Message> rep = Call(std::move(req), AdapterRequestTimeout(config_));
  const int64_t at = RawMonotonicNanos();
  if (!rep.ok()) return rep.status();
  const Json& j = rep->j;
  const std::string where = absl::StrCat("acquire \"", resource, "\"");
  std::optional<bool> granted = BoolField(j, "granted");
  if (!granted.has_value()) {
    return Fail(absl::InternalError(absl::StrCat("the adapter's reply to ", where,
                                                 " has no boolean \"granted\": ", Clip(j.dump()))));
  }
  if (!*granted) {
    std::optional<std::string> cls = StringField(j, "class");
    absl::StatusOr<absl::StatusCode> code =
        cls.has_value()
            ? CodeOfClass(*cls)
            : absl::StatusOr<absl::StatusCode>(absl::InvalidArgumentError("no \"class\""));
    if (!code.ok()) {
      return Fail(absl::InternalError(absl::StrCat("the adapter's refusal of ", where, ": ",
                                                   code.status().message(), ": ", Clip(j.dump()))));
    }
    return absl::Status(*code, absl::StrCat(where, ": ", StringField(j, "error").value_or(*cls)));
  }
  std::optional<std::string> token = StringField(j, "token");
  std::optional<double> validity = NumberField(j, "validity_ms");
  if (!token.has_value() || token->empty() || !validity.has_value()) {
    return Fail(absl::InternalError(
        absl::StrCat("the adapter's grant of ", where,
                     " needs a \"token\" and a numeric \"validity_ms\": ", Clip(j.dump()))));
  }
  HeldLock h;
  h.resource = resource;
  h.token = *token;
  h.start_raw = start;
  h.valid_until_raw = at + absl::ToInt64Nanoseconds(Millis(*validity));
  // The harness pauses this process, not its adapter: stopped while the
  // adapter answered, this process reads a validity that was measured
  // before the pause. The adapter's belief asked again now counts the pause
  // as the adapter's own clock saw it (the smaller of the two is kept, as a
  // pause may also fall into this second request).
  Message again;
  again.j["op"] = "remaining";
  again.j["resource"] = resource;
  again.j["token"] = *token;
  absl::StatusOr<Message> left = Call(std::move(again), AdapterRequestTimeout(config_));
  const int64_t at_left = RawMonotonicNanos();
  if (!left.ok()) return left.status();
  std::optional<double> now_valid = NumberField(left->j, "validity_ms");
  if (!now_valid.has_value()) {
    return Fail(absl::InternalError(
        absl::StrCat("the adapter's reply to remaining needs a numeric \"validity_ms\": ",
                     Clip(left->j.dump()))));
  }
  h.valid_until_raw =
      std::min(h.valid_until_raw, at_left + absl::ToInt64Nanoseconds(Millis(*now_valid)));
  h.drift_ms = static_cast<int64_t>(std::ceil(NumberField(j, "drift_ms").value_or(0)));
  if (const Json* nodes = Field(j, "nodes"); nodes != nullptr) {
    bool good = nodes->is_array();
    if (good) {
      for (const Json& n : *nodes) {
        if (!n.is_number_integer() || n.get<int64_t>() < 0 ||
            n.get<int64_t>() >= static_cast<int64_t>(config_.nodes.size())) {
          good = false;
          break;
        }
        h.nodes.push_back(n.get<int>());
      }
    }
    if (!good) {
      return Fail(
          absl::InternalError(absl::StrCat("the adapter's \"nodes\" must be node indexes (0..",
                                           config_.nodes.size() - 1, "): ", Clip(j.dump()))));
    }
  }
  if (const Json* f = Field(j, "fencing_token"); f != nullptr) {
    if (!f->is_number_unsigned()) {
      return Fail(absl::InternalError(absl::StrCat(
          "the adapter's \"fencing_token\" must be a non-negative integer: ", Clip(j.dump()))));
    }
    if (config_.fencing) h.fencing_token = f->get<uint64_t>();
  }
  return h;
}

absl::StatusOr<ExternalBackend::Message> ExternalBackend::CallOnLock(
    const char* op, const HeldLock& lock, std::optional<int64_t> ttl_ms) {
  Message req;
  req.j["op"] = op;
  req.j["resource"] = lock.resource;
  req.j["token"] = lock.token;
  if (ttl_ms.has_value()) req.j["ttl_ms"] = *ttl_ms;
  return Call(std::move(req), AdapterRequestTimeout(config_));
}

absl::Duration ExternalBackend::TimeLeft(const HeldLock& lock) {
  absl::StatusOr<Message> rep = CallOnLock("remaining", lock);
  if (!rep.ok()) return absl::ZeroDuration();
  std::optional<double> validity = NumberField(rep->j, "validity_ms");
  if (!validity.has_value()) {
    (void)Fail(absl::InternalError(
        absl::StrCat("the adapter's reply to remaining needs a numeric \"validity_ms\": ",
                     Clip(rep->j.dump()))));
    return absl::ZeroDuration();
  }
  return std::max(absl::ZeroDuration(), Millis(*validity));
}

absl::Status ExternalBackend::Answer(const Message& rep, const char* op, const char* field,
                                     const std::string& resource) {
  const Json& j = rep.j;
  std::optional<bool> done = BoolField(j, field);
  if (!done.has_value()) {
    return Fail(absl::InternalError(absl::StrCat(
        "the adapter's reply to ", op, " has no boolean \"", field, "\": ", Clip(j.dump()))));
  }
  if (*done) return absl::OkStatus();
  std::optional<std::string> cls = StringField(j, "class");
  absl::StatusOr<absl::StatusCode> code = CodeOfClass(cls.value_or("?"));
  if (!code.ok()) {
    return Fail(absl::InternalError(
        absl::StrCat("the adapter's failed ", op, ": ", code.status().message())));
  }
  return absl::Status(
      *code, absl::StrCat(op, " \"", resource, "\": ", StringField(j, "error").value_or(*cls)));
}

absl::Status ExternalBackend::Release(const HeldLock& lock) {
  absl::StatusOr<Message> rep = CallOnLock("release", lock);
  if (!rep.ok()) return rep.status();
  return Answer(*rep, "release", "released", lock.resource);
}

absl::Status ExternalBackend::Extend(HeldLock* lock, int64_t ttl_ms) {
  absl::StatusOr<Message> rep = CallOnLock("extend", *lock, ttl_ms);
  const int64_t at = RawMonotonicNanos();
  if (!rep.ok()) return rep.status();
  absl::Status answer = Answer(*rep, "extend", "extended", lock->resource);
  if (!answer.ok()) return answer;
  const Json& j = rep->j;
  std::optional<double> validity = NumberField(j, "validity_ms");
  if (!validity.has_value()) {
    return Fail(absl::InternalError(
        absl::StrCat("the adapter's extension needs a numeric \"validity_ms\": ", Clip(j.dump()))));
  }
  if (std::optional<std::string> token = StringField(j, "token"); token && !token->empty()) {
    lock->token = *token;
  }
  lock->valid_until_raw = at + absl::ToInt64Nanoseconds(Millis(*validity));
  return absl::OkStatus();
}

ExternalBackend::~ExternalBackend() {
  if (to_adapter_ >= 0) close(to_adapter_);
  if (pid_ > 0) {
    int status = 0;
    bool reaped = false;
    for (int i = 0; i < 200 && !reaped; ++i) {  // 2 s
      reaped = waitpid(pid_, &status, WNOHANG) == pid_;
      if (!reaped) SleepMs(10);
    }
    if (!reaped) {
      fprintf(stderr, "%s: the adapter did not exit within 2s of its stdin closing; SIGKILL\n",
              config_.name.c_str());
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  if (from_adapter_ >= 0) close(from_adapter_);
}

absl::StatusOr<std::unique_ptr<LockBackend>> MakeExternalBackend(const ClientConfig& config) {
  absl::StatusOr<std::unique_ptr<ExternalBackend>> b = ExternalBackend::Start(config);
  if (!b.ok()) return b.status();
  return std::unique_ptr<LockBackend>(std::move(*b));
}

}  // namespace redlock::chaos
