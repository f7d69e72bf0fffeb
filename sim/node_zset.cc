// sim/node_zset.cc: the sorted-set commands the lock family's scripts use
// (ZADD, ZINCRBY, ZREM, ZSCORE, ZCARD, ZCOUNT, ZRANGE by rank,
// ZRANGEBYSCORE, ZREMRANGEBYSCORE), with Redis 7.0's options, checks and
// error texts.

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "sim/node_state.h"

namespace redlock::sim::node_internal {
namespace {

struct Range {
  double min = 0;
  double max = 0;
  bool minex = false;
  bool maxex = false;
  bool Contains(double v) const {
    return (minex ? v > min : v >= min) && (maxex ? v < max : v <= max);
  }
  bool Empty() const { return min > max || (min == max && (minex || maxex)); }
};

// zslParseRange: strtod after an optional '(' (leading spaces pass).
bool ParseBound(const std::string& s, double* v, bool* exclusive) {
  const char* p = s.c_str();
  *exclusive = false;
  if (*p == '(') {
    *exclusive = true;
    ++p;
  }
  char* end = nullptr;
  *v = strtod(p, &end);
  return *end == '\0' && !std::isnan(*v);
}

bool ParseRange(const std::string& min, const std::string& max, Range* r) {
  return ParseBound(min, &r->min, &r->minex) && ParseBound(max, &r->max, &r->maxex);
}

Reply RangeError() { return Err("min or max is not a float"); }
Reply NotFloat() { return Err("value is not a valid float"); }

// The sorted set at `key`: *wrong set when the key holds another type.
ZSet* FindZSet(State& s, Ctx& ctx, const std::string& key, bool* wrong) {
  *wrong = false;
  Entry* e = s.Find(ctx, key);
  if (e == nullptr) return nullptr;
  if (!e->value.is_zset) {
    *wrong = true;
    return nullptr;
  }
  return &e->value.zset;
}

// What ZCOUNT, ZRANGEBYSCORE and ZREMRANGEBYSCORE start with: the score
// range a[2]..a[3] into *r and the sorted set at a[1] into *z (null: none).
// The server's error reply for a bad range or a key of another type.
std::optional<Reply> ScoreRangeOf(State& s, Ctx& ctx, const Argv& a, Range* r, ZSet** z) {
  if (!ParseRange(a[2], a[3], r)) return RangeError();
  bool wrong = false;
  *z = FindZSet(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  return std::nullopt;
}

void DeleteIfEmpty(State& s, Ctx& ctx, const std::string& key) {
  Entry* e = s.Find(ctx, key);
  if (e != nullptr && e->value.is_zset && e->value.zset.size() == 0) s.Delete(ctx.db, key, *e);
}

Reply ZAddGeneric(State& s, Ctx& ctx, const Argv& a, bool zincrby) {
  bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = zincrby;
  size_t idx = 2;
  if (!zincrby) {
    for (; idx < a.size(); ++idx) {
      const std::string& o = a[idx];
      if (IEquals(o, "nx")) {
        nx = true;
      } else if (IEquals(o, "xx")) {
        xx = true;
      } else if (IEquals(o, "ch")) {
        ch = true;
      } else if (IEquals(o, "incr")) {
        incr = true;
      } else if (IEquals(o, "gt")) {
        gt = true;
      } else if (IEquals(o, "lt")) {
        lt = true;
      } else {
        break;
      }
    }
  }
  const size_t rest = a.size() - idx;
  if (rest == 0 || rest % 2 != 0) return Syntax();
  const size_t pairs = rest / 2;
  if (xx && nx) return Err("XX and NX options at the same time are not compatible");
  if ((gt && nx) || (lt && nx) || (gt && lt)) {
    return Err("GT, LT, and/or NX options at the same time are not compatible");
  }
  if (incr && pairs > 1) return Err("INCR option supports a single increment-element pair");
  std::vector<double> scores(pairs);
  for (size_t j = 0; j < pairs; ++j) {
    if (!ParseDouble(a[idx + 2 * j], &scores[j])) return NotFloat();
  }
  const std::string& key = a[1];
  bool wrong = false;
  ZSet* z = FindZSet(s, ctx, key, &wrong);
  if (wrong) return WrongType();
  int64_t added = 0, updated = 0, processed = 0;
  double last = 0;
  Entry* entry = nullptr;
  if (z == nullptr) {
    if (xx) return incr ? Reply::Nil() : Reply::Integer(0);
    entry = &s.Upsert(ctx, key);
    entry->value.is_zset = true;
    z = &entry->value.zset;
  } else {
    entry = s.Find(ctx, key);
  }
  Reply error;
  bool failed = false;
  for (size_t j = 0; j < pairs; ++j) {
    double score = scores[j];
    const std::string& member = a[idx + 2 * j + 1];
    if (std::isnan(score)) {
      failed = true;
      break;
    }
    auto it = z->scores.find(member);
    if (it != z->scores.end()) {
      if (nx) continue;
      const double cur = it->second;
      if (incr) {
        score += cur;
        if (std::isnan(score)) {
          failed = true;
          break;
        }
      }
      if ((lt && score >= cur) || (gt && score <= cur)) continue;
      last = score;
      ++processed;
      if (score != cur) {
        z->Set(member, score);
        ++updated;
      }
    } else if (!xx) {
      z->Set(member, score);
      last = score;
      ++processed;
      ++added;
    }
  }
  if (added + updated > 0) s.Changed(ctx.db, key, *entry);
  if (z->size() == 0) {
    // Created for nothing (every element refused): no key after all.
    entry->present = false;
    entry->value = Value();
  }
  if (failed) return Err("resulting score is not a number (NaN)");
  if (incr) return processed > 0 ? Reply::String(FormatDouble(last)) : Reply::Nil();
  return Reply::Integer(ch ? added + updated : added);
}

}  // namespace

Reply ZAddCmd(State& s, Ctx& ctx, const Argv& a) { return ZAddGeneric(s, ctx, a, false); }

Reply ZIncrByCmd(State& s, Ctx& ctx, const Argv& a) { return ZAddGeneric(s, ctx, a, true); }

Reply ZRemCmd(State& s, Ctx& ctx, const Argv& a) {
  bool wrong = false;
  ZSet* z = FindZSet(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  if (z == nullptr) return Reply::Integer(0);
  int64_t removed = 0;
  for (size_t i = 2; i < a.size(); ++i) removed += z->Remove(a[i]) ? 1 : 0;
  if (removed > 0) {
    s.Changed(ctx.db, a[1], *s.Find(ctx, a[1]));
    DeleteIfEmpty(s, ctx, a[1]);
  }
  return Reply::Integer(removed);
}

Reply ZScoreCmd(State& s, Ctx& ctx, const Argv& a) {
  bool wrong = false;
  ZSet* z = FindZSet(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  if (z == nullptr) return Reply::Nil();
  auto it = z->scores.find(a[2]);
  if (it == z->scores.end()) return Reply::Nil();
  return Reply::String(FormatDouble(it->second));
}

Reply ZCardCmd(State& s, Ctx& ctx, const Argv& a) {
  bool wrong = false;
  ZSet* z = FindZSet(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  return Reply::Integer(z == nullptr ? 0 : static_cast<int64_t>(z->size()));
}

Reply ZCountCmd(State& s, Ctx& ctx, const Argv& a) {
  Range r;
  ZSet* z = nullptr;
  if (std::optional<Reply> e = ScoreRangeOf(s, ctx, a, &r, &z)) return *std::move(e);
  if (z == nullptr || r.Empty()) return Reply::Integer(0);
  int64_t n = 0;
  for (const auto& [score, member] : z->order) n += r.Contains(score) ? 1 : 0;
  return Reply::Integer(n);
}

// ZRANGE key start stop [WITHSCORES]: by rank, negative ranks from the end
// (the fair lock's head and highest ticket). Its BYSCORE, BYLEX, REV and
// LIMIT forms are not simulated: a syntax error.
Reply ZRangeCmd(State& s, Ctx& ctx, const Argv& a) {
  bool withscores = false;
  for (size_t j = 4; j < a.size(); ++j) {
    if (!IEquals(a[j], "withscores")) return Syntax();
    withscores = true;
  }
  int64_t start = 0;
  int64_t stop = 0;
  if (!ParseInt(a[2], &start) || !ParseInt(a[3], &stop)) return NotInteger();
  bool wrong = false;
  ZSet* z = FindZSet(s, ctx, a[1], &wrong);
  if (wrong) return WrongType();
  std::vector<Reply> out;
  if (z == nullptr) return Reply::Array(std::move(out));
  const int64_t n = static_cast<int64_t>(z->size());
  if (start < 0) start += n;
  if (stop < 0) stop += n;
  if (start < 0) start = 0;
  if (start > stop || start >= n) return Reply::Array(std::move(out));
  if (stop >= n) stop = n - 1;
  int64_t rank = 0;
  for (const auto& [score, member] : z->order) {
    if (rank > stop) break;
    if (rank++ < start) continue;
    out.push_back(Reply::String(member));
    if (withscores) out.push_back(Reply::String(FormatDouble(score)));
  }
  return Reply::Array(std::move(out));
}

Reply ZRangeByScoreCmd(State& s, Ctx& ctx, const Argv& a) {
  bool withscores = false;
  int64_t offset = 0;
  int64_t limit = -1;
  for (size_t j = 4; j < a.size(); ++j) {
    const size_t left = a.size() - j - 1;
    if (IEquals(a[j], "withscores")) {
      withscores = true;
    } else if (IEquals(a[j], "limit") && left >= 2) {
      if (!ParseInt(a[j + 1], &offset) || !ParseInt(a[j + 2], &limit)) return NotInteger();
      j += 2;
    } else {
      return Syntax();
    }
  }
  Range r;
  ZSet* z = nullptr;
  if (std::optional<Reply> e = ScoreRangeOf(s, ctx, a, &r, &z)) return *std::move(e);
  std::vector<Reply> out;
  if (z == nullptr || r.Empty() || offset < 0) return Reply::Array(std::move(out));
  for (const auto& [score, member] : z->order) {
    if (!r.Contains(score)) {
      if (score > r.max) break;
      continue;
    }
    if (offset > 0) {
      --offset;
      continue;
    }
    if (limit == 0) break;
    if (limit > 0) --limit;
    out.push_back(Reply::String(member));
    if (withscores) out.push_back(Reply::String(FormatDouble(score)));
  }
  return Reply::Array(std::move(out));
}

Reply ZRemRangeByScoreCmd(State& s, Ctx& ctx, const Argv& a) {
  Range r;
  ZSet* z = nullptr;
  if (std::optional<Reply> e = ScoreRangeOf(s, ctx, a, &r, &z)) return *std::move(e);
  if (z == nullptr || r.Empty()) return Reply::Integer(0);
  std::vector<std::string> gone;
  for (const auto& [score, member] : z->order) {
    if (r.Contains(score)) gone.push_back(member);
  }
  for (const std::string& m : gone) z->Remove(m);
  if (!gone.empty()) {
    s.Changed(ctx.db, a[1], *s.Find(ctx, a[1]));
    DeleteIfEmpty(s, ctx, a[1]);
  }
  return Reply::Integer(static_cast<int64_t>(gone.size()));
}

}  // namespace redlock::sim::node_internal
