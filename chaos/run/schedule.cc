#include "chaos/run/schedule.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "chaos/base/cleanup.h"
#include "chaos/run/run.h"

namespace redlock::chaos {
namespace {

std::string Where(size_t i, const ScheduleEntry& e) {
  return e.line > 0 ? absl::StrCat("entry ", i + 1, " (line ", e.line, ")")
                    : absl::StrCat("entry ", i + 1);
}

absl::Duration Draw(Run& run, const Span& lo, const Span& hi) {
  absl::Duration a = lo.Resolve(run.scale()), b = hi.Resolve(run.scale());
  if (b <= a) return a;
  int64_t span_us = absl::ToInt64Microseconds(b - a);
  return a +
         absl::Microseconds(static_cast<int64_t>(run.Uniform(0, static_cast<uint64_t>(span_us))));
}

using Clock = std::chrono::steady_clock;

// One entry's progress through its trigger.
class EntryPlayer {
 public:
  EntryPlayer(Run& run, const ScheduleEntry& entry, Clock::time_point begin)
      : run_(run), e_(entry), t_(entry.trigger) {
    max_ = t_.type == Trigger::Type::kAt
               ? 1
               : (t_.times > 0 ? t_.times : (t_.type == Trigger::Type::kOnMarker ? 1 : 0));
    if (t_.after >= 0) {
      state_ = State::kDormant;  // until the entry it follows has fired
      next_ = Clock::time_point::max();
    } else {
      Begin(begin);
    }
  }

  // Starts the trigger's clock (`at` counts from here).
  void Begin(Clock::time_point from) {
    next_ = from + absl::ToChronoNanoseconds(t_.at.Resolve(run_.scale()));
    state_ = t_.type == Trigger::Type::kOnMarker ? State::kStartWaiting : State::kFire;
  }
  bool dormant() const { return state_ == State::kDormant; }
  int after() const { return t_.after; }
  int fired() const { return fired_; }

  bool done() const { return state_ == State::kDone; }
  // When this entry next needs the loop (max() while it only waits for a
  // marker without a deadline).
  Clock::time_point next() const {
    Clock::time_point n = state_ == State::kDone ? Clock::time_point::max() : next_;
    for (const auto& h : heals_) n = std::min(n, h.first);
    return n;
  }
  bool idle() const { return state_ == State::kDone && heals_.empty(); }

  // Advances on time; returns a harness error.
  absl::Status Tick(Clock::time_point now) {
    for (size_t i = 0; i < heals_.size();) {
      if (heals_[i].first > now) {
        ++i;
        continue;
      }
      absl::Status s = run_.Heal(heals_[i].second);
      if (!s.ok()) return s;
      heals_.erase(heals_.begin() + static_cast<ptrdiff_t>(i));
    }
    while (state_ != State::kDone && now >= next_) {
      switch (state_) {
        case State::kStartWaiting:
          StartWaiting(now, t_.within);
          break;
        case State::kWaiting:  // the deadline passed without a marker
          if (!retried_ && !t_.otherwise_heal.empty()) {
            for (const std::string& k : t_.otherwise_heal) {
              absl::Status s = run_.HealKind(k);
              if (!s.ok()) return s;
            }
            run_.Note(absl::StrCat("no ", t_.marker, " marker within ",
                                   t_.within ? t_.within->ToString() : "the run", ": healed ",
                                   absl::StrJoin(t_.otherwise_heal, ", "), " and waiting again"));
            retried_ = true;
            StartWaiting(now, t_.retry_within);
          } else if (t_.always) {
            run_.Note(absl::StrCat("no ", t_.marker, " marker: injecting anyway"));
            marker_client_ = -1;
            marker_resource_.clear();
            state_ = State::kFire;
          } else {
            state_ = State::kDone;
          }
          break;
        case State::kFire: {
          absl::Status s = Fire(now);
          if (!s.ok()) return s;
          break;
        }
        case State::kHealing:
          // Heals are the run's (they may outlive this entry); the entry
          // waits for its last fault's heal time, then settles.
          state_ = State::kSettling;
          next_ = now + absl::ToChronoNanoseconds(t_.type == Trigger::Type::kRepeat
                                                      ? Draw(run_, t_.gap_lo, t_.gap_hi)
                                                      : t_.settle.Resolve(run_.scale()));
          break;
        case State::kSettling:
          AfterSettle(now);
          break;
        case State::kDormant:
        case State::kDone:
          break;
      }
    }
    return absl::OkStatus();
  }

  // A new marker: may end a wait.
  void OnMarker(const Marker& m, Clock::time_point now) {
    // The lock-free state follows every marker, waiting or not.
    if (m.kind == "release") {
      free_ = true;
      others_ = false;
    } else if (m.kind == "grant") {
      free_ = false;
    } else if (m.kind == "invoke" && m.client != t_.client) {
      others_ = true;
    }
    if (state_ != State::kWaiting || m.seq <= after_seq_) return;
    if (m.kind != t_.marker || (t_.client >= 0 && m.client != t_.client)) return;
    if (t_.lock_free && !(free_ && !others_)) return;
    marker_client_ = m.client;
    marker_resource_ = m.resource;
    state_ = State::kFire;
    next_ = now + absl::ToChronoNanoseconds(t_.delay.Resolve(run_.scale()));
  }

  // Markers already seen before this entry started (since_start).
  void Replay(const std::vector<Marker>& seen, Clock::time_point now) {
    for (const Marker& m : seen) {
      if (state_ != State::kWaiting) return;
      OnMarker(m, now);
    }
  }
  bool wants_history() const { return state_ == State::kWaiting && t_.since_start && !replayed_; }
  void set_replayed() { replayed_ = true; }

 private:
  enum class State { kDormant, kStartWaiting, kWaiting, kFire, kHealing, kSettling, kDone };

  void StartWaiting(Clock::time_point now, const std::optional<Span>& within) {
    state_ = State::kWaiting;
    after_seq_ = t_.since_start && !retried_ && fired_ == 0 ? 0 : run_.MarkerSeq();
    next_ = within ? now + absl::ToChronoNanoseconds(within->Resolve(run_.scale()))
                   : Clock::time_point::max();
  }

  absl::Status Fire(Clock::time_point now) {
    std::vector<const FaultTemplate*> todo;
    switch (e_.pick) {
      case ScheduleEntry::Pick::kAll:
        for (const FaultTemplate& f : e_.faults) todo.push_back(&f);
        break;
      case ScheduleEntry::Pick::kOne:
        todo.push_back(&e_.faults[run_.Uniform(0, e_.faults.size() - 1)]);
        break;
      case ScheduleEntry::Pick::kCycle:
        todo.push_back(&e_.faults[static_cast<size_t>(fired_) % e_.faults.size()]);
        break;
    }
    absl::Duration longest = absl::ZeroDuration();
    for (const FaultTemplate* t : todo) {
      absl::StatusOr<FaultInstance*> f = run_.Inject(*t, marker_client_, marker_resource_);
      if (!f.ok()) return f.status();
      if (!(*f)->kind->info().lasting) continue;
      longest = std::max(longest, (*f)->duration);
      if ((*f)->duration != absl::InfiniteDuration()) {
        heals_.push_back({Clock::now() + absl::ToChronoNanoseconds((*f)->duration), *f});
      }
    }
    ++fired_;
    (void)now;
    if (longest == absl::InfiniteDuration()) {
      state_ = State::kDone;  // healed when the run ends
      return absl::OkStatus();
    }
    state_ = State::kHealing;
    next_ = Clock::now() + absl::ToChronoNanoseconds(longest);
    return absl::OkStatus();
  }

  void AfterSettle(Clock::time_point now) {
    bool stop = max_ > 0 && fired_ >= max_;
    if (!stop && t_.until != 0) {
      stop = t_.until_any ? run_.FoundAny(t_.until) : run_.FoundAll(t_.until);
    }
    if (stop || t_.type == Trigger::Type::kAt) {
      state_ = State::kDone;
    } else if (t_.type == Trigger::Type::kRepeat) {
      state_ = State::kFire;
      next_ = now;
    } else {
      StartWaiting(now, t_.within);
    }
  }

  Run& run_;
  const ScheduleEntry& e_;
  const Trigger& t_;
  State state_;
  Clock::time_point next_;
  int max_ = 1;
  int fired_ = 0;
  bool retried_ = false;
  bool replayed_ = false;
  int64_t after_seq_ = 0;
  int marker_client_ = -1;
  std::string marker_resource_;
  bool free_ = false, others_ = false;
  std::vector<std::pair<Clock::time_point, FaultInstance*>> heals_;
};

}  // namespace

absl::Status ValidateSchedule(const Schedule& schedule, const RunShape& shape) {
  for (size_t i = 0; i < schedule.entries.size(); ++i) {
    const ScheduleEntry& e = schedule.entries[i];
    const Trigger& t = e.trigger;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(Where(i, e), ": ", why));
    };
    if (e.faults.empty()) return bad("no fault");
    if (t.after >= 0 && static_cast<size_t>(t.after) >= i) {
      return bad("\"after\" names an earlier entry (1 for the first)");
    }
    if (t.type == Trigger::Type::kOnMarker) {
      static const char* kMarkers[] = {"invoke",  "grant",  "fail",    "use_read",
                                       "use_end", "extend", "release", "queued"};
      if (std::find(std::begin(kMarkers), std::end(kMarkers), t.marker) == std::end(kMarkers)) {
        return bad(
            absl::StrCat("unknown marker \"", t.marker,
                         "\" (invoke, grant, fail, use_read, use_end, extend, release or queued)"));
      }
      if (t.client >= shape.clients) {
        return bad(absl::StrCat("client c", t.client + 1, " does not exist (", shape.clients,
                                " clients)"));
      }
    }
    for (const FaultTemplate& f : e.faults) {
      absl::Status s = ValidateTemplate(f);
      if (s.ok()) s = CheckSupported(f, shape);
      if (!s.ok()) {
        return absl::Status(
            s.code(),
            absl::StrCat(Where(i, e), f.line > 0 ? absl::StrCat(", fault at line ", f.line) : "",
                         ": ", s.message()));
      }
      if (f.clients.mode == TargetSel::Mode::kMarker && t.type != Trigger::Type::kOnMarker) {
        return bad("clients: marker needs an \"on\" trigger");
      }
    }
  }
  return absl::OkStatus();
}

std::string DescribeSchedule(const Schedule& schedule) {
  std::vector<std::string> lines;
  for (const ScheduleEntry& e : schedule.entries) {
    const Trigger& t = e.trigger;
    std::string when;
    switch (t.type) {
      case Trigger::Type::kAt:
        when = absl::StrCat("at ", t.at.ToString());
        break;
      case Trigger::Type::kRepeat:
        when = absl::StrCat("repeat", t.times > 0 ? absl::StrCat(" x", t.times) : "", " from ",
                            t.at.ToString());
        break;
      case Trigger::Type::kOnMarker:
        when = absl::StrCat(
            "on ", t.marker, t.client >= 0 ? absl::StrCat(" of c", t.client + 1) : "",
            t.lock_free ? " (lock free)" : "", t.times > 1 ? absl::StrCat(" x", t.times) : "");
        break;
    }
    std::vector<std::string> faults;
    for (const FaultTemplate& f : e.faults) faults.push_back(DescribeTemplate(f));
    const char* join = e.pick == ScheduleEntry::Pick::kAll ? " + " : " | ";
    lines.push_back(absl::StrCat(when, ": ", absl::StrJoin(faults, join)));
  }
  return absl::StrJoin(lines, "\n");
}

absl::Status PlaySchedule(Run& run, const Schedule& schedule) {
  const Clock::time_point begin = Clock::now();
  std::vector<std::unique_ptr<EntryPlayer>> players;
  for (const ScheduleEntry& e : schedule.entries) {
    players.push_back(std::make_unique<EntryPlayer>(run, e, begin));
  }
  // From the first marker of the run: entries with since_start see the
  // markers of the clients' start-up too.
  int64_t seen_seq = 0;
  std::vector<Marker> history;  // for since_start entries that start late
  // Bounded: the loop ends with the budget; each turn waits at most 50 ms.
  while (run.Active()) {
    Clock::time_point now = Clock::now();
    for (auto& p : players) {
      // An entry that follows another begins once that one has fired.
      if (p->dormant() && players[static_cast<size_t>(p->after())]->fired() > 0) p->Begin(now);
      if (p->wants_history()) {
        p->Replay(history, now);
        p->set_replayed();
      }
      absl::Status s = p->Tick(now);
      if (!s.ok()) return s;
    }
    bool all_done = std::all_of(players.begin(), players.end(), [](auto& p) { return p->idle(); });
    if (all_done) {
      run.Sleep(run.Remaining());
      break;
    }
    Clock::time_point next = Clock::time_point::max();
    for (auto& p : players) next = std::min(next, p->next());
    now = Clock::now();
    absl::Duration wait = next <= now
                              ? absl::ZeroDuration()
                              : std::min(absl::Milliseconds(50), absl::FromChrono(next - now));
    // Every marker that has arrived (waiting at most until the next due
    // time for the first).
    for (const Marker& m : run.MarkersSince(seen_seq, wait)) {
      seen_seq = m.seq;
      if (history.size() < 100000) history.push_back(m);
      for (auto& p : players) p->OnMarker(m, Clock::now());
    }
  }
  return absl::OkStatus();
}

}  // namespace redlock::chaos
