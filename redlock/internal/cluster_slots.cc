#include "redlock/internal/cluster_slots.h"

#include <algorithm>
#include <array>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "redlock/internal/resp.h"
#include "redlock/internal/url.h"

namespace redlock::internal {
namespace {

// The CRC16 of Redis Cluster (XMODEM: polynomial 0x1021, initial 0), one
// table entry per byte value.
constexpr std::array<uint16_t, 256> MakeCrcTable() {
  std::array<uint16_t, 256> table{};
  for (int b = 0; b < 256; ++b) {
    uint16_t crc = static_cast<uint16_t>(b << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[static_cast<size_t>(b)] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrcTable = MakeCrcTable();

// A port from a reply element: an integer in 1..65535.
bool PortOf(const Reply& r, int* port) {
  if (r.type != Reply::Type::kInteger || r.integer < 1 || r.integer > 65535) return false;
  *port = static_cast<int>(r.integer);
  return true;
}

}  // namespace

uint16_t Crc16(absl::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrcTable[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

absl::string_view HashedPart(absl::string_view key) {
  const size_t open = key.find('{');
  if (open == absl::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == absl::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

bool HasHashTag(absl::string_view key) { return HashedPart(key).size() != key.size(); }

int KeySlot(absl::string_view key) { return Crc16(HashedPart(key)) & (kClusterSlots - 1); }

absl::StatusOr<std::vector<SlotRange>> ParseClusterSlots(const Reply& reply,
                                                         const std::string& peer_host) {
  if (reply.is_error()) {
    return absl::FailedPreconditionError(absl::StrCat("CLUSTER SLOTS failed: ", reply.str));
  }
  if (reply.type != Reply::Type::kArray) {
    return absl::FailedPreconditionError(
        absl::StrCat("CLUSTER SLOTS returned ", reply.Describe(), ", not a slot map"));
  }
  std::vector<SlotRange> out;
  for (const Reply& e : reply.elements) {
    // [first, last, [host, port, id, ...], replicas...]
    if (e.type != Reply::Type::kArray || e.elements.size() < 3 ||
        e.elements[0].type != Reply::Type::kInteger ||
        e.elements[1].type != Reply::Type::kInteger || e.elements[2].type != Reply::Type::kArray ||
        e.elements[2].elements.size() < 2) {
      return absl::FailedPreconditionError(
          absl::StrCat("CLUSTER SLOTS returned an entry that is not [first, last, [host, port, "
                       "...], ...]: ",
                       e.Describe()));
    }
    SlotRange r;
    const int64_t first = e.elements[0].integer, last = e.elements[1].integer;
    if (first < 0 || last < first || last >= kClusterSlots) {
      return absl::FailedPreconditionError(absl::StrCat("CLUSTER SLOTS returned the slot range ",
                                                        first, "-", last, ", outside 0-",
                                                        kClusterSlots - 1));
    }
    r.first = static_cast<int>(first);
    r.last = static_cast<int>(last);
    const Reply& master = e.elements[2];
    if (master.elements[0].type != Reply::Type::kString || !PortOf(master.elements[1], &r.port)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CLUSTER SLOTS returned a master that is not [host, port, ...]: ", master.Describe()));
    }
    r.host = master.elements[0].str;
    // "?" is what a node announces when it hides its address
    // (cluster-preferred-endpoint-type unknown-endpoint): nothing to reach.
    if (r.host == "?") {
      return absl::FailedPreconditionError(absl::StrCat(
          "CLUSTER SLOTS names no address for the master of slots ", r.first, "-", r.last,
          " (cluster-preferred-endpoint-type unknown-endpoint): nothing to connect to"));
    }
    if (r.host.empty()) r.host = peer_host;
    out.push_back(std::move(r));
  }
  if (out.empty()) {
    return absl::FailedPreconditionError(
        "CLUSTER SLOTS returned no slot: the cluster has no master serving any slot yet");
  }
  return out;
}

std::string Redirect::address() const { return JoinHostPort(host, port); }

Command RedirectedCopy(const Command& command, const Redirect& redirect) {
  Command again = command;
  again.after = 0;
  again.pinned = false;
  again.asking_at.clear();
  if (redirect.ask) {
    // Once, to the master importing the slot.
    std::string payload;
    AppendCommand(&payload, {"ASKING"});
    again.payload.insert(0, payload);
    again.replies = static_cast<uint16_t>(again.replies + 1);
    if (again.expect != 0) again.expect |= kExpectStatus;
    again.asking_at = redirect.address();
  }
  return again;
}

absl::StatusOr<Reply> AnswerAfterAsking(absl::StatusOr<Reply> r) {
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.size() != 2) return r;
  if (r->elements[0].is_error()) return std::move(r->elements[0]);
  return std::move(r->elements[1]);
}

bool IsTryAgain(const absl::StatusOr<Reply>& r) {
  return r.ok() && r->is_error() && absl::StartsWith(r->str, "TRYAGAIN");
}

absl::Duration TryAgainPause(absl::Duration node_timeout) {
  return std::max(absl::Milliseconds(1), node_timeout / 10);
}

std::optional<Redirect> ParseRedirect(absl::string_view error) {
  Redirect r;
  if (absl::StartsWith(error, "MOVED ")) {
    error.remove_prefix(6);
  } else if (absl::StartsWith(error, "ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  if (space == absl::string_view::npos) return std::nullopt;
  if (!absl::SimpleAtoi(error.substr(0, space), &r.slot) || r.slot < 0 || r.slot >= kClusterSlots) {
    return std::nullopt;
  }
  absl::string_view address = error.substr(space + 1);
  // "host:port"; an IPv6 host is written without brackets, so the port is
  // after the last colon.
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return std::nullopt;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &r.port) || r.port < 1 || r.port > 65535) {
    return std::nullopt;
  }
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  r.host = std::string(host);
  return r;
}

}  // namespace redlock::internal
