// The live run's methods (chaos/run/run.h): what fault kinds and the
// schedule act through.

#include "chaos/run/run.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chaos/base/cleanup.h"
#include "chaos/history/history.h"

namespace redlock::chaos {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string ProxyKey(const FaultSite& site, Direction d) {
  return absl::StrCat(site.Name(), ":", DirectionName(d));
}

}  // namespace

uint64_t Run::Uniform(uint64_t lo, uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + rng_() % (hi - lo + 1);
}

bool Run::Active() const { return !Interrupted() && SteadyClock::now() < deadline_; }

absl::Duration Run::Remaining() const {
  auto left = deadline_ - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) return absl::ZeroDuration();
  return absl::FromChrono(left);
}

absl::Duration Run::Elapsed() const { return absl::FromChrono(SteadyClock::now() - begin_); }

bool Run::Sleep(absl::Duration d) {
  absl::Duration left = Remaining();
  if (left <= absl::ZeroDuration()) return false;
  if (!InterruptibleSleep(std::min(d, left))) return false;
  return d <= left;
}

int Run::num_nodes() const { return supervisor_->size(); }
std::string Run::ClientName(int k) { return absl::StrCat("c", k + 1); }

FaultProxy* Run::proxy(int node) {
  if (node < 0 || static_cast<size_t>(node) >= proxies_.size()) return nullptr;
  return proxies_[static_cast<size_t>(node)].get();
}

FaultProxy* Run::link(int client, int node) {
  if (client < 0 || static_cast<size_t>(client) >= links_.size()) return nullptr;
  const auto& row = links_[static_cast<size_t>(client)];
  if (node < 0 || static_cast<size_t>(node) >= row.size()) return nullptr;
  return row[static_cast<size_t>(node)].get();
}

ClockControl* Run::client_clock(int k) {
  if (k < 0 || static_cast<size_t>(k) >= client_clocks_.size()) return nullptr;
  return client_clocks_[static_cast<size_t>(k)].get();
}

absl::Status Run::SetLogged(FaultProxy* p, const FaultSite& site, Direction d,
                            const FaultSpec& spec, absl::string_view name) {
  if (p == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no proxy for ", site.Name()));
  }
  absl::Status s = p->SetFault(d, spec);
  if (!s.ok()) return s;
  const std::string key = ProxyKey(site, d);
  auto it = active_proxy_faults_.find(key);
  if (it != active_proxy_faults_.end()) {
    nemesis_log_.Stop(it->second, key, "replaced");
    active_proxy_faults_.erase(it);
  }
  if (spec.kind == testkit::FaultKind::kNone) return absl::OkStatus();
  nemesis_log_.Start(name, site, absl::StrCat(spec.ToString(), " ", DirectionName(d)), key);
  active_proxy_faults_[key] = std::string(name);
  return absl::OkStatus();
}

void Run::ClearLogged(FaultProxy* p, const FaultSite& site, std::optional<Direction> only) {
  if (p == nullptr) return;
  for (Direction d : {Direction::kToServer, Direction::kToClient}) {
    if (only && *only != d) continue;
    absl::Status s = p->SetFault(d, FaultSpec::None());
    (void)s;  // kNone always validates
    const std::string key = ProxyKey(site, d);
    auto it = active_proxy_faults_.find(key);
    if (it == active_proxy_faults_.end()) continue;
    nemesis_log_.Stop(it->second, key, "cleared");
    active_proxy_faults_.erase(it);
  }
}

absl::Status Run::ProxyFault(int node, Direction d, const FaultSpec& spec, absl::string_view name) {
  return SetLogged(proxy(node), {.nodes = {node}}, d, spec, name);
}

void Run::ProxyClear(int node, std::optional<Direction> d) {
  ClearLogged(proxy(node), {.nodes = {node}}, d);
}

absl::Status Run::FollowMaster(int node, const std::vector<int>& clients) {
  if (replication_ == nullptr) return absl::FailedPreconditionError("no replicated nodes");
  // The clients ask the Sentinels themselves: nothing to re-point.
  if (setup().topology == Topology::kSentinelDiscovery) return absl::OkStatus();
  absl::StatusOr<Endpoint> ep = testkit::EndpointOf(replication_->MasterAddress(node));
  if (!ep.ok()) return ep.status();
  std::vector<std::string> names;
  for (int k : clients) {
    FaultProxy* p = link(k, node);
    if (p == nullptr) return absl::FailedPreconditionError("follow: no per-client links");
    absl::Status s = p->Retarget(ep->host, static_cast<uint16_t>(ep->port));
    if (s.ok()) s = p->Up();
    if (!s.ok()) return s;
    names.push_back(ClientName(k));
  }
  nemesis_log_.Instant(
      "follow", {.nodes = {node}, .clients = names},
      absl::StrCat(absl::StrJoin(names, ","), " now reach n", node, " at ",
                   replication_->MasterAddress(node), " (as a Sentinel-aware client would)"));
  return absl::OkStatus();
}

absl::Status Run::PauseClient(int k) {
  absl::Status s = client(k).Pause();
  if (s.ok()) nemesis_log_.Start("client_pause", {.clients = {ClientName(k)}}, "SIGSTOP");
  return s;
}

absl::Status Run::CrashClient(int k) {
  absl::Status s = client(k).Crash();
  if (s.ok()) nemesis_log_.Instant("client_crash", {.clients = {ClientName(k)}}, "SIGKILL");
  return s;
}

absl::Status Run::ResumeClient(int k) {
  if (!client(k).paused()) return absl::OkStatus();
  absl::Status s = client(k).Resume();
  nemesis_log_.Stop("client_pause", ClientName(k), "SIGCONT");
  return s;
}

absl::StatusOr<testkit::RedisValue> Run::NodeCommand(int i, const std::vector<std::string>& args,
                                                     absl::Duration timeout) {
  if (replication_ != nullptr) return replication_->Command(i, args, timeout);
  return supervisor_->fleet().Command(i, args, timeout);
}

std::optional<Marker> Run::WaitMarkerIf(int64_t after, absl::Duration timeout,
                                        const std::function<bool(const Marker&)>& match) {
  return hub_.Wait(after, std::min(timeout, Remaining()), match);
}

std::vector<Marker> Run::MarkersSince(int64_t after, absl::Duration timeout) {
  return hub_.Since(after, std::min(timeout, Remaining()));
}

bool Run::ClientInUse(int k) const {
  std::optional<Marker> m = hub_.Last(k);
  return m.has_value() && (m->kind == "grant" || m->kind == "use_read");
}

absl::StatusOr<std::vector<Event>> Run::HistorySoFar(bool to_end) {
  if (history_ == nullptr) history_ = std::make_unique<HistoryTail>(history_files_);
  absl::Status s = history_->Update(to_end);
  if (!s.ok()) return s;
  return history_->Events();
}

CheckResult Run::CheckSoFar() {
  absl::StatusOr<std::vector<Event>> h = HistorySoFar();
  if (!h.ok()) return CheckResult();
  return Check(*h);
}

bool Run::FoundAll(PropertySet properties) {
  CheckResult r = CheckSoFar();
  for (int p = 0; p < kNumProperties; ++p) {
    if ((properties & Prop(HarnessIndex(static_cast<Property>(p)))) &&
        r.violation_counts[static_cast<size_t>(p)] == 0) {
      return false;
    }
  }
  return true;
}

bool Run::FoundAny(PropertySet properties) {
  CheckResult r = CheckSoFar();
  for (int p = 0; p < kNumProperties; ++p) {
    if ((properties & Prop(HarnessIndex(static_cast<Property>(p)))) &&
        r.violation_counts[static_cast<size_t>(p)] > 0) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<FaultInstance*> Run::Inject(const FaultTemplate& t, int marker_client,
                                           const std::string& marker_resource) {
  absl::StatusOr<FaultInstance> f =
      ResolveTemplate(t, num_nodes(), num_clients(), scale(), marker_client, rng_);
  if (!f.ok()) return f.status();
  f->marker_resource = marker_resource;
  const absl::Duration at = Elapsed();
  auto owned = std::make_unique<FaultInstance>(*std::move(f));
  FaultInstance* raw = owned.get();
  absl::Status s = raw->kind->Inject(*this, *raw);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(DescribeTemplate(t), ": ", s.message()));
  }
  may_violate_ |= raw->kind->MayViolate(shape_, *raw);
  const bool instant = !raw->kind->info().lasting;
  const int64_t now = RawMonotonicNanos();
  faults_.push_back({std::move(owned), at, now, instant, instant ? now : 0});
  return raw;
}

absl::Status Run::Heal(FaultInstance* f) {
  for (Injected& i : faults_) {
    if (i.fault.get() != f) continue;
    if (i.healed) return absl::OkStatus();
    i.healed = true;
    absl::Status s = f->kind->Heal(*this, *f);
    i.ended_raw = RawMonotonicNanos();
    return s;
  }
  return absl::OkStatus();
}

std::vector<std::pair<int64_t, int64_t>> Run::IntolerableSpans() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t now = RawMonotonicNanos();
  for (const Injected& i : faults_) {
    if (i.fault->kind->Tolerated(shape_, *i.fault)) continue;
    out.push_back({i.at_raw, i.healed ? i.ended_raw : now});
  }
  return out;
}

absl::Status Run::HealKind(absl::string_view kind) {
  absl::Status first;
  for (Injected& i : faults_) {
    if (i.healed || i.fault->kind->name() != kind) continue;
    absl::Status s = Heal(i.fault.get());
    if (first.ok()) first = s;
  }
  return first;
}

absl::Status Run::HealFaults(bool keep_tolerated) {
  absl::Status first;
  std::vector<int> kept;  // nodes kept out of service by tolerated faults
  // Newest first: a fault injected on top of another is undone before it.
  for (auto it = faults_.rbegin(); it != faults_.rend(); ++it) {
    if (it->healed) continue;
    if (keep_tolerated && it->fault->kind->Tolerated(shape_, *it->fault)) {
      std::vector<int> with = kept;
      with.insert(with.end(), it->fault->nodes.begin(), it->fault->nodes.end());
      std::sort(with.begin(), with.end());
      with.erase(std::unique(with.begin(), with.end()), with.end());
      if (static_cast<int>(with.size()) <= (shape_.nodes - 1) / 2) {
        kept = std::move(with);
        continue;
      }
    }
    // A heal the kind wants on time waits for the end of its duration
    // (bounded by it: a "for the run" fault ends now).
    const FaultInstance& f = *it->fault;
    if (f.kind->info().heal_on_time && f.duration > absl::ZeroDuration() &&
        f.duration != absl::InfiniteDuration()) {
      const int64_t due = it->at_raw + absl::ToInt64Nanoseconds(f.duration);
      const int64_t now = RawMonotonicNanos();
      if (due > now) InterruptibleSleep(absl::Nanoseconds(due - now));
    }
    absl::Status s = Heal(it->fault.get());
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace redlock::chaos
