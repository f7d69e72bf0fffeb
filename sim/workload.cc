// The clients' loops: each client's worker runs the chaos lab's loop
// (chaos/clients/workload.cc) through the library's asynchronous forms:
//
//   invoke -> acquire (the primitive drawn) -> grant | fail
//          -> use* (read the store, wait `use`, write it back) while the
//             lease's validity covers a use and its guard
//          -> release (or let the lease lapse)
//
// and writes every step into the history with the true time.

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "multilock/multi_lock.h"
#include "redlock/outcome.h"
#include "redlock/rw_lock.h"
#include "redlock/semaphore.h"
#include "sim/world_internal.h"

namespace redlock::sim {
namespace {

int64_t Ms(int64_t ms) { return ms * 1000000; }

// The lease the hold has now: as its renewal last extended it, or as the
// worker last acquired or extended it.
Lease Current(const Hold& h, size_t i) {
  if (h.renewal != nullptr) {
    std::vector<Lease> all = h.renewal->leases();
    if (i < all.size()) return all[i];
  }
  return h.leases[i];
}

}  // namespace

int64_t World::TrueFromClient(int client, Lease::TimePoint tp) {
  const ClockModel& c = clients_[static_cast<size_t>(client)].clock;
  const int64_t value =
      std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
  return c.base_t +
         static_cast<int64_t>(std::llround(static_cast<double>(value - c.base_value) / c.rate));
}

void World::WorkerSleep(int client, int64_t ms, absl::AnyInvocable<void()> fn) {
  At(client, ClientNow(client) + Ms(std::max<int64_t>(ms, 0)), std::move(fn));
}

void World::BeginCall(int client, const std::string& what, int64_t budget_ms) {
  Worker& w = workers_[static_cast<size_t>(client)];
  Call call;
  call.what = what;
  call.start = now_;
  call.budget = Ms(budget_ms);
  call.paused_at_start = clients_[static_cast<size_t>(client)].paused_total;
  w.call = call;
}

void World::EndCall(int client) {
  Worker& w = workers_[static_cast<size_t>(client)];
  if (!w.call.has_value()) return;
  const ClientCtx& c = clients_[static_cast<size_t>(client)];
  const int64_t ran = now_ - w.call->start - (c.paused_total - w.call->paused_at_start);
  if (ran > w.call->budget) {
    Violation("L4",
              absl::StrCat(c.name, ": ", w.call->what, " took ", ran / 1000000,
                           "ms of the client's running time (its deadline allows ",
                           w.call->budget / 1000000, "ms)"),
              {c.name});
  }
  w.call.reset();
}

void World::StartWorkers() {
  for (int c = 0; c < config_.clients; ++c) {
    // After the first connections, each client at its own moment.
    const int64_t start = Ms(30) + rng_.Int(0, Ms(30));
    Schedule(start, [this, c] { RunForClient(c, [this, c] { WorkerNext(c); }); });
  }
}

void World::WorkerNext(int client) {
  Worker& w = workers_[static_cast<size_t>(client)];
  ClientCtx& ctx = clients_[static_cast<size_t>(client)];
  if (w.stopped || now_ >= workload_end_ || finishing_) {
    w.idle = true;
    return;
  }
  w.idle = false;
  w.fair_invoke = SIZE_MAX;
  w.tokens.clear();
  w.last_token.clear();
  std::vector<std::string> resources;
  if (config_.primitive == Primitive::kMultiLock) {
    std::vector<int> all(static_cast<size_t>(config_.resources));
    for (int i = 0; i < config_.resources; ++i) all[static_cast<size_t>(i)] = i;
    for (int i = 0; i < config_.set_size; ++i) {
      const size_t j = static_cast<size_t>(rng_.Int(i, config_.resources - 1));
      std::swap(all[static_cast<size_t>(i)], all[j]);
    }
    all.resize(static_cast<size_t>(config_.set_size));
    std::sort(all.begin(), all.end());
    for (int i : all) resources.push_back(ResourceName(i));
  } else {
    resources.push_back(ResourceName(static_cast<int>(rng_.Int(0, config_.resources - 1))));
  }
  // One op per resource: the history's ops are per lock (a MultiLock's set
  // is one acquisition of several locks).
  w.ops.clear();
  for (const std::string& r : resources) {
    w.ops.push_back(++w.op);
    chaos::Event e = NewEvent(chaos::EventType::kInvoke, now_, client, w.ops.back(), r);
    e.ttl_ms = config_.ttl_ms;
    if (config_.primitive == Primitive::kFair) {
      // A fair call (the lab's invoke mode "fair"): how long it may wait,
      // in true time as the history is (the wait runs on the client's
      // clock, whose rate is within clock_ppm of 1), rounded down.
      e.mode = "fair";
      e.wait_ms = static_cast<int64_t>(static_cast<double>(config_.wait_ms) /
                                       clients_[static_cast<size_t>(client)].clock.rate);
      w.fair_invoke = events_log_.size();
    }
    Record(e);
  }
  ++out_.invokes;
  w.invoked_at = now_;
  w.invoked_resources = resources;
  invokes_[client].push_back(now_);
  OnMarker(client, "invoke");
  const int attempts = config_.wait_ms > 0 ? 1 : (config_.retries ? config_.max_attempts : 1);
  const int64_t step = config_.node_timeout_ms +
                       (config_.durability_replicas > 0 ? config_.durability_timeout_ms : 0);
  BeginCall(client, "acquire",
            config_.wait_ms + config_.wait_poll_max_ms +
                attempts * (config_.retry_delay_ms + config_.retry_jitter_ms) +
                (attempts + 1) * 12 * step + 2000);
  internal::ClientImpl* impl = ctx.client.get();
  const absl::Duration ttl = absl::Milliseconds(config_.ttl_ms);
  const absl::Duration wait = absl::Milliseconds(config_.wait_ms);
  auto done = [this, client](absl::StatusOr<Hold> h) { WorkerAcquired(client, std::move(h)); };
  auto one = [done, fenced = config_.fencing](std::vector<std::string> res, std::string mode,
                                              bool read_only) mutable {
    return [done, fenced, res = std::move(res), mode = std::move(mode),
            read_only](absl::StatusOr<Lease> r) mutable {
      if (!r.ok()) {
        done(r.status());
        return;
      }
      Hold h;
      h.resources = res;
      h.token = r->token();
      h.mode = mode;
      h.read_only = read_only;
      h.fencing = {fenced ? std::optional<uint64_t>(r->fencing_token()) : std::nullopt};
      h.leases = {*std::move(r)};
      done(std::move(h));
    };
  };
  switch (config_.primitive) {
    case Primitive::kMutex:
      if (config_.wait_ms > 0) {
        impl->AcquireAsync(resources[0], ttl, wait, StopToken(), one(resources, "", false));
      } else if (config_.retries) {
        impl->AcquireAsync(resources[0], ttl, one(resources, "", false));
      } else {
        impl->TryAcquireAsync(resources[0], ttl, one(resources, "", false));
      }
      break;
    case Primitive::kMultiLock: {
      Client::SetRequest request;
      request.resources = resources;
      request.ttl = ttl;
      request.quorum = config_.all_nodes ? static_cast<int>(config_.nodes.size()) : 0;
      if (config_.wait_ms > 0) {
        request.wait = wait;
      } else if (config_.retries) {
        request.fail_fast_unavailable = config_.all_nodes;
      } else {
        request.max_attempts = 1;
      }
      impl->AcquireSetAsync(std::move(request), [done, resources, fenced = config_.fencing](
                                                    absl::StatusOr<std::vector<Lease>> r) mutable {
        if (!r.ok()) {
          done(r.status());
          return;
        }
        Hold h;
        h.resources = resources;
        h.token = (*r)[0].token();
        for (const Lease& l : *r) {
          h.fencing.push_back(fenced ? std::optional<uint64_t>(l.fencing_token()) : std::nullopt);
        }
        h.leases = *std::move(r);
        done(std::move(h));
      });
      break;
    }
    case Primitive::kRwLock: {
      ReadWriteLock rw(impl, resources[0]);
      if (w.reader) {
        rw.AcquireSharedAsync(ttl, wait, StopToken(), one(resources, "shared", true));
      } else {
        rw.AcquireExclusiveAsync(ttl, wait, StopToken(), one(resources, "exclusive", false));
      }
      break;
    }
    case Primitive::kSemaphore: {
      Semaphore sem(impl, resources[0], config_.permits);
      sem.AcquireAsync(
          ttl, wait, StopToken(),
          [done, resources, k = config_.permits,
           fenced = config_.fencing](absl::StatusOr<Permit> p) mutable {
            if (!p.ok()) {
              done(p.status());
              return;
            }
            Hold h;
            h.resources = resources;
            h.token = p->lease().token();
            h.mode = "slot";
            h.permits = k;
            h.slot = p->slot();
            h.read_only = true;
            h.fencing = {fenced ? std::optional<uint64_t>(p->fencing_token()) : std::nullopt};
            h.leases = {p->lease()};
            done(std::move(h));
          });
      break;
    }
    case Primitive::kFair: {
      if (client < config_.fair_jumpers) {
        // The known-bad client of SimConfig::fair_jumpers: recorded as a
        // fair call, acquired as a plain lock of the same key, which
        // excludes the fair holders but ignores the queue.
        impl->AcquireAsync(resources[0], ttl, wait, StopToken(), one(resources, "fair", false));
        break;
      }
      // As the lab's client: through the Client's entry point, which says
      // when the place is on a quorum (the history's "queued": the end of
      // the enqueue).
      Client::FamilyRequest r;
      r.kind = Client::FamilyRequest::Kind::kFair;
      r.resource = resources[0];
      r.ttl = ttl;
      if (config_.wait_ms > 0) r.wait = wait;
      r.place_ttl = absl::Milliseconds(config_.place_ttl_ms);
      r.on_queued = [this, client, op = w.ops[0], resource = resources[0]] {
        chaos::Event e = NewEvent(chaos::EventType::kQueued, now_, client, op, resource);
        Record(e);
        OnMarker(client, "queued");
      };
      impl->AcquireFamilyAsync(std::move(r), [done, resources, fenced = config_.fencing](
                                                 absl::StatusOr<Client::FamilyGrant> g) mutable {
        if (!g.ok()) {
          done(g.status());
          return;
        }
        Hold h;
        h.resources = resources;
        h.token = g->lease.token();
        h.mode = "fair";
        h.fencing = {fenced ? std::optional<uint64_t>(g->lease.fencing_token()) : std::nullopt};
        h.leases = {std::move(g->lease)};
        done(std::move(h));
      });
      break;
    }
    case Primitive::kElection: {
      Election election(impl, resources[0]);
      CampaignOptions campaign;
      campaign.ttl = ttl;
      campaign.renew.extend = config_.renew && !config_.watch_only;
      campaign.on_lost = [this, client](const absl::Status&) {
        Worker& x = workers_[static_cast<size_t>(client)];
        if (x.hold.has_value()) x.hold->lost = true;
      };
      election.CampaignAsync(
          ctx.name, wait, StopToken(), std::move(campaign),
          [done, resources](absl::StatusOr<std::unique_ptr<Leadership>> l) mutable {
            if (!l.ok()) {
              done(l.status());
              return;
            }
            Hold h;
            h.resources = resources;
            h.leases = {(*l)->lease()};
            h.token = h.leases[0].token();
            h.mode = "leader";
            h.fencing = {(*l)->term()};
            h.leader = *std::move(l);
            done(std::move(h));
          });
      break;
    }
  }
}

void World::WorkerAcquired(int client, absl::StatusOr<Hold> held) {
  Worker& w = workers_[static_cast<size_t>(client)];
  ClientCtx& ctx = clients_[static_cast<size_t>(client)];
  EndCall(client);
  if (!held.ok()) {
    const std::string code = absl::StatusCodeToString(held.status().code());
    std::optional<Outcome> outcome = GetOutcome(held.status());
    if (w.fair_invoke < events_log_.size() && outcome.has_value() &&
        outcome->kind == Outcome::Kind::kWaitExpired) {
      // The wait ran out on the client's clock; a forward jump of that
      // clock (client_clock_jump) ends it sooner in true time than the
      // invoke's wait said. The record says how long it lasted then.
      chaos::Event& invoke = events_log_[w.fair_invoke];
      invoke.wait_ms = std::min(invoke.wait_ms, (now_ - w.invoked_at) / 1000000);
    }
    for (size_t i = 0; i < w.invoked_resources.size(); ++i) {
      chaos::Event e =
          NewEvent(chaos::EventType::kFail, now_, client, w.ops[i], w.invoked_resources[i]);
      e.code = code;
      e.error = std::string(held.status().message());
      // What the library says happened (the lab records it too; S8 excuses
      // a waiter that lost its place or was cancelled).
      if (outcome.has_value()) e.outcome = OutcomeKindName(outcome->kind);
      Record(e);
    }
    w.last_marker = "fail";
    OnMarker(client, "fail");
    if (held.status().code() == absl::StatusCode::kAborted) CheckHeldRefusal(client, code);
    CheckRefusedNodes(client, held.status());
    const int64_t pause = config_.retry_ms / 2 + rng_.Int(0, config_.retry_ms);
    WorkerSleep(client, pause, [this, client] { WorkerNext(client); });
    return;
  }
  CheckRefusedNodes(client, absl::OkStatus());
  Hold& h = *held;
  h.ops = w.ops;
  ++out_.grants;
  grant_times_.push_back(now_);
  const int64_t drift_ms =
      static_cast<int64_t>(std::ceil(static_cast<double>(config_.ttl_ms) * config_.drift_factor +
                                     static_cast<double>(config_.drift_floor_ms)));
  for (size_t i = 0; i < h.resources.size(); ++i) {
    const Lease& lease = h.leases[std::min(i, h.leases.size() - 1)];
    chaos::Event e = NewEvent(chaos::EventType::kGrant, now_, client, h.ops[i], h.resources[i]);
    e.token = lease.token();
    e.start = TrueFromClient(client, lease.acquired_at());
    e.valid_until = TrueFromClient(client, lease.valid_until());
    e.ttl_ms = config_.ttl_ms;
    e.drift_ms = drift_ms;
    e.fencing_token = h.fencing[std::min(i, h.fencing.size() - 1)];
    e.mode = h.mode;
    e.permits = h.permits;
    e.slot = h.slot;
    Record(e);
    grant_tokens_[h.resources[i]].insert(lease.token());
    all_grant_tokens_.insert(lease.token());
  }
  w.last_marker = "grant";
  CheckDurableGrant(client, h);
  if (config_.renew && config_.primitive != Primitive::kElection) {
    RenewOptions renew;
    renew.extend = !config_.watch_only;
    auto lost = [this, client](absl::Status) {
      Worker& x = workers_[static_cast<size_t>(client)];
      if (x.hold.has_value()) x.hold->lost = true;
    };
    absl::StatusOr<std::unique_ptr<Renewal>> renewal =
        config_.primitive == Primitive::kMultiLock
            ? ctx.client->AutoRenewSet(
                  h.leases, config_.all_nodes ? static_cast<int>(config_.nodes.size()) : 0, renew,
                  lost)
            : ctx.client->AutoRenew(h.leases[0], renew, lost);
    if (renewal.ok()) h.renewal = *std::move(renewal);
  }
  h.seen_valid_until = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           h.leases[0].valid_until().time_since_epoch())
                           .count();
  w.hold = std::move(h);
  OnMarker(client, "grant");
  if (w.hold.has_value()) WorkerUse(client);
}

void World::NoteExtension(int client) {
  Worker& w = workers_[static_cast<size_t>(client)];
  Hold& h = *w.hold;
  if (h.renewal == nullptr && !(h.leader != nullptr && config_.renew)) return;
  std::vector<Lease> now_leases;
  if (h.renewal != nullptr) {
    now_leases = h.renewal->leases();
  } else {
    now_leases = {h.leader->lease()};
  }
  if (now_leases.empty()) return;
  const int64_t vu = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         now_leases[0].valid_until().time_since_epoch())
                         .count();
  if (vu == h.seen_valid_until) return;
  h.seen_valid_until = vu;
  for (size_t i = 0; i < h.resources.size() && i < now_leases.size(); ++i) {
    chaos::Event e =
        NewEvent(chaos::EventType::kExtend, TrueFromClient(client, now_leases[i].acquired_at()),
                 client, h.ops[i], h.resources[i]);
    e.token = now_leases[i].token();
    e.valid_until = TrueFromClient(client, now_leases[i].valid_until());
    e.ok = true;
    Record(e);
  }
  h.leases = now_leases;
}

void World::WorkerUse(int client) {
  Worker& w = workers_[static_cast<size_t>(client)];
  if (!w.hold.has_value()) return;
  NoteExtension(client);
  Hold& h = *w.hold;
  const bool lost = h.lost || (h.renewal != nullptr && h.renewal->lost().stop_requested()) ||
                    (h.leader != nullptr && h.leader->lost().stop_requested());
  if (w.stopped || finishing_ || now_ >= workload_end_ || lost ||
      h.uses >= config_.uses_per_lease) {
    WorkerRelease(client);
    return;
  }
  const int64_t left = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           Current(h, 0).valid_until().time_since_epoch())
                           .count() -
                       ClientNow(client);
  const bool manual = config_.extend && !config_.renew;
  if (manual && left < Ms(config_.ttl_ms) / 2) {
    ClientCtx& ctx = clients_[static_cast<size_t>(client)];
    const int64_t t0 = now_;
    const int64_t step = config_.node_timeout_ms + config_.durability_timeout_ms;
    BeginCall(client, "extend", 12 * step + 2000);
    auto after = [this, client, t0](absl::StatusOr<std::vector<Lease>> r) {
      EndCall(client);
      Worker& x = workers_[static_cast<size_t>(client)];
      if (!x.hold.has_value()) return;
      Hold& hh = *x.hold;
      for (size_t i = 0; i < hh.resources.size(); ++i) {
        const Lease& now_lease = r.ok() ? (*r)[std::min(i, r->size() - 1)] : hh.leases[i];
        chaos::Event e =
            NewEvent(chaos::EventType::kExtend, t0, client, hh.ops[i], hh.resources[i]);
        e.token = hh.token;
        e.valid_until = TrueFromClient(client, now_lease.valid_until());
        e.ok = r.ok();
        Record(e);
      }
      if (r.ok()) hh.leases = *std::move(r);
      if (!r.ok() && r.status().code() == absl::StatusCode::kFailedPrecondition) hh.lost = true;
      x.last_marker = "extend";
      OnMarker(client, "extend");
      WorkerUseNow(client);
    };
    const absl::Duration ttl = absl::Milliseconds(config_.ttl_ms);
    if (config_.primitive == Primitive::kMultiLock) {
      ctx.client->StartExtendSet(h.leases, ttl,
                                 config_.all_nodes ? static_cast<int>(config_.nodes.size()) : 0,
                                 ctx.client->ToUser(internal::LeasesCallback(std::move(after))));
    } else {
      ctx.client->ExtendAsync(h.leases[0], ttl,
                              [after = std::move(after)](absl::StatusOr<Lease> r) mutable {
                                if (!r.ok()) {
                                  after(r.status());
                                } else {
                                  after(std::vector<Lease>{*std::move(r)});
                                }
                              });
    }
    return;
  }
  WorkerUseNow(client);
}

void World::WorkerUseNow(int client) {
  Worker& w = workers_[static_cast<size_t>(client)];
  if (!w.hold.has_value()) return;
  Hold& h = *w.hold;
  int64_t left = INT64_MAX;
  for (size_t i = 0; i < h.leases.size(); ++i) {
    left = std::min(left, std::chrono::duration_cast<std::chrono::nanoseconds>(
                              Current(h, i).valid_until().time_since_epoch())
                                  .count() -
                              ClientNow(client));
  }
  if (left < Ms(config_.use_ms + config_.guard_ms)) {
    WorkerRelease(client);
    return;
  }
  const int64_t begin = now_;
  const bool fenced = config_.fenced_store && h.mode != "slot";
  std::vector<int64_t> reads;
  for (size_t i = 0; i < h.resources.size(); ++i) {
    Store& s = store_[h.resources[i]];
    const std::optional<uint64_t> token = h.fencing[std::min(i, h.fencing.size() - 1)];
    if (fenced && token.has_value()) {
      if (*token < s.fence) {
        // The fence refused even the read: a newer holder exists.
        RecordUse(client, h, i, begin, {.read = -1, .wrote = -1, .accepted = false}, token);
        WorkerRelease(client);
        return;
      }
      // Every fenced read raises the fence to the reader's token, as
      // FencedReadScript() does (redlock/fencing.cc), a reader's too: a
      // deposed writer whose token is below it is then refused.
      s.fence = *token;
    }
    reads.push_back(s.value);
  }
  w.in_use = true;
  w.last_marker = "use_read";
  OnMarker(client, "use_read");
  WorkerSleep(client, config_.use_ms,
              [this, client, begin, reads] { WorkerWrite(client, begin, reads); });
}

void World::RecordUse(int client, const Hold& h, size_t i, int64_t begin, UseResult result,
                      std::optional<uint64_t> fencing) {
  chaos::Event e = NewEvent(chaos::EventType::kUse, now_, client, h.ops[i], h.resources[i]);
  e.token = h.token;
  e.begin = begin;
  e.end = now_;
  e.read = result.read;
  e.wrote = result.wrote;
  e.accepted = result.accepted;
  e.fencing_token = fencing;
  e.write = !h.read_only;
  e.write_at = result.write_at;
  Record(e);
}

void World::WorkerWrite(int client, int64_t begin, std::vector<int64_t> reads) {
  Worker& w = workers_[static_cast<size_t>(client)];
  w.in_use = false;
  if (!w.hold.has_value()) return;
  Hold& h = *w.hold;
  const bool fenced = config_.fenced_store && h.mode != "slot";
  for (size_t i = 0; i < h.resources.size() && i < reads.size(); ++i) {
    Store& s = store_[h.resources[i]];
    const std::optional<uint64_t> token = h.fencing[std::min(i, h.fencing.size() - 1)];
    bool accepted = true;
    // When the store was accessed: the write, or for a read-only use its
    // read (the checker's S4 (c) orders accesses by it).
    int64_t write_at = begin;
    if (!h.read_only) {
      write_at = now_;
      if (fenced && token.has_value()) {
        if (*token < s.fence) {
          accepted = false;
        } else {
          s.fence = *token;
        }
      }
      if (accepted) s.value = reads[i] + 1;
    }
    RecordUse(client, h, i, begin,
              {.read = reads[i],
               .wrote = h.read_only ? reads[i] : reads[i] + 1,
               .accepted = accepted,
               .write_at = write_at},
              fenced ? token : std::nullopt);
  }
  ++h.uses;
  w.last_marker = "use_end";
  OnMarker(client, "use_end");
  WorkerUse(client);
}

void World::WorkerRelease(int client) {
  Worker& w = workers_[static_cast<size_t>(client)];
  if (!w.hold.has_value()) return;
  const bool release = config_.release || w.stopped || finishing_ || now_ >= workload_end_;
  if (!release) {
    // Let the lease lapse: wait out its validity, then go on.
    Hold& h = *w.hold;
    const int64_t left = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             Current(h, 0).valid_until().time_since_epoch())
                             .count() -
                         ClientNow(client);
    WorkerSleep(client, std::max<int64_t>(0, left / 1000000) + 1, [this, client] {
      Worker& x = workers_[static_cast<size_t>(client)];
      if (!x.hold.has_value()) return;
      if (x.hold->renewal != nullptr) x.hold->renewal->Stop();
      x.hold.reset();
      WorkerSleep(client, config_.think_ms, [this, client] { WorkerNext(client); });
    });
    return;
  }
  WorkerSleep(client, config_.pre_release_ms, [this, client] {
    Worker& x = workers_[static_cast<size_t>(client)];
    if (!x.hold.has_value()) return;
    NoteExtension(client);
    Hold& h = *x.hold;
    ClientCtx& ctx = clients_[static_cast<size_t>(client)];
    const int64_t t0 = now_;
    const int64_t step = config_.node_timeout_ms + config_.durability_timeout_ms;
    BeginCall(client, "release", 12 * step + 2000);
    auto after = [this, client, t0](absl::Status st) {
      EndCall(client);
      Worker& y = workers_[static_cast<size_t>(client)];
      if (!y.hold.has_value()) return;
      Hold& hh = *y.hold;
      for (size_t i = 0; i < hh.resources.size(); ++i) {
        chaos::Event e =
            NewEvent(chaos::EventType::kRelease, t0, client, hh.ops[i], hh.resources[i]);
        e.token = hh.token;
        e.end = now_;
        e.ok = st.ok();
        Record(e);
      }
      if (hh.renewal != nullptr) hh.renewal->Stop();
      // A leadership's resignation: its Release from here is refused as a
      // blocking call from a callback, after the asynchronous one went out.
      y.hold.reset();
      y.last_marker = "release";
      OnMarker(client, "release");
      WorkerSleep(client, config_.think_ms, [this, client] { WorkerNext(client); });
    };
    if (config_.primitive == Primitive::kMultiLock) {
      std::vector<Lease> leases;
      for (size_t i = 0; i < h.leases.size(); ++i) leases.push_back(Current(h, i));
      ctx.client->StartReleaseSet(std::move(leases),
                                  config_.all_nodes ? static_cast<int>(config_.nodes.size()) : 0,
                                  ctx.client->ToUser(internal::StatusCallback(std::move(after))));
    } else {
      const Lease lease = h.leader != nullptr ? h.leader->lease() : Current(h, 0);
      ctx.client->ReleaseAsync(lease, std::move(after));
    }
  });
}

}  // namespace redlock::sim
