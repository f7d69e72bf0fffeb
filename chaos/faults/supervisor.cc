#include "chaos/faults/supervisor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chaos/base/cleanup.h"

namespace redlock::chaos {
namespace {

// Reads "<len>\r\n" after a type byte at data[*pos]; advances *pos.
// Returns false when the input ends first; sets *bad on malformed input.
bool ReadLength(absl::string_view data, size_t* pos, char type, int64_t* out, bool* bad) {
  if (*pos >= data.size()) return false;
  if (data[*pos] != type) {
    *bad = true;
    return false;
  }
  size_t eol = data.find("\r\n", *pos + 1);
  if (eol == absl::string_view::npos) return false;
  int64_t v = 0;
  if (!absl::SimpleAtoi(data.substr(*pos + 1, eol - *pos - 1), &v) || v < 0 || v > (1 << 29)) {
    *bad = true;
    return false;
  }
  *out = v;
  *pos = eol + 2;
  return true;
}

bool IsWriteOf(const std::vector<std::string>& cmd, const std::string& key) {
  if (cmd.size() < 2) return false;
  std::string name = absl::AsciiStrToLower(cmd[0]);
  if (name == "select" || name == "multi" || name == "exec" || name == "publish") return false;
  for (size_t i = 1; i < cmd.size(); ++i) {
    if (cmd[i] == key) return true;
    // Only the key positions of the usual commands: SET/DEL/UNLINK/PEXPIRE...
    // take keys first; DEL/UNLINK take several.
    if (name != "del" && name != "unlink") break;
  }
  return false;
}

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

}  // namespace

absl::StatusOr<std::vector<AofUnit>> ParseAofUnits(absl::string_view data,
                                                   int64_t* complete_bytes) {
  std::vector<AofUnit> units;
  size_t pos = 0;
  size_t complete = 0;
  AofUnit pending;  // an open MULTI block
  bool in_multi = false;
  for (int guard = 0; guard < 100000000 && pos < data.size(); ++guard) {
    size_t start = pos;
    int64_t argc = 0;
    bool bad = false;
    if (!ReadLength(data, &pos, '*', &argc, &bad)) {
      if (bad)
        return absl::InvalidArgumentError(absl::StrCat("AOF: no command array at byte ", start));
      break;  // torn
    }
    std::vector<std::string> args;
    bool torn = false;
    for (int64_t a = 0; a < argc; ++a) {
      int64_t len = 0;
      if (!ReadLength(data, &pos, '$', &len, &bad)) {
        if (bad)
          return absl::InvalidArgumentError(absl::StrCat("AOF: bad bulk string at byte ", pos));
        torn = true;
        break;
      }
      if (pos + static_cast<size_t>(len) + 2 > data.size()) {
        torn = true;
        break;
      }
      args.emplace_back(data.substr(pos, static_cast<size_t>(len)));
      pos += static_cast<size_t>(len) + 2;
    }
    if (torn) break;
    std::string name = args.empty() ? "" : absl::AsciiStrToLower(args[0]);
    if (!in_multi && name == "multi") {
      in_multi = true;
      pending = AofUnit();
      pending.offset = static_cast<int64_t>(start);
      pending.commands.push_back(std::move(args));
      continue;
    }
    if (in_multi) {
      pending.commands.push_back(std::move(args));
      if (name == "exec") {
        in_multi = false;
        pending.length = static_cast<int64_t>(pos) - pending.offset;
        units.push_back(std::move(pending));
        complete = pos;
      }
      continue;
    }
    AofUnit unit;
    unit.offset = static_cast<int64_t>(start);
    unit.length = static_cast<int64_t>(pos - start);
    unit.commands.push_back(std::move(args));
    units.push_back(std::move(unit));
    complete = pos;
  }
  if (complete_bytes != nullptr) *complete_bytes = static_cast<int64_t>(complete);
  return units;
}

std::string AofTruncation::Describe() const {
  if (file.empty()) return "data dir dropped";
  return absl::StrCat(std::filesystem::path(file).filename().string(), " cut from ", old_size,
                      " to ", new_size, " bytes (", dropped_units, " commands lost)");
}

absl::StatusOr<AofTruncation> TruncateAofTail(const std::string& node_dir,
                                              const AmnesiaSpec& spec) {
  namespace fs = std::filesystem;
  AofTruncation out;
  if (spec.mode == AmnesiaSpec::Mode::kDropDataDir) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(node_dir, ec)) {
      std::string name = entry.path().filename().string();
      if (name == "redis.log" || name == "stdout.log") continue;
      fs::remove_all(entry.path(), ec);
    }
    if (ec) return absl::UnavailableError(absl::StrCat("drop ", node_dir, ": ", ec.message()));
    return out;
  }
  std::string aof_dir = node_dir + "/appendonlydir";
  std::string manifest;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(aof_dir, ec)) {
    if (entry.path().extension() == ".manifest") manifest = entry.path().string();
  }
  if (manifest.empty()) return absl::NotFoundError(absl::StrCat("no AOF manifest in ", aof_dir));
  std::ifstream in(manifest);
  std::string line, incr;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // file <name> seq <n> type <b|h|i>
    if (f.size() >= 6 && f[0] == "file" && f[4] == "type" && f[5] == "i") incr = f[1];
  }
  if (incr.empty()) return absl::NotFoundError(absl::StrCat("no incr file in ", manifest));
  out.file = aof_dir + "/" + incr;
  std::ifstream data_in(out.file, std::ios::binary);
  std::stringstream buf;
  buf << data_in.rdbuf();
  std::string data = buf.str();
  out.old_size = static_cast<int64_t>(data.size());
  int64_t complete = 0;
  absl::StatusOr<std::vector<AofUnit>> units = ParseAofUnits(data, &complete);
  if (!units.ok()) return units.status();
  int64_t cut = complete;
  int dropped = 0;
  if (spec.mode == AmnesiaSpec::Mode::kLastUnits) {
    int n = std::min<int>(spec.drop_units, static_cast<int>(units->size()));
    if (n > 0) cut = (*units)[units->size() - static_cast<size_t>(n)].offset;
    dropped = n;
  } else {
    int found = -1;
    for (int u = static_cast<int>(units->size()) - 1; u >= 0 && found < 0; --u) {
      for (const auto& cmd : (*units)[static_cast<size_t>(u)].commands) {
        if (IsWriteOf(cmd, spec.key)) {
          found = u;
          break;
        }
      }
    }
    if (found < 0) {
      return absl::NotFoundError(absl::StrCat("no write of key \"", spec.key, "\" in ", out.file));
    }
    cut = (*units)[static_cast<size_t>(found)].offset;
    dropped = static_cast<int>(units->size()) - found;
  }
  if (truncate(out.file.c_str(), cut) != 0) return ErrnoStatus("truncate", out.file);
  out.new_size = cut;
  out.dropped_units = dropped;
  return out;
}

// ---- NodeSupervisor -----------------------------------------------------------

std::string NodeSupervisor::NodeName(int i) { return absl::StrCat("n", i); }

absl::StatusOr<std::unique_ptr<NodeSupervisor>> NodeSupervisor::Start(SupervisorOptions options) {
  std::unique_ptr<NodeSupervisor> s(new NodeSupervisor(std::move(options)));
  testkit::FleetOptions fo;
  fo.nodes = s->options_.nodes;
  fo.aof = s->options_.aof;
  fo.hosts = s->options_.hosts;
  fo.extra_args = s->options_.extra_args;
  fo.tls = s->options_.tls;
  fo.enable_debug = false;
  if (s->options_.clock_shim) {
    if (s->options_.clock_dir.empty()) {
      return absl::InvalidArgumentError("clock_shim needs a clock_dir");
    }
    for (int i = 0; i < fo.nodes; ++i) {
      absl::StatusOr<std::unique_ptr<ClockControl>> c =
          ClockControl::Create(absl::StrCat(s->options_.clock_dir, "/n", i, ".clock"));
      if (!c.ok()) return c.status();
      fo.node_env.push_back((*c)->ProcessEnv());
      s->clocks_.push_back(*std::move(c));
    }
  }
  absl::StatusOr<std::unique_ptr<testkit::Fleet>> fleet = testkit::Fleet::Start(std::move(fo));
  if (!fleet.ok()) return fleet.status();
  s->fleet_ = *std::move(fleet);
  s->killed_.assign(static_cast<size_t>(s->fleet_->size()), false);
  s->paused_.assign(static_cast<size_t>(s->fleet_->size()), false);
  return s;
}

NodeSupervisor::~NodeSupervisor() = default;

void NodeSupervisor::Log(absl::string_view fault, int i, absl::string_view detail,
                         FaultPhase phase) {
  const FaultSite site{.nodes = {i}};
  switch (phase) {
    case FaultPhase::kInstant:
      log_.Instant(fault, site, detail);
      break;
    case FaultPhase::kStart:
      log_.Start(fault, site, detail);
      break;
    case FaultPhase::kStop:
      log_.Stop(fault, site.Name(), detail);
      break;
  }
}

bool NodeSupervisor::running(int i) const { return !killed_[static_cast<size_t>(i)]; }
bool NodeSupervisor::paused(int i) const { return paused_[static_cast<size_t>(i)]; }

void NodeSupervisor::ResumeIfPaused(int i) {
  if (paused_[static_cast<size_t>(i)]) {
    absl::Status s = Resume(i);
    (void)s;
  }
}

absl::Status NodeSupervisor::KillProcess(int i) {
  ResumeIfPaused(i);
  absl::Status s = fleet_->Kill(i);
  if (s.ok()) killed_[static_cast<size_t>(i)] = true;
  return s;
}

absl::Status NodeSupervisor::Kill(int i) {
  absl::Status s = KillProcess(i);
  if (!s.ok()) return s;
  Log("kill", i, options_.aof ? "kill -9 (aof always)" : "kill -9 (no persistence)",
      FaultPhase::kStart);
  return absl::OkStatus();
}

absl::Status NodeSupervisor::Record(absl::Status done, std::vector<bool>& state, int i, bool value,
                                    absl::string_view fault, absl::string_view detail,
                                    FaultPhase phase) {
  if (!done.ok()) return done;
  state[static_cast<size_t>(i)] = value;
  Log(fault, i, detail, phase);
  return absl::OkStatus();
}

absl::Status NodeSupervisor::StartNode(int i) {
  return Record(fleet_->StartNode(i), killed_, i, false, "kill", "started again",
                FaultPhase::kStop);
}

absl::Status NodeSupervisor::RestartNow(int i) {
  ResumeIfPaused(i);
  Log("restart", i,
      options_.aof ? "kill -9 + immediate restart (aof always)"
                   : "kill -9 + immediate restart (no persistence)",
      FaultPhase::kInstant);
  absl::Status s = fleet_->Restart(i);
  killed_[static_cast<size_t>(i)] = !s.ok();
  return s;
}

absl::Status NodeSupervisor::RestartDelayed(int i, absl::Duration down) {
  absl::Status s = Kill(i);
  if (!s.ok()) return s;
  InterruptibleSleep(down);
  return StartNode(i);
}

absl::Status NodeSupervisor::RestartAmnesia(int i, const AmnesiaSpec& spec) {
  absl::Status s = KillProcess(i);
  if (!s.ok()) return s;
  absl::StatusOr<AofTruncation> cut = TruncateAofTail(fleet_->dir(i), spec);
  std::string detail =
      cut.ok() ? absl::StrCat("kill -9, ", cut->Describe(), ", restart")
               : absl::StrCat("kill -9, nothing cut (", cut.status().message(), "), restart");
  Log("amnesia", i, detail, FaultPhase::kInstant);
  s = fleet_->StartNode(i);
  if (!s.ok()) return s;
  killed_[static_cast<size_t>(i)] = false;
  if (!cut.ok()) return cut.status();
  return absl::OkStatus();
}

absl::Status NodeSupervisor::Pause(int i) {
  return Record(fleet_->Stop(i), paused_, i, true, "pause", "SIGSTOP", FaultPhase::kStart);
}

absl::Status NodeSupervisor::Resume(int i) {
  return Record(fleet_->Continue(i), paused_, i, false, "pause", "SIGCONT", FaultPhase::kStop);
}

ClockControl* NodeSupervisor::clock(int i) {
  if (static_cast<size_t>(i) >= clocks_.size()) return nullptr;
  return clocks_[static_cast<size_t>(i)].get();
}

absl::Status NodeSupervisor::ClockJump(int i, absl::Duration by) {
  ClockControl* c = clock(i);
  if (c == nullptr)
    return absl::FailedPreconditionError("nodes were not started under the clock shim");
  absl::Status s = c->JumpBy(by);
  if (!s.ok()) return s;
  Log("clock_jump", i,
      absl::StrCat(by >= absl::ZeroDuration() ? "+" : "", absl::FormatDuration(by), " (offset now ",
                   absl::FormatDuration(c->state().realtime), ")"),
      FaultPhase::kInstant);
  return absl::OkStatus();
}

absl::Status NodeSupervisor::ClockStrobe(int i, absl::Duration a, absl::Duration b,
                                         absl::Duration period) {
  ClockControl* c = clock(i);
  if (c == nullptr)
    return absl::FailedPreconditionError("nodes were not started under the clock shim");
  bool was = c->state().mode == ClockState::Mode::kStrobe;
  absl::Status s = c->Strobe(a, b, period);
  if (!s.ok()) return s;
  if (was) Log("clock_strobe", i, "replaced", FaultPhase::kStop);
  Log("clock_strobe", i,
      absl::StrCat(absl::FormatDuration(a), " / ", absl::FormatDuration(b), " every ",
                   absl::FormatDuration(period)),
      FaultPhase::kStart);
  return absl::OkStatus();
}

absl::Status NodeSupervisor::ClockSteady(int i) {
  ClockControl* c = clock(i);
  if (c == nullptr || c->state().mode != ClockState::Mode::kStrobe) return absl::OkStatus();
  ClockState st = c->state();
  absl::Status s = c->SetOffset(st.realtime, st.monotonic);
  if (!s.ok()) return s;
  Log("clock_strobe", i, absl::StrCat("fixed at ", absl::FormatDuration(st.realtime)),
      FaultPhase::kStop);
  return absl::OkStatus();
}

absl::Status NodeSupervisor::HealAll() {
  absl::Status first;
  for (int i = 0; i < size(); ++i) {
    absl::Status s;
    if (paused_[static_cast<size_t>(i)]) s = Resume(i);
    if (s.ok() && killed_[static_cast<size_t>(i)]) s = StartNode(i);
    if (s.ok()) s = ClockSteady(i);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace redlock::chaos
